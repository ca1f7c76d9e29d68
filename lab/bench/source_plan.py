"""What a micro-batch pays to read its planned partitions through a Python data source, against the
project's way (``mapInArrow`` over ``spark.range``, ``pipeline/kafka_source/stream.py``).

Both read the same rows, made in the task, so the difference is what Spark does around a batch: a
Python data source is planned in a Python worker of its own every batch (its ``partitions()``), the
project's reader in the driver's process. Run ``python -m lab.bench.source_plan`` (a local Spark of two cores, no stack):
it prints each way's milliseconds a batch, twice, alternating.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import pyarrow as pa


def _sources():
    """The data source, defined here so that the probe needs nothing of the pipeline's."""
    from pyspark.sql.datasource import DataSource, DataSourceReader, InputPartition  # deferred: starts no JVM

    class Reader(DataSourceReader):
        def __init__(self, rows: int):
            self.rows = rows

        def partitions(self):
            return [InputPartition(i) for i in range(2)]

        def read(self, partition):
            yield pa.RecordBatch.from_pydict({"i": [partition.value] * self.rows})

    class Probe(DataSource):
        @classmethod
        def name(cls) -> str:
            return "source_plan_probe"

        def schema(self) -> str:
            return "i long"

        def reader(self, schema):
            return Reader(int(self.options.get("rows", "1000")))

    return Probe


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--batches", type=int, default=40, help="batches timed each round (after 5 to warm up)")
    parser.add_argument("--rows", type=int, default=1000, help="rows each of the two tasks yields")
    args = parser.parse_args(argv)

    from pyspark.sql import SparkSession  # deferred: the help above starts no JVM

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)  # the workers run this interpreter, with pyarrow
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    spark = (SparkSession.builder.master("local[2]").appName("source-plan").config("spark.ui.enabled", "false")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    spark.dataSource.register(_sources())
    rows = args.rows

    def data_source() -> int:
        return spark.read.format("source_plan_probe").option("rows", str(rows)).load().count()

    def map_in_arrow() -> int:
        def run(indexes):
            for batch in indexes:
                for i in batch.column(0).to_pylist():
                    yield pa.RecordBatch.from_pydict({"i": [i] * rows})
        return spark.range(0, 2, 1, numPartitions=2).mapInArrow(run, "i long").count()

    for name, batch in [("python data source", data_source), ("mapInArrow over spark.range", map_in_arrow)] * 2:
        for _ in range(5):
            assert batch() == 2 * rows
        began = time.perf_counter()
        for _ in range(args.batches):
            batch()
        print(f"{name:>28}: {1000 * (time.perf_counter() - began) / args.batches:.1f} ms a batch", flush=True)
    spark.stop()


if __name__ == "__main__":
    main()
