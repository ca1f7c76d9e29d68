"""What a batch's parse tasks saw, counted where they run and summed on the driver.

The counts (valid events, dead letters, and the age of each valid event in 100 ms steps
when its batch was planned) travel back with the task results in a Spark accumulator.
Counting them with a Spark job of their own cost a cached copy of the batch and a
group-by: 1.0 s of a 27,500-event batch (docs/performance.md). A task run twice (a
retry) may count twice, so the figures feed metrics only; which table a record goes to
never depends on them.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa
import pyarrow.compute as pc
from pyspark import AccumulatorParam

AGE_STEP_MS = 100


@dataclass
class BatchStats:
    valid: int = 0
    dead: int = 0
    ages: Counter = field(default_factory=Counter)  # age step at planning -> valid events

    def merge(self, other: BatchStats) -> BatchStats:
        self.valid += other.valid
        self.dead += other.dead
        self.ages.update(other.ages)
        return self


def count_batch(parsed: pa.RecordBatch, planned_at_ms: int) -> BatchStats:
    """The stats of one parsed Arrow batch (its ``error`` column null for valid events)."""
    valid = pc.is_null(parsed.column("error"))
    n_valid = pc.sum(valid).as_py() or 0
    stamps = pc.filter(parsed.column("timestamp_ms"), valid)
    steps = pc.max_element_wise(pc.divide(pc.subtract(planned_at_ms, stamps), AGE_STEP_MS), 0)
    ages = Counter(dict(zip(*(c.to_pylist() for c in pc.value_counts(steps).flatten()), strict=True)))
    return BatchStats(n_valid, parsed.num_rows - n_valid, ages)


class BatchStatsParam(AccumulatorParam):
    def zero(self, value: BatchStats) -> BatchStats:
        return BatchStats()

    def addInPlace(self, value1: BatchStats, value2: BatchStats) -> BatchStats:  # noqa: N802 - Spark's name
        return value1.merge(value2)
