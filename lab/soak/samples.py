"""One soak sample per window, and soak.csv, the form the samples are kept and re-read in.

Its own module so that the soak (which takes samples), the plot and the pair comparison
(which read them back) all depend on it and not on each other.
"""

from __future__ import annotations

import csv
import dataclasses
from dataclasses import asdict, dataclass
from pathlib import Path

MAX_FILES_PER_PARTITION = 64  # the goal: live data files per day-partition at every sample


@dataclass
class Sample:
    elapsed_s: float
    committed: int
    data_files_max_partition: int
    data_files: int
    delete_files: int
    snapshots: int
    manifest_bytes: int
    query_ms: float  # wall: median over the soak queries, each the best of three runs (lab.soak.reader)
    freshness_p95_s: float
    batch_s_mean: float = 0.0  # the click job's mean micro-batch wall time in the window
    compact_s: float = 0.0  # wall seconds the maintenance service spent compacting in the window
    expire_s: float = 0.0  # ... expiring snapshots
    other_maintenance_s: float = 0.0  # ... on every other action
    under_load: bool = True  # the producer was still writing when the sample was taken
    query_cpu_ms: float = 0.0  # the same queries' CPU time: the reader's own work, whoever else wants the cores
    writer_cpu_s: float = 0.0  # CPU seconds the writer's process (and its Spark JVM) used in the window
    maintenance_cpu_s: float = 0.0  # ... the maintenance service's processes (actions, health reads, GC)
    broker_cpu_s: float = 0.0  # ... the Kafka broker's process (it serves the producer and the writer's fetches)
    plan_s_mean: float = 0.0  # the click batches' phases, mean per batch in the window: offset ranges ...
    write_s_mean: float = 0.0  # ... fetching, validating, enriching, writing the files and committing (one Spark job)
    dead_letters_s_mean: float = 0.0  # ... writing dead letters (pipeline.metrics.BATCH_PHASE_SECONDS)
    metadata_bytes: int = 0  # the click table's current metadata file: every commit writes it, every new reader parses it
    appends: int = 0  # of the snapshots, the click batches' appends (the rest: the job's merges and maintenance's rewrites)


def write_samples(samples: list[Sample], csv_path: Path) -> None:
    with csv_path.open("w", newline="") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(asdict(samples[0])))
        writer.writeheader()
        writer.writerows(asdict(x) for x in samples)


def read_samples(csv_path: Path) -> list[Sample]:
    """soak.csv back into samples (columns a CSV from an older run lacks keep their defaults)."""
    types = {f.name: f.type for f in dataclasses.fields(Sample)}
    convert = {"int": int, "float": float, "bool": lambda v: v == "True"}
    with csv_path.open(newline="") as fh:
        return [Sample(**{k: convert[types[k]](v) for k, v in row.items() if k in types and v != ""})
                for row in csv.DictReader(fh)]

