"""Driver side: decide each micro-batch's offset ranges.

The end of each range is the partition's high watermark *as carried in a fetch
response*: some brokers (the local Tansu) answer ListOffsets(latest) short of the real
end when producers batch, while the fetch-response watermark is right on every broker.
So each plan opens a consumer, fetches a little at the tail of each partition by
explicit assignment (no consumer group), reads the watermarks the fetch carried, and
closes it. A consumer kept between plans leaves a long-poll fetch in flight at the tail,
and librdkafka sends it no new fetch before that one returns: every plan then waited up
to ``fetch.wait.max.ms`` (measured on an idle topic: 2.0 s a plan with one consumer
kept, 2-7 ms with a fresh one).
"""

from __future__ import annotations

import logging
import time
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from confluent_kafka import Consumer, KafkaError, KafkaException, TopicCollection, TopicPartition

from lakehouse import kafka_clients
from lakehouse.errors import FatalError
from pipeline import metrics
from pipeline.kafka_source.offsets import in_current_log
from pipeline.kafka_source.ranges import OffsetRange, Offsets

if TYPE_CHECKING:
    from lakehouse.settings import Settings

log = logging.getLogger(__name__)


class OffsetsExpiredError(FatalError):
    """Committed offsets point below what the broker still retains: records were lost."""


@dataclass(frozen=True)
class Watermarks:
    low: int  # first retained offset
    high: int  # one past the last readable offset


