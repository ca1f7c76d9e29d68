"""What a batch's tasks saw, counted where they run and summed on the driver.

The counts (valid events, dead letters, and the age of each valid event in 100 ms steps
when its batch was planned) travel back with each standing task's answer
(``pipeline.clicks.task``) and feed metrics only.

The dead letters themselves travel back too, keyed by their Kafka position (so a retried
task adds nothing twice), up to ``CARRY_BYTES`` in all: the dead-letter commit then needs
no second read of Kafka. Past that the batch is marked ``overflow`` (the records are
dropped, on the workers and the driver alike) and its dead letters are read again from
Kafka instead.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc

from pipeline import metrics

AGE_STEP_MS = 100
#: raw bytes of dead letters a batch carries back to the driver (more: they are read from Kafka again)
CARRY_BYTES = 4 * 1024 * 1024

#: (topic, partition, offset) -> (raw payload, error, Kafka timestamp ms)
BadRecords = dict[tuple[str, int, int], tuple[bytes, str, int]]


@dataclass
class BatchStats:
    valid: int = 0
    dead: int = 0
    ages: Counter = field(default_factory=Counter)  # age step at planning -> valid events
    bad: BadRecords = field(default_factory=dict)
    bad_bytes: int = 0
    overflow: bool = False  # more dead letters than are carried: ``bad`` is empty, read them from Kafka
    #: seconds the batch's tasks spent in each phase, summed over its tasks (``pipeline.clicks.task``: fetch,
    #: transform, write)
    task_seconds: dict[str, float] = field(default_factory=dict)

    def merge(self, other: BatchStats) -> BatchStats:
        self.valid += other.valid
        self.dead += other.dead
        self.ages.update(other.ages)
        for phase, seconds in other.task_seconds.items():
            self.task_seconds[phase] = self.task_seconds.get(phase, 0.0) + seconds
        self.bad.update(other.bad)
        self.bad_bytes += other.bad_bytes
        if self.overflow or other.overflow or self.bad_bytes > CARRY_BYTES:
            self.bad, self.bad_bytes, self.overflow = {}, 0, True
        return self


def count_batch(parsed: pa.RecordBatch, planned_at_ms: int) -> BatchStats:
    """The stats of one parsed Arrow batch (its ``error`` column null for valid events)."""
    valid = pc.is_null(parsed.column("error"))
    n_valid = pc.sum(valid).as_py() or 0
    stamps = pc.filter(parsed.column("timestamp_ms"), valid)
    steps = pc.max_element_wise(pc.divide(pc.subtract(planned_at_ms, stamps), AGE_STEP_MS), 0)
    ages = Counter(dict(zip(*(c.to_pylist() for c in pc.value_counts(steps).flatten()), strict=True)))
    stats = BatchStats(n_valid, parsed.num_rows - n_valid, ages)
    if stats.dead:
        bad = parsed.filter(pc.invert(valid)).select(["topic", "partition", "offset", "value", "error",
                                                       "timestamp_ms"])
        stats.bad_bytes = pc.sum(pc.binary_length(bad.column("value"))).as_py() or 0
        if stats.bad_bytes > CARRY_BYTES:
            stats.bad_bytes, stats.overflow = 0, True
        else:
            stats.bad = {(t, p, o): (v, e, ts) for t, p, o, v, e, ts in zip(*(c.to_pylist() for c in bad.columns),
                                                                             strict=True)}
    return stats


def observe_latency(table: str, ages, commit_delay_ms: int) -> None:
    """Latency of each row = its age when planned (100 ms steps, mid-step) + time from then to the commit."""
    bounds = metrics.LATENCY_BUCKETS
    counts = [0] * (len(bounds) + 1)
    total = 0.0
    for age, n in ages:
        latency = (commit_delay_ms + age * AGE_STEP_MS + AGE_STEP_MS / 2) / 1000.0
        counts[next((i for i, b in enumerate(bounds) if latency <= b), len(bounds))] += n
        total += latency * n
    if any(counts):
        metrics.E2E_LATENCY.add(table, counts, total)
