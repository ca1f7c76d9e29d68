"""The functions the CDC apply's Spark tasks run on the executors (``pipeline.cdc.apply`` plans the stages and
commits; these read, apply and build each state partition's buckets where the partition is kept).

Each returns a closure over what a batch shares (the tables' ``TableWork``, the outcomes accumulator), so the
task ships only that, not the job.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
from pyspark.accumulators import AccumulatorParam

from pipeline.cdc.buckets import TableWork, apply, build
from pipeline.cdc.change_reading import ChangeReading, by_bucket
from pipeline.cdc.held_state import Held, claim, keep, scratch


class Outcomes(AccumulatorParam):
    """Each bucket task's outcomes, by bucket: a task run twice reports the same bucket once."""

    def zero(self, value):
        return {}

    def addInPlace(self, value1, value2):
        value1.update(value2)
        return value1


def step(works: dict[str, TableWork], outcomes):
    """The apply stage's function: (the partition's held state, its buckets' changes) in, the state after the batch
    out — claimed from the executor's disk, changed, and kept there as the next version (``held_state``)."""

    def run(pair: tuple[Held, dict[int, dict[str, pa.Table]]]) -> Held:
        held, changes = pair
        state = claim(held)
        for number, tables in state.items():
            mine = changes.get(number, {})
            outcomes.add({number: {topic: apply(tables[topic], work, mine.get(topic))
                                   for topic, work in works.items() if topic in tables}})
        return keep(state, Path(held.directory), held.version + 1)

    return run


def read_and_step(reading: ChangeReading, works: dict[str, TableWork], outcomes):
    """The one-stage batch: each state partition's task reads the whole batch and keeps its own buckets' changes."""
    apply_step = step(works, outcomes)

    def run(helds):
        for held in helds:
            changes = by_bucket(list(reading.read(range(len(reading.groups)), only=set(held.buckets))))
            yield apply_step((held, changes))

    return run


def build_state(works: dict[str, TableWork], fold_files: int, generation: str):
    """The recovery's function: a partition's buckets read from their live files, kept on this executor's disk."""

    def run(item: tuple[int, dict[int, dict[str, list]]]) -> Held:
        partition, buckets = item
        state = {number: {topic: build(number, work, tasks.get(topic, []), number * fold_files // work.buckets)
                          for topic, work in works.items() if number < work.buckets}
                 for number, tasks in buckets.items()}
        return keep(state, scratch(generation, partition), 0)

    return run