class Planner:
    def __init__(self, bootstrap: str, topics: list[str], max_per_partition: int, on_expired: str = "fail",
                 probe_timeout: float = 5.0, fetch_wait_ms: int = 2000):
        self.topics = topics
        self.max_per_partition = max_per_partition
        self.on_expired = on_expired
        self.probe_timeout = probe_timeout
        #: the latest out-of-range positions met (topic, partition, committed, low), for a look after the fact
        self.expired_events: deque[tuple[str, int, int, int]] = deque(maxlen=100)
        self._last_high: dict[tuple[str, int], int] = {}
        self.topic_ids: dict[str, str] = {}  # as of the last plan: what a commit of its ranges records
        self._bootstrap, self._fetch_wait_ms = bootstrap, fetch_wait_ms
        self._admin = kafka_clients.admin(bootstrap)

    @classmethod
    def from_settings(cls, settings: Settings, topics: list[str]) -> Planner:
        """The planner every pipeline job uses: limits and waits from the one settings object."""
        return cls(settings.kafka.bootstrap, topics, settings.pipeline.max_records_per_partition,
                   settings.pipeline.on_offsets_expired, settings.kafka.probe_timeout_seconds,
                   settings.kafka.fetch_wait_max_ms)

    def close(self) -> None:
        """Nothing is held between plans (see the module docstring); kept for the jobs' symmetry."""

    def current_topic_ids(self) -> dict[str, str]:
        """Each topic's id (Kafka's topic UUID) now: a new id means a new log (see ``offsets``)."""
        try:
            described = self._admin.describe_topics(TopicCollection(self.topics), request_timeout=10)
            return {topic: str(future.result().topic_id) for topic, future in described.items()}
        except KafkaException as exc:
            raise RuntimeError(f"could not describe topics {self.topics}: {exc}") from exc

    def partitions(self) -> list[tuple[str, int]]:
        meta = self._admin.list_topics(timeout=10)
        out: list[tuple[str, int]] = []
        for topic in self.topics:
            if topic not in meta.topics or meta.topics[topic].error is not None:
                raise RuntimeError(f"topic {topic!r} does not exist on {self._bootstrap}: create it (stack up does)")
            out.extend((topic, p) for p in sorted(meta.topics[topic].partitions))
        return out

    def _probe_consumer(self) -> Consumer:
        return kafka_clients.reader(self._bootstrap, "planner", {
            "fetch.wait.max.ms": self._fetch_wait_ms,  # the probe's record exists: real Kafka answers at once
            "max.partition.fetch.bytes": 65536,
        })

    def watermarks(self, starts: dict[tuple[str, int], int]) -> dict[tuple[str, int], Watermarks]:
        """Fetch at the tail of every partition, then read the watermarks the fetch returned."""
        assignment = []
        for (topic, part), start in starts.items():
            probe = max(start, self._last_high.get((topic, part), 0) - 1, 0)
            assignment.append(TopicPartition(topic, part, probe))
        consumer = self._probe_consumer()
        try:
            consumer.assign(assignment)
            return self._read_tails(consumer, starts)
        finally:
            consumer.close()

    def _read_tails(self, consumer: Consumer, starts: dict[tuple[str, int], int]) -> dict[tuple[str, int], Watermarks]:
        pending = set(starts)
        deadline = time.monotonic() + self.probe_timeout
        while pending and time.monotonic() < deadline:
            msg = consumer.poll(0.1)
            if msg is None:
                continue
            err = msg.error()
            if err is not None and err.code() != KafkaError._PARTITION_EOF:
                log.info("probe of %s[%s]: %s", msg.topic(), msg.partition(), err)
                if msg.topic() is None or msg.partition() is None:
                    continue  # not about one partition: keep waiting
            pending.discard((msg.topic(), msg.partition()))
        out = {(topic, part): self._unanswered(consumer, topic, part, starts[(topic, part)])
               for topic, part in sorted(pending)}
        for topic, part in starts:
            if (topic, part) in out:
                continue
            tp = TopicPartition(topic, part)
            low, high = consumer.get_watermark_offsets(tp, cached=True)
            if low < 0 or high < 0:  # not carried by the fetch (e.g. an out-of-range reply): ask
                listed_low, listed_high = consumer.get_watermark_offsets(tp, timeout=10, cached=False)
                low = listed_low if low < 0 else low
                high = listed_high if high < 0 else high
            self._last_high[(topic, part)] = high
            out[(topic, part)] = Watermarks(low=max(low, 0), high=high)
        return out

    def _unanswered(self, consumer: Consumer, topic: str, part: int, start: int) -> Watermarks:
        """Watermarks for a partition whose tail fetch got no answer in time: ask ListOffsets instead.

        A slow broker is not a lost log. Tansu's S3 engine lists every stored batch of a
        partition on each fetch, so a long topic can answer slower than the probe waits;
        then the batch is planned up to the end ListOffsets gives (which may be short: the
        rest comes next batch). Only an offset beyond both that end and any end this
        planner has seen answered is taken as outside the log (some brokers never answer
        a fetch there), and ``plan`` reports it.
        """
        low, high = consumer.get_watermark_offsets(TopicPartition(topic, part), timeout=10, cached=False)
        seen = self._last_high.get((topic, part), -1)
        if low <= start <= high or low <= start <= seen:
            log.warning("no fetch answer within %.1fs for %s[%s]; planning to the broker's listed end %s "
                        "(raise LAKEHOUSE_KAFKA__PROBE_TIMEOUT_SECONDS if this repeats)",
                        self.probe_timeout, topic, part, max(start, high))
            return Watermarks(low=max(low, 0), high=max(start, high))
        return Watermarks(low=max(low, 0), high=high)

    def plan(self, committed: Offsets, committed_ids: dict[str, str] | None = None
             ) -> tuple[list[OffsetRange], dict[tuple[str, int], Watermarks]]:
        """Ranges from the committed offsets to the current end, capped per partition.

        ``committed_ids`` are the topic ids the offsets were committed with: a topic whose id
        changed since is a new log, read from its start.
        """
        partitions = self.partitions()
        previous, self.topic_ids = self.topic_ids, self.current_topic_ids()
        for topic in [t for t in previous if previous[t] != self.topic_ids.get(t)]:
            # The tails seen in the topic's old life are past the end of its new log: probing there waits for nothing.
            self._last_high = {tp: high for tp, high in self._last_high.items() if tp[0] != topic}
        kept = in_current_log(committed, committed_ids or {}, self.topic_ids)
        for topic in committed.keys() - kept.keys():
            log.warning("topic %s is a new log (id %s, was %s when last committed): the broker restarted on "
                        "in-memory storage, or the topic was deleted and created again; reading it from its start",
                        topic, self.topic_ids.get(topic), (committed_ids or {}).get(topic))
        committed = kept
        starts = {(t, p): committed.get(t, {}).get(p, 0) for t, p in partitions}
        marks = self.watermarks(starts)
        ranges = []
        for (topic, part), start in starts.items():
            wm = marks[(topic, part)]
            if start < wm.low or start > wm.high:
                start = self._handle_out_of_range(topic, part, start, wm)
            end = min(wm.high, start + self.max_per_partition)
            ranges.append(OffsetRange(topic, part, start, max(start, end)))
        return ranges, marks

    def _handle_out_of_range(self, topic: str, part: int, start: int, wm: Watermarks) -> int:
        """Counted here, for every job that plans (only the click job used to drain ``expired_events``
        into the metric: the CDC topics' events piled up uncounted)."""
        self.expired_events.append((topic, part, start, wm.low))
        metrics.OFFSETS_EXPIRED.labels(topic, str(part)).inc()
        what = (f"committed offset {start} of {topic}[{part}] is outside the broker's retained range "
                f"[{wm.low}, {wm.high})")
        if start < wm.low:
            what += f": {wm.low - start} records expired from Kafka before they were ingested (DATA LOSS)"
        else:
            what += ": the broker lost records it had acknowledged (was an in-memory broker restarted?)"
        if self.on_expired == "fail":
            raise OffsetsExpiredError(what + ". Set LAKEHOUSE_PIPELINE__ON_OFFSETS_EXPIRED=earliest to continue.")
        log.error("%s; continuing from the earliest retained offset %s as configured", what, wm.low)
        return wm.low


def records_in_topic(bootstrap: str, topic: str) -> int:
    """Records a topic holds so far (sum of its partitions' high watermarks): what really reached Kafka."""
    planner = Planner(bootstrap, [topic], 1)
    try:
        return sum(m.high for m in planner.watermarks({p: 0 for p in planner.partitions()}).values())
    finally:
        planner.close()
