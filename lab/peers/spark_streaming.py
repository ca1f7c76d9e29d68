"""The click pipeline written the standard way: Spark Structured Streaming into Iceberg.

What a data engineer following the Spark and Iceberg guides would write: Spark's own Kafka
source (``spark-sql-kafka-0-10``, the ``spark-kafka`` Maven profile), ``from_json`` with the
ClickEvent contract as the schema, a stream-static join with the product and member tables
(re-read by Spark every micro-batch), and ``writeStream`` to an Iceberg table with a
checkpoint location and a processing-time trigger. Events ``from_json`` cannot read, or that
lack a required field, are dropped: the standard path has no dead-letter table.
"""

from __future__ import annotations

import signal
import threading
from pathlib import Path

from deploy.maven import profile_dir
from lakehouse.contract import click_contract
from lakehouse.settings import Settings

#: the jars Spark's Kafka source needs beside the project's (installed by `make install`)
KAFKA_PROFILE = "spark-kafka"


def kafka_jars(settings: Settings) -> tuple[Path, ...]:
    return tuple(sorted(profile_dir(settings.tools_dir, KAFKA_PROFILE).glob("*.jar")))


def event_schema():
    """The contract's fields as a Spark schema: integers as longs, ids as strings (a JSON number reads as its text)."""
    # deferred: pyspark: the peer runs only where its benchmark builds a session
    from pyspark.sql.types import LongType, StringType, StructField, StructType

    return StructType([StructField(f.name, LongType() if f.kind == "integer" else StringType())
                       for f in click_contract().fields])


def start(spark, settings: Settings, topic: str, table: str, trigger_seconds: float, checkpoint: Path):
    """Start the streaming query (the table must exist with the click table's layout); returns it."""
    # deferred: pyspark: as above
    from pyspark.sql import functions as F

    contract = click_contract()
    cat = settings.catalog
    events = (spark.readStream.format("kafka")
              .option("kafka.bootstrap.servers", settings.kafka.bootstrap)
              .option("subscribe", topic)
              .option("startingOffsets", "earliest")
              .option("failOnDataLoss", "true")
              .load()
              .select(F.from_json(F.col("value").cast("string"), event_schema()).alias("e"),
                      "topic", "partition", "offset", "timestamp"))
    required = [f.name for f in contract.fields if f.required]
    events = events.where(" AND ".join(f"e.{name} IS NOT NULL" for name in required))
    products = spark.table(cat.products_table).select("productId", "name", "product_price")
    members = spark.table(cat.members_table).select(F.col("userid").alias("uid"), "member_level")
    rows = (events.select("e.*", "topic", "partition", "offset", "timestamp")
            .join(F.broadcast(products), "productId", "left")
            .join(F.broadcast(members), "uid", "left")
            .select(F.col("eventId").alias("event_id"), F.col("webpageId").cast("int").alias("webpageId"), "uid",
                    "productId", "cookieId", F.col("expendTime").cast("int").alias("expendTime"),
                    F.col("updateTime").alias("updateTime"), "name", "product_price", "member_level",
                    F.timestamp_millis("updateTime").alias("event_time"),
                    F.col("timestamp").alias("produced_at"), F.current_timestamp().alias("ingest_time"),
                    F.col("topic").alias("kafka_topic"), F.col("partition").alias("kafka_partition"),
                    F.col("offset").alias("kafka_offset")))
    return (rows.writeStream.format("iceberg").outputMode("append")
            .trigger(processingTime=f"{trigger_seconds:g} seconds")
            .option("checkpointLocation", str(checkpoint))
            .option("fanout-enabled", "true")  # partitioned by day: no sort before the write (Iceberg's advice)
            # each task writes its rows: since Spark 4 a streaming write honours the table's hash distribution, a
            # shuffle to one task per day (one file a batch; p95 4.4 -> 5.7 s, docs/spark-4.md)
            .option("distribution-mode", "none")
            .toTable(f"{cat.name}.{table}"))


def main(topic: str, table: str, trigger_seconds: float, checkpoint: Path) -> None:
    """Run the query until SIGTERM (the benchmark starts it as a process of its own, settings from the environment)."""
    # deferred: pyspark and the project's session builder, only in the peer's own process
    from lakehouse.settings import load_settings
    from pipeline.spark_session import build_session
    from pipeline.tables import ensure_clicks_tables

    settings = load_settings()
    settings.catalog.clicks_table = table
    spark = build_session(settings, "peer-spark-structured-streaming", extra_jars=kafka_jars(settings))
    ensure_clicks_tables(spark, settings)
    query = start(spark, settings, topic, table, trigger_seconds, checkpoint)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    while not stop.wait(1.0):
        if query.exception() is not None:
            raise SystemExit(f"the streaming query failed: {query.exception()}")
    query.stop()
    spark.stop()


if __name__ == "__main__":
    import sys

    main(sys.argv[1], sys.argv[2], float(sys.argv[3]), Path(sys.argv[4]))
