"""How the Spark jobs behave: the pipeline's batches and the maintenance service's rules.

Part of :class:`lakehouse.settings.Settings` (sections ``pipeline`` and ``maintenance``,
``LAKEHOUSE_PIPELINE__*`` / ``LAKEHOUSE_MAINTENANCE__*``); kept apart from the endpoints
and names because these are tuning knobs, read by the jobs only.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

from pydantic import BaseModel, Field

from lakehouse.size_tiers import tier_bounds


class PipelineSettings(BaseModel):
    """Knobs of the Spark jobs."""

    trigger_seconds: float = Field(
        0.25, gt=0,
        description="Micro-batch interval of the click job: a batch starts at most this often, back to back when "
                    "one takes longer. Freshness is about one interval plus one batch (what each interval gives: "
                    "docs/peers.md). Each batch is one commit (a snapshot every reader's metadata file lists until "
                    "it expires: the click table keeps them minutes, pipeline/tables.py) and a data file per "
                    "standing task, which the job merges as it goes (merge_seconds).")
    merge_seconds: float = Field(
        10.0, ge=0,
        description="The click job merges the data files its batches added to a partition this often (sooner once "
                    "4 x merge_fan_in wait): each standing task writes the rows it keeps of its own files again as "
                    "one, nothing read back; merge_fan_in of those become one in a small Spark job. A day-partition "
                    "then holds a few dozen files between maintenance's passes however short the trigger "
                    "(pipeline/clicks/file_merges.py, docs/performance.md). 0: maintenance alone merges (enough "
                    "at a trigger of a second or more).")
    dead_letter_seconds: float = Field(
        5.0, ge=0,
        description="How long the click job's dead letters wait to be committed together: the dead letters of every "
                    "batch in this span go in one commit of the dead-letter table, in the background (a commit after "
                    "each batch costs the driver as much as the batch's own commit). They reach the table at most "
                    "this much later than their batch's clicks; a crash leaves this span's batches to be read again "
                    "from Kafka for their dead letters. 0: a commit after every batch that has any.")
    merge_fan_in: int = Field(
        6, ge=2, description="First-level merged files of a partition the click job merges into one; that file "
                             "is maintenance's to merge further.")
    max_records_per_partition: int = Field(200_000, ge=1, description="Back-pressure cap per partition per batch.")
    cdc_max_records: int = Field(
        200_000, ge=1, description="The CDC apply's cap per partition per batch: what one commit applies at most (an "
                                   "initial snapshot's batches, and so its data files). 100,000 lowered the apply's "
                                   "peak in a 10 M-row snapshot and doubled the files and delete files readers open "
                                   "(docs/cdc.md).")
    cdc_buckets: int = Field(
        2, ge=1, le=1024,
        description="Key buckets of a dimension table the CDC apply partitions: the table is partitioned by Iceberg's "
                    "bucket(N, key) and each Spark task of the apply keeps its buckets' key index on its executor "
                    "(pipeline/cdc/buckets.py). At least the executors, so each holds a share of the index; each "
                    "bucket writes its own small files a batch, so more buckets cost more a batch (docs/cdc.md). "
                    "A table already bucketed keeps its N.")
    cdc_shuffle_records: int = Field(
        10_000, ge=0,
        description="A CDC batch of more change records than this is read by a stage of its own and shuffled to "
                    "the buckets' tasks; a smaller one is read whole by every bucket task, each keeping its own "
                    "buckets' changes: one stage instead of two and no shuffle, for reading the batch once a task "
                    "(docs/cdc.md, 'One stage for small batches').")
    dimension_refresh_seconds: float = Field(
        10.0, ge=0, description="How old the product and member values a click is enriched with may get: the "
                                "click job's snapshot of a small dimension is read again, and a looked-up key's "
                                "cached value expires, after this long (0: every batch).")
    dimension_lookup_rows: int = Field(
        100_000, ge=0, description="A dimension whose source table holds more rows than this is looked up per batch "
                                   "by key in the source database, through a bounded cache in each Python worker, "
                                   "instead of read whole and broadcast (docs/performance.md, 'Enrichment at real "
                                   "size'). 0: always look up.")
    dimension_cache_rows: int = Field(
        100_000, ge=0, description="Keys each Python worker keeps per looked-up dimension (least recently used go "
                                   "first; 0: no cache).")
    on_offsets_expired: Literal["fail", "earliest"] = "fail"
    schema_policy: Literal["evolve", "strict", "ignore"] = Field(
        "evolve", description="ClickEvent fields beyond the contract (lakehouse/contracts/clickevent.schema.json): "
                              "'evolve' adds a new scalar field as a nullable column in the commit of the batch "
                              "that first carries it (and widens int -> long, float -> double); 'strict' "
                              "dead-letters events with unknown fields (unknown_field); 'ignore' drops the "
                              "fields. docs/schema-evolution.md.")
    max_evolved_columns: int = Field(
        64, ge=0, description="Columns the click table may gain by evolution; past them a new field is a dead "
                              "letter (too_many_fields), so a buggy app cannot grow the schema without bound.")
    max_event_bytes: int = Field(16_384, ge=64)
    max_event_age_days: int = Field(7, ge=1)
    max_event_future_seconds: int = Field(300, ge=0)
    spark_deploy: Literal["local", "cluster"] = Field(
        "local", description="'local': the job starts its own Spark (local[2]) with the pinned jars; 'cluster': it "
                             "runs under spark-submit (spark-operator on Kubernetes), which sets master, driver, "
                             "executors and classpath.")
    spark_driver_memory: str = "1g"
    spark_java_options: str = Field(
        "", description="Options of the Spark JVMs this project starts itself (the driver here; the executors of "
                        "local-cluster[...]), before the project's own: e.g. a JIT setting to compare "
                        "(docs/performance.md).")
    spark_executor_memory: str = Field(
        "640m", description="Heap of each executor when Spark runs executors of its own here (SPARK_MASTER "
                            "local-cluster[...]): the kind overlay's pipeline SparkApplication gives its executors "
                            "the same (k8s/base/spark/pipeline-application.yaml); the jobs' per-row work is in "
                            "Python workers, beside the heap.")
    spark_shuffle_partitions: int = Field(4, ge=1)
    spark_cores: int = Field(
        2, ge=1, description="Cores a local Spark application (local mode) runs tasks on: its default parallelism. "
                             "It has click_tasks slots more, for the click job's standing tasks, which wait between "
                             "batches.")
    click_tasks: int = Field(
        2, ge=1, le=64,
        description="Standing Spark tasks of the click job: each keeps its task slot, a Python worker and a Kafka "
                    "consumer for the job's life and does the batch's work for its Kafka partitions (partition p "
                    "to task p mod click_tasks). More tasks, more of a batch in parallel (on more executors); an "
                    "application also running other jobs needs slots beyond these (docs/performance.md).")
    writer_pool_weight: int = Field(
        8, ge=1, description="Spark FAIR-scheduler weight of the writers' pools (clicks, dims, aggregate) against "
                             "maintenance's (1) when they share an application: a free core goes to a writer's "
                             "batch first, so compaction uses what the writers leave.")
    aggregate_trigger_seconds: float = Field(
        2.0, gt=0, description="Longest wait between two batches of the live aggregates: in one application with "
                               "the click job (`run pipeline`) a batch starts at each click commit.")
    dims_trigger_seconds: float = Field(
        2.0, gt=0, description="Micro-batch interval of the dimension apply. Each batch is one Spark job and one "
                               "commit per table, so a shorter interval costs CPU even at a trickle of changes, "
                               "which a small machine pays in click freshness (docs/benchmarks.md).")
    aggregate_on_snapshot_expired: Literal["rebuild", "fail"] = Field(
        "rebuild", description="When the live aggregates' position was expired by maintenance: recompute the "
                               "aggregates from the whole table, or stop with an error.")
    min_free_disk_mb: int = Field(
        256, ge=0, description="Writers start no batch while the run directory's disk has less free space than "
                               "this (the local stack keeps its object store and databases there): they wait, "
                               "saying so, instead of failing half-way through a commit.")


    @property
    def merge_horizon_seconds(self) -> float:
        """How recent the rows of a click data file the click job may still merge can be: maintenance leaves files
        whose rows all came in later than this ago (0 when the job merges nothing)."""
        return self.merge_seconds * (self.merge_fan_in + 2)

class MaintenanceSettings(BaseModel):
    """When `lakehouse run maintain` compacts, rewrites and expires (Iceberg's procedures do the work)."""

    interval_seconds: float = Field(60.0, gt=0, description="Seconds between maintenance passes over the tables.")
    target_file_mb: int = Field(
        512, ge=1, description="Size merges aim for (Iceberg's own default). Files from 3/4 of it up are final "
                               "and stay put (docs/maintenance.md).")
    small_file_mb: float = Field(
        2.0, gt=0, description="Data files below this count as small: the writers' seconds-level files, and "
                               "nothing a compaction writes (set too high, a compaction's own outputs count as "
                               "small and get compacted twice: docs/maintenance.md).")
    compact_small_files: int = Field(
        16, ge=2, description="Compact a partition's small files into one once it holds this many.")
    compact_medium_files: int = Field(
        8, ge=3, description="Merge a partition's files of one size tier once it holds this many (the fan-in); "
                             "each tier spans this many / 2 times the one below, so what a merge writes "
                             "always lands in a higher tier (`tier_bounds`).")
    delete_files_threshold: int = Field(
        8, ge=1, description="Rewrite delete files (apply them to data) once a table holds this many.")
    manifests_threshold: int = Field(24, ge=2, description="Rewrite manifests once a snapshot has this many.")
    snapshot_retention_minutes: float = Field(
        10.0, gt=0, description="Snapshots older than this are expired (time travel reaches this far back), except "
                                "those a writer's or a reader's position still needs. Each snapshot kept is listed in "
                                "the metadata file every commit writes and every new reader parses "
                                "(docs/performance.md).")
    retain_last_snapshots: int = Field(10, ge=1, description="Snapshots always kept, however old.")
    reader_retention_minutes: float = Field(
        60.0, gt=0, description="How long a table's snapshots wait for an incremental reader that stopped (the "
                                "live aggregates, in the click table) before they expire anyway; a reader that "
                                "finds its position expired starts again (pipeline.aggregate_on_snapshot_expired).")
    clock_skew_seconds: float = Field(
        5.0, ge=0, description="How far the clocks of the hosts that commit to a table may differ: an incremental "
                               "reader's hold on the snapshots it has yet to read starts this much earlier.")
    orphan_older_than_hours: float = Field(
        24.0, ge=0, description="Unreferenced files younger than this are never removed (a writer may be "
                                "about to commit them).")
    orphan_interval_minutes: float = Field(
        60.0, gt=0, description="How often orphan files are looked for (in a pass that merges nothing: the "
                                "listing and a merge in the same minute both cost the writers).")
    commit_retries: int = Field(4, ge=0, description="Retries of a maintenance commit that lost a race.")
    nice: int = Field(
        19, ge=0, le=19, description="CPU niceness `lakehouse run maintain` gives itself (and its Spark JVM), so "
                                     "on a shared machine the streaming writers get the cores first (19: it "
                                     "runs on what they leave; docs/maintenance.md, the soak CSVs in docs/results/).")

    def retention_ms(self, table_max_age_ms: int | None) -> int:
        """How long a table's snapshots are kept: ``snapshot_retention_minutes``, or the table's own
        ``history.expire.max-snapshot-age-ms`` if shorter (``expire_before``: what both expiries, maintenance's
        and the dimension writer's after its folds, expire).

        The dimension tables declare a short age: their writer (PyIceberg) copies the table's metadata a few
        times per commit, so its commits slow down with every snapshot kept.
        """
        default = int(self.snapshot_retention_minutes * 60_000)
        return default if table_max_age_ms is None else min(default, table_max_age_ms)

    def expire_before(self, now_ms: int, table_max_age_ms: int | None, kept_from_ms: Iterable[int] = ()) -> int:
        """The one expiry rule, for both expiries: snapshots committed before the returned time go, except the
        newest ``retain_last_snapshots`` and the current one. ``kept_from_ms``: commit times from which every
        snapshot stays whatever its age (a writer's newest progress snapshot, where it resumes; an incremental
        reader's position, less the clock skew)."""
        return min([now_ms - self.retention_ms(table_max_age_ms), *kept_from_ms])

    @property
    def small_file_bytes(self) -> int:
        return int(self.small_file_mb * 1024 * 1024)

    @property
    def final_file_bytes(self) -> int:
        """Files from here up are final: 3/4 of the target, Iceberg's own ``min-file-size-bytes``."""
        return self.target_file_mb * 1024 * 1024 * 3 // 4

    @property
    def tier_bounds(self) -> tuple[int, ...]:
        """Upper size bound of each tier: tier 0 is the small files, tier k spans
        ``[tier_bounds[k-1], tier_bounds[k])``, and files from the last bound up are final.

        Each bound is the one below times ``compact_medium_files`` / 2: a merge takes at least
        that many files of at least the tier's lower bound, and half of their size (sorting
        compresses better than the inputs did) is where the tier ends, so a merge's output is
        never merged again at its own tier. With only a small and a medium tier, the medium
        merges' outputs were never merged again and piled up in a day-partition until midnight.
        With tiers up to the final size a partition holds the writers' latest small files, fewer
        than ``compact_medium_files`` files per tier and its final files, and every byte is
        rewritten once per tier it passes through (a simulated day:
        tests/pipeline/maintenance/test_maintenance_plan.py; its figures in docs/maintenance.md).
        """
        return tier_bounds(self.small_file_bytes, self.final_file_bytes, self.compact_medium_files / 2)
