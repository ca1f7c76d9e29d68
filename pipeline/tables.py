"""DDL of the lakehouse tables, created idempotently by the jobs that write them.

Names come from settings; everything else a reader relies on (format v2, day
partitioning on event time, sort order, metadata clean-up, identifier fields for
upserts) is declared here once.
"""

from __future__ import annotations

from pyiceberg.table import TableProperties as P

from lakehouse.settings import Settings

#: properties every table gets: v2 (row-level deletes), bounded metadata history, and few manifests.
#: A writer committing every few seconds adds one manifest per commit (~9 KB, mostly its header, for one
#: data file) and a reader opens every manifest of the snapshot: merging them at commit once 8 pile up
#: (Iceberg's default waits for 100) keeps the reader's planning flat between maintenance passes.
COMMON_PROPERTIES = {
    P.FORMAT_VERSION: "2",
    P.METADATA_DELETE_AFTER_COMMIT_ENABLED: "true",
    P.METADATA_PREVIOUS_VERSIONS_MAX: "50",
    P.MANIFEST_MIN_MERGE_COUNT: "8",
    P.PARQUET_COMPRESSION: "zstd",
    P.COMMIT_NUM_RETRIES: "10",
}

#: small tables MERGEd every few seconds (dimensions, live aggregates): no shuffle before the write. Iceberg's
#: default (hash by file) adds a stage to every MERGE for tables of a few files: 2.0 -> 1.6 s a MERGE idle,
#: and each stage waits its turn for a core with the whole system running
SMALL_MERGE_PROPERTIES = {
    "write.merge.distribution-mode": "none",
    "write.update.distribution-mode": "none",
    "write.delete.distribution-mode": "none",
}

#: tables only a streaming writer appends to (the click and dead-letter tables: PyIceberg fast appends, which never
#: merge manifests). A manifest merge inside maintenance's rewrite commit would read every manifest again on each
#: retry, and each retry races a writer that commits every trigger: at the maintenance's low priority on a busy
#: machine the rewrite then loses every race until the load stops. `rewrite_manifests` merges them in its own pass.
APPEND_ONLY_PROPERTIES = {
    P.MANIFEST_MERGE_ENABLED: "false",
}

#: the click table takes a snapshot every batch (four a second at the default trigger): its snapshots expire after
#: 2 minutes, not `maintenance.snapshot_retention_minutes`, so its metadata file (written by every commit, parsed by
#: every new reader) lists about as many as a one-second trigger kept in 10 (docs/performance.md); an incremental
#: reader's position still holds them longer (`MaintenanceSettings.expire_before`)
CLICKS_PROPERTIES = {
    **APPEND_ONLY_PROPERTIES,
    P.MAX_SNAPSHOT_AGE_MS: str(2 * 60_000),
}

#: dimension tables are upserted by the CDC apply (``pipeline.cdc.apply``, PyIceberg files and commits), merge-on-read
#: with position deletes it folds itself; Spark's DML on them (rare, by hand) stays copy-on-write
UPSERT_PROPERTIES = {
    P.DELETE_MODE: P.DELETE_MODE_COPY_ON_WRITE,
    "write.update.mode": "copy-on-write",
    "write.merge.mode": "copy-on-write",
    # PyIceberg merges manifests only when asked (Iceberg-Java always does): without it each commit left a
    # manifest more for the next delete to read, 1.8 -> 0.9 s a commit after a minute at 1,000 changes/s
    P.MANIFEST_MERGE_ENABLED: "true",
    # ... and it copies the table's metadata a few times per commit, so each snapshot kept slows commits
    # down (two a batch; 0.4 -> 0.9 s a commit over 5 minutes at 1,000 changes/s): both expiries (maintenance's,
    # the writer's after its folds) keep these tables' snapshots 10 minutes, not `maintenance.snapshot_retention_minutes`
    P.MAX_SNAPSHOT_AGE_MS: str(10 * 60_000),
    # the writer's folds write each file sorted by key (pipeline.lake_writer.fold); row groups of 50,000 rows let a
    # point query read one row group of each file instead of the file (a 10 M-row table after an hour:
    # 16 files of 500,000 keys spread over the whole key range; read whole, a point query took 0.29 s)
    P.PARQUET_ROW_GROUP_LIMIT: "50000",
    **SMALL_MERGE_PROPERTIES,
}

