"""Seed 001's Flink job, as a peer: Kafka -> lookup joins with the shop database -> Iceberg, in Flink SQL.

What the seed runs (its ``Kafka2Iceberg``): a Kafka source table read as JSON with a
processing-time column, a JDBC table of the shop database joined ``FOR SYSTEM_TIME AS OF`` the
processing time (a lookup join with a bounded cache: the seed's 5,000 rows and 10 s), and an
``INSERT INTO`` an Iceberg table in a Hive-metastore catalog, committed by Flink's Iceberg sink
once per checkpoint (exactly once: the source's offsets are in the same checkpoint). Two changes
make it do this project's job, and both say so here:

- the members are joined like the products (the seed joins products only), so every peer
  writes the same enriched row;
- the rows go into a table of the click table's own layout, which the benchmark creates
  beforehand (Flink SQL cannot declare Iceberg's ``days(event_time)`` partitioning), with the
  record's Kafka topic, partition, offset and timestamp as columns, so the benchmark's checks
  read every peer's table alike. ``write.upsert.enabled`` stays off: clicks are appended (the
  seed's ``write.upsert.enable`` is a misspelling Iceberg ignores).

This file runs in the Flink peer's own virtual environment (PyFlink pins versions of numpy,
pandas and pyarrow the project cannot share), so it imports nothing but PyFlink, the standard
library and ``flink_runtime``: every setting arrives in the JSON file named by its one argument,
written by ``lab.bench.peers``. It runs until SIGTERM.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from lab.peers.flink_runtime import run_until_stopped, table_environment


def _with(options: dict[str, str]) -> str:
    return ", ".join(f"'{key}' = '{value}'" for key, value in options.items())


def statements(job: dict) -> list[str]:
    """The job's Flink SQL, in order: source, lookup tables, catalog, insert."""
    kafka = {
        "connector": "kafka",
        "topic": job["topic"],
        "properties.bootstrap.servers": job["bootstrap"],
        "properties.group.id": f"peer-flink-{job['topic']}",
        "scan.startup.mode": "earliest-offset",
        "format": "json",
        # a payload that is not JSON is skipped, as the Spark peer's from_json does: neither has a dead-letter table
        "json.ignore-parse-errors": "true",
    }
    lookup = {
        "connector": "jdbc",
        "url": job["jdbc_url"],
        "driver": "org.mariadb.jdbc.Driver",
        "username": job["jdbc_user"],
        "password": job["jdbc_password"],
        # the seed's cache: at most 5,000 rows per dimension, each kept 10 s
        "lookup.cache": "PARTIAL",
        "lookup.partial-cache.max-rows": "5000",
        "lookup.partial-cache.expire-after-write": "10s",
        "lookup.max-retries": "3",
    }
    required = " AND ".join(f"`{name}` IS NOT NULL" for name in job["required"])
    return [
        f"""CREATE TEMPORARY TABLE clicks_source (
              `eventId` STRING, `webpageId` BIGINT, `uid` STRING, `productId` STRING, `cookieId` STRING,
              `expendTime` BIGINT, `updateTime` BIGINT,
              `produced_at` TIMESTAMP_LTZ(3) METADATA FROM 'timestamp' VIRTUAL,
              `kafka_topic` STRING METADATA FROM 'topic' VIRTUAL,
              `kafka_partition` INT METADATA FROM 'partition' VIRTUAL,
              `kafka_offset` BIGINT METADATA FROM 'offset' VIRTUAL,
              `proctime` AS PROCTIME()
            ) WITH ({_with(kafka)})""",
        f"""CREATE TEMPORARY TABLE products_jdbc (
              `productId` STRING, `name` STRING, `product_price` DECIMAL(10, 4),
              PRIMARY KEY (`productId`) NOT ENFORCED
            ) WITH ({_with({**lookup, "table-name": "products"})})""",
        f"""CREATE TEMPORARY TABLE members_jdbc (
              `userid` STRING, `memberLevel` INT,
              PRIMARY KEY (`userid`) NOT ENFORCED
            ) WITH ({_with({**lookup, "table-name": "user_member"})})""",
        f"CREATE CATALOG lake WITH ({_with(job['catalog'])})",
        f"""INSERT INTO lake.{job['table']}
            SELECT e.eventId, CAST(e.webpageId AS INT), e.uid, e.productId, e.cookieId,
                   CAST(e.expendTime AS INT), e.updateTime, p.name, p.product_price, m.memberLevel,
                   CAST(TO_TIMESTAMP_LTZ(e.updateTime, 3) AS TIMESTAMP_LTZ(6)),
                   CAST(e.produced_at AS TIMESTAMP_LTZ(6)),
                   CAST(CURRENT_TIMESTAMP AS TIMESTAMP_LTZ(6)),
                   e.kafka_topic, e.kafka_partition, e.kafka_offset
            FROM (SELECT * FROM clicks_source WHERE {required}) AS e
            LEFT JOIN products_jdbc FOR SYSTEM_TIME AS OF e.proctime AS p ON e.productId = p.productId
            LEFT JOIN members_jdbc FOR SYSTEM_TIME AS OF e.proctime AS m ON e.uid = m.userid""",
    ]


def main(job_file: str) -> None:
    """Submit the job to a local mini-cluster and keep it running until SIGTERM."""
    job = json.loads(Path(job_file).read_text())
    env = table_environment(job)
    *ddl, insert = statements(job)
    for statement in ddl:
        env.execute_sql(statement)
    run_until_stopped(env.execute_sql(insert).get_job_client())  # runs in this process's mini-cluster


if __name__ == "__main__":
    main(sys.argv[1])
