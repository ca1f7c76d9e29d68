"""Driver side: decide each micro-batch's offset ranges.

Each range runs from the offset committed with the table's last snapshot to the
partition's end as the broker lists it (ListOffsets, read-committed: the last stable
offset, which is the high watermark when no transaction is open), capped per partition.
One admin request answers every partition of every topic at once: no consumer is kept
between plans, so no long-poll fetch can be left in flight to delay the next one.
"""

from __future__ import annotations

import logging
from collections import deque
from dataclasses import dataclass
from typing import TYPE_CHECKING

from confluent_kafka import KafkaException, TopicCollection
from confluent_kafka.admin import OffsetSpec

from lakehouse import kafka_clients
from lakehouse.errors import FatalError, LakehouseError
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
                 timeout: float = 10.0):
        self.topics = topics
        self.max_per_partition = max_per_partition
        self.on_expired = on_expired
        self.timeout = timeout
        #: the latest out-of-range positions met (topic, partition, committed, low), for a look after the fact
        self.expired_events: deque[tuple[str, int, int, int]] = deque(maxlen=100)
        self.topic_ids: dict[str, str] = {}  # as of the last plan: what a commit of its ranges records
        self._bootstrap = bootstrap
        # silent: what fails is raised by the call that asked (and logged once, by the runner); its own
        # retries while the broker is away would only repeat it, and outlive the job in a test process
        self._admin = kafka_clients.admin(bootstrap, log_level=kafka_clients.SILENT)

    @classmethod
    def from_settings(cls, settings: Settings, topics: list[str], max_records: int | None = None) -> Planner:
        """The planner every pipeline job uses: limits from the one settings object (``max_records``: a job's own
        cap per partition, instead of ``pipeline.max_records_per_partition``)."""
        return cls(settings.kafka.bootstrap, topics, max_records or settings.pipeline.max_records_per_partition,
                   settings.pipeline.on_offsets_expired)

    def close(self) -> None:
        """Nothing is held between plans but the admin client; kept for the jobs' symmetry."""

    def current_topic_ids(self) -> dict[str, str]:
        """Each topic's id (Kafka's topic UUID) now: a new id means a new log (see ``offsets``)."""
        try:
            described = self._admin.describe_topics(TopicCollection(self.topics), request_timeout=self.timeout)
            return {topic: str(future.result().topic_id) for topic, future in described.items()}
        except KafkaException as exc:
            raise LakehouseError(f"could not describe topics {self.topics}: {exc}") from exc

    def ranges_since(self, start: Offsets, committed: Offsets, committed_ids: dict[str, str]) -> list[OffsetRange]:
        """The records from ``start`` up to the ``committed`` offsets, in the topics' current logs (non-empty ranges).

        What a click job reads again after a recovery for the dead letters its last batch may owe.
        """
        ids = self.current_topic_ids()
        same_log = in_current_log(committed, committed_ids, ids)
        ranges = [OffsetRange(topic, part, start.get(topic, {}).get(part, 0), end)
                  for topic, parts in sorted(same_log.items()) for part, end in sorted(parts.items())]
        self.topic_ids = ids
        return [r for r in ranges if r.size > 0]

    def partitions(self) -> list[tuple[str, int]]:
        meta = self._admin.list_topics(timeout=self.timeout)
        out: list[tuple[str, int]] = []
        for topic in self.topics:
            if topic not in meta.topics or meta.topics[topic].error is not None:
                raise LakehouseError(f"topic {topic!r} does not exist on {self._bootstrap}: create it (stack up does)")
            out.extend((topic, p) for p in sorted(meta.topics[topic].partitions))
        return out

    def _listed(self, partitions: list[tuple[str, int]], spec: OffsetSpec) -> dict[tuple[str, int], int]:
        try:
            return kafka_clients.list_offsets(self._admin, partitions, spec, self.timeout)
        except KafkaException as exc:
            raise LakehouseError(f"could not list the offsets of {sorted({t for t, _ in partitions})}: {exc}") from exc

    def watermarks(self, starts: dict[tuple[str, int], int]) -> dict[tuple[str, int], Watermarks]:
        """The first retained and the last stable offset of every partition, in two requests."""
        partitions = sorted(starts)
        lows = self._listed(partitions, OffsetSpec.earliest())
        highs = self._listed(partitions, OffsetSpec.latest())
        return {tp: Watermarks(low=max(lows[tp], 0), high=highs[tp]) for tp in partitions}

    def plan(self, committed: Offsets, committed_ids: dict[str, str] | None = None
             ) -> tuple[list[OffsetRange], dict[tuple[str, int], Watermarks]]:
        """Ranges from the committed offsets to the current end, capped per partition.

        ``committed_ids`` are the topic ids the offsets were committed with: a topic whose id
        changed since is a new log, read from its start.
        """
        partitions = self.partitions()
        self.topic_ids = self.current_topic_ids()
        kept = in_current_log(committed, committed_ids or {}, self.topic_ids)
        for topic in committed.keys() - kept.keys():
            log.warning("topic %s is a new log (id %s, was %s when last committed): the topic was deleted and "
                        "created again (or the broker's log folder was wiped); reading it from its start",
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
            what += ": the broker lost records it had acknowledged (was its log folder wiped?)"
        if self.on_expired == "fail":
            raise OffsetsExpiredError(what + ". Set LAKEHOUSE_PIPELINE__ON_OFFSETS_EXPIRED=earliest to continue.")
        log.error("%s; continuing from the earliest retained offset %s as configured", what, wm.low)
        return wm.low