CLICKS_COLUMNS = """
    event_id STRING COMMENT 'unique id from the producer, if any',
    webpageId INT,
    uid STRING,
    productId STRING,
    cookieId STRING,
    expendTime INT,
    updateTime BIGINT COMMENT 'event time as sent, epoch millis',
    name STRING COMMENT 'product name as of processing time',
    product_price DECIMAL(10,4) COMMENT 'product price as of processing time',
    member_level INT COMMENT 'member level as of processing time',
    event_time TIMESTAMP COMMENT 'updateTime as a timestamp (partition source)',
    produced_at TIMESTAMP COMMENT 'Kafka record timestamp (produce time)',
    ingest_time TIMESTAMP COMMENT 'when the pipeline committed the row',
    kafka_topic STRING,
    kafka_partition INT,
    kafka_offset BIGINT
"""

#: click-table columns taken from the parsed and enriched event as they are (the rest are derived)
CLICKS_FROM_EVENT = ("event_id", "webpageId", "uid", "productId", "cookieId", "expendTime", "updateTime",
                     "name", "product_price", "member_level")

#: the click table's column of when the job committed a row: what tells maintenance which files the click job
#: may still merge itself
INGEST_TIME = "ingest_time"

#: the click table's write order (``WRITE LOCALLY ORDERED BY``), as Arrow sort keys for the rows the job writes itself
CLICKS_WRITE_ORDER = [("productId", "ascending"), ("event_time", "ascending")]

#: the click table's columns before any evolution (an event field may not take these names, in any case)
CLICKS_FIXED_COLUMNS = frozenset(line.split()[0] for line in CLICKS_COLUMNS.strip().splitlines())

#: snapshot-summary key of a click-table commit: dead letters were all committed up to these offsets
DEAD_DONE_PROPERTY = "lakehouse.dead-letters-done"

DEAD_LETTER_COLUMNS = """
    raw BINARY COMMENT 'the payload exactly as read',
    error_kind STRING,
    error STRING,
    kafka_topic STRING,
    kafka_partition INT,
    kafka_offset BIGINT,
    produced_at TIMESTAMP,
    ingest_time TIMESTAMP
"""

DAILY_USERS_COLUMNS = """
    dt DATE COMMENT 'event day (UTC)',
    uid STRING,
    member_level INT COMMENT 'level at the time of the last event that day',
    sessions BIGINT COMMENT 'distinct cookieId',
    page_views BIGINT,
    expend_time_total BIGINT,
    distinct_products BIGINT,
    spend_potential DECIMAL(18,4) COMMENT 'sum of the prices of the distinct products viewed',
    computed_at TIMESTAMP
"""


def _props(extra: dict[str, str] | None = None, common: bool = True) -> str:
    merged = {**(COMMON_PROPERTIES if common else {}), **(extra or {})}
    return ", ".join(f"'{k}'='{v}'" for k, v in merged.items())


def _namespace(spark, table: str) -> None:
    spark.sql(f"CREATE NAMESPACE IF NOT EXISTS {table.split('.')[0]}")


def ensure_clicks_tables(spark, settings: Settings) -> None:
    clicks, dead = settings.catalog.clicks_table, settings.catalog.dead_letter_table
    _namespace(spark, clicks)
    if not spark.catalog.tableExists(clicks):
        spark.sql(f"CREATE TABLE IF NOT EXISTS {clicks} ({CLICKS_COLUMNS}) USING iceberg "
                  f"PARTITIONED BY (days(event_time)) TBLPROPERTIES ({_props(CLICKS_PROPERTIES)})")
        # Local sort per write keeps commits cheap; compaction sorts globally later.
        spark.sql(f"ALTER TABLE {clicks} WRITE LOCALLY ORDERED BY {', '.join(c for c, _ in CLICKS_WRITE_ORDER)}")
    _namespace(spark, dead)
    spark.sql(f"CREATE TABLE IF NOT EXISTS {dead} ({DEAD_LETTER_COLUMNS}) USING iceberg "
              f"PARTITIONED BY (days(ingest_time)) TBLPROPERTIES ({_props(APPEND_ONLY_PROPERTIES)})")


def ensure_daily_table(spark, settings: Settings) -> None:
    table = settings.catalog.daily_users_table
    _namespace(spark, table)
    spark.sql(f"CREATE TABLE IF NOT EXISTS {table} ({DAILY_USERS_COLUMNS}) USING iceberg "
              f"PARTITIONED BY (dt) TBLPROPERTIES ({_props()})")
