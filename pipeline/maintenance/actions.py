"""The maintenance actions, each one Iceberg Spark procedure, and the rule for each.

Every action is safe next to the streaming writers: Iceberg validates a maintenance
commit against whatever committed meanwhile and refuses it on a real conflict (it never
overwrites a streaming commit); we retry a refused commit a few times with backoff and
otherwise leave it to the next pass. Expiry never removes the newest snapshot that
carries a writer's progress marker (Kafka offsets, stream progress).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_exponential

from lakehouse.job_settings import MaintenanceSettings
from pipeline.maintenance.health import TableHealth

log = logging.getLogger(__name__)

CONFLICT_MARKERS = ("CommitFailedException", "ValidationException", "Cannot commit", "conflicting files",
                    "CommitStateUnknownException", "found new delete", "Found conflicting")


def is_conflict(exc: BaseException) -> bool:
    """A lost race with another commit (retry later), as opposed to a real failure."""
    text = f"{type(exc).__name__}: {exc}"
    return any(marker in text for marker in CONFLICT_MARKERS)


@dataclass
class ActionResult:
    action: str
    files_rewritten: int = 0
    bytes_rewritten: int = 0
    snapshots_expired: int = 0
    orphans_removed: int = 0
    tier: int | None = None  # a merge's size tier (MaintenanceSettings.tier_bounds)


class Actions:
    """Runs the procedures for one catalog; ``call`` retries a commit that lost a race."""

    def __init__(self, spark, catalog: str, settings: MaintenanceSettings):
        self.spark, self.catalog, self.settings = spark, catalog, settings

    def call(self, procedure: str, **args: str) -> list:
        arguments = ", ".join(f"{k} => {v}" for k, v in args.items())
        statement = f"CALL {self.catalog}.system.{procedure}({arguments})"
        return self._retrying(lambda: self.spark.sql(statement).collect())

    def _retrying(self, commit):
        """Run ``commit``, again after a backoff when it lost a race with another commit."""
        for attempt in Retrying(retry=retry_if_exception(is_conflict), reraise=True,
                                stop=stop_after_attempt(self.settings.commit_retries + 1),
                                wait=wait_exponential(multiplier=0.5, max=10)):
            with attempt:
                return commit()
        return None  # unreachable: Retrying either returns or raises

    def _iceberg_table(self, table: str):
        jvm, session = self.spark._jvm, self.spark._jsparkSession
        return jvm.org.apache.iceberg.spark.Spark3Util.loadIcebergTable(session, table)

    @staticmethod
    def _name(table: str) -> str:
        return "'" + table.split(".", 1)[1] + "'"  # the procedures take namespace.table

    def compact(self, table: str, sort: bool, where: str | None = None) -> ActionResult:
        """Rewrite a table's small files into bigger ones, nothing else.

        Size-tiered, so that a pass costs what arrived since the last one: the new small
        files become one file per partition (sorted by the table's sort order when ``sort``,
        so its min/max statistics prune), and that output is left alone by the next passes
        until enough of it piles up for :meth:`merge`. Rewriting every file under target size
        each pass, as before, re-read and re-sorted the last pass's remainder (up to 3/4 of
        the target size) however little had arrived, on the cores the writers' batches need.
        """
        return self._rewrite("compact", table, sort, self.settings.small_file_bytes, where)

    def merge(self, table: str, sort: bool, tier: int, where: str | None = None) -> ActionResult:
        """Rewrite every file up to ``tier``'s upper bound (that tier's files and any below it)
        into files of up to the target size; larger files, the higher tiers' and the final
        ones, stay put (``MaintenanceSettings.tier_bounds``). ``where``: a filter a file's rows must
        (by its statistics) possibly meet to be rewritten at all."""
        result = self._rewrite("merge", table, sort, self.settings.tier_bounds[tier], where)
        result.tier = tier
        return result

    def _rewrite(self, action: str, table: str, sort: bool, min_file_bytes: int, where: str | None) -> ActionResult:
        # One commit per rewrite, no partial progress: Iceberg's partial-progress commit service polls its queues
        # without sleeping while a group waits (apache/iceberg#12086), a whole core at the maintenance's priority
        # that its own rewrite tasks then wait behind. Partial progress would keep part of a rewrite that loses a race:
        # the click and dead-letter writers only append, and the live aggregates replace their small tables whole,
        # so there is no part to keep.
        options = {"min-input-files": "2", "min-file-size-bytes": str(min_file_bytes),
                   "target-file-size-bytes": str(self.settings.target_file_mb * 1024 * 1024)}
        filters = {"where": f'"{where}"'} if where else {}
        rows = self.call("rewrite_data_files", table=self._name(table),
                         strategy="'sort'" if sort else "'binpack'", options=_map(options), **filters)
        row = rows[0] if rows else None
        return ActionResult(action, files_rewritten=row.rewritten_data_files_count if row else 0,
                            bytes_rewritten=row.rewritten_bytes_count if row else 0)

    def apply_deletes(self, table: str) -> ActionResult:
        """Fold delete files into the data they delete from, then compact what position deletes remain."""
        rows = self.call("rewrite_data_files", table=self._name(table), strategy="'binpack'",
                         options=_map({"delete-file-threshold": "1", "min-input-files": "1",
                                       "remove-dangling-deletes": "true"}))
        done = rows[0].rewritten_data_files_count if rows else 0
        rest = self.call("rewrite_position_delete_files", table=self._name(table),
                         options=_map({"rewrite-all": "true"}))
        return ActionResult("apply_deletes", files_rewritten=done + (rest[0].rewritten_delete_files_count if rest else 0))

    def rewrite_manifests(self, table: str) -> ActionResult:
        rows = self.call("rewrite_manifests", table=self._name(table))
        return ActionResult("rewrite_manifests", files_rewritten=rows[0].rewritten_manifests_count if rows else 0)

    def expire(self, table: str, health: TableHealth, now_ms: int) -> ActionResult:
        """Expire snapshots older than the retention, never a writer's newest progress snapshot, nor one an
        incremental reader of the table has yet to read (``LakeTable.reads``: the live aggregates' position in the
        click table) unless that reader has committed nothing for ``reader_retention_minutes``. A reader's hold
        starts ``clock_skew_seconds`` before its position: a commit from a host whose clock is behind can carry an
        earlier time than the position's, and Iceberg's expiry stops keeping a lineage at its first snapshot older
        than the cutoff.

        Through Iceberg's table API (``Table.expireSnapshots``) on the driver rather than the
        ``expire_snapshots`` procedure: the procedure finds the files to delete with Spark jobs
        that read the manifests of *every* retained snapshot, and with a snapshot every few
        seconds that was 20 s of both cores a minute at 130 snapshots and growing (the soak's
        ``expire_s``) - time the writer's batches waited for. The table API, on a table whose
        only branch is main, cleans up incrementally: it reads just the expired snapshots'
        manifests, so a pass costs what it expires, not what the table retains. (A file a
        compaction replaced is deleted once that compaction's snapshot expires too, one
        retention later than the procedure would; nothing is left behind.)
        """
        stopped_before = now_ms - int(self.settings.reader_retention_minutes * 60_000)
        skew_ms = int(self.settings.clock_skew_seconds * 1000)
        held = [p.position_ms - skew_ms for p in health.read_positions.values() if p.moved_ms >= stopped_before]
        cutoff = self.settings.expire_before(now_ms, health.max_snapshot_age_ms, [*health.markers.values(), *held])
        retain = self.settings.retain_last_snapshots

        def commit() -> int:
            iceberg_table = self._iceberg_table(table)
            before = iceberg_table.snapshots().size()
            iceberg_table.expireSnapshots().expireOlderThan(cutoff).retainLast(retain).commit()
            iceberg_table.refresh()
            return before - iceberg_table.snapshots().size()

        return ActionResult("expire", snapshots_expired=max(0, self._retrying(commit)))

    def remove_orphans(self, table: str, now_ms: int) -> ActionResult:
        """Delete files no retained snapshot references and that are older than the safety margin.

        Through Iceberg's action API rather than the procedure, which refuses margins under
        24 h: the margin is a setting (default 24 h) so tests and quiet tables can use less.
        """
        cutoff = now_ms - int(self.settings.orphan_older_than_hours * 3_600_000)
        iceberg_table = self._iceberg_table(table)
        actions = self.spark._jvm.org.apache.iceberg.spark.actions.SparkActions.get(self.spark._jsparkSession)
        result = (actions.deleteOrphanFiles(iceberg_table)
                  .olderThan(cutoff).usePrefixListing(True).execute())
        return ActionResult("remove_orphans", orphans_removed=sum(1 for _ in result.orphanFileLocations()))


def _map(options: dict[str, str]) -> str:
    return "map(" + ", ".join(f"'{k}', '{v}'" for k, v in options.items()) + ")"


def merge_tier(health: TableHealth, settings: MaintenanceSettings) -> int | None:
    """The highest tier above the small files where a partition holds the fan-in, if any.

    The highest, because its merge takes the files of the tiers below along.
    """
    full = [tier for tier, files in enumerate(health.tier_files_worst_partition)
            if tier > 0 and files >= settings.compact_medium_files]
    return max(full, default=None)


def planned(health: TableHealth, settings: MaintenanceSettings, now_ms: int, orphans_due: bool) -> list[str]:
    """Which actions a table needs now, in the order they should run.

    The orphan scan, when due, waits for a pass without a merge: in the two-hour soak the
    worst window of the first hour was a 26 s merge and the hourly scan (~20 s over four
    tables) in the same minutes. The caller passes ``orphans_due=False`` for the rest of a
    pass once any table merged, for the same reason.
    """
    actions = []
    if health.delete_files >= settings.delete_files_threshold:
        actions.append("apply_deletes")
    if merge_tier(health, settings) is not None:
        actions.append("merge")  # takes the small files along
    elif health.small_files_worst_partition >= settings.compact_small_files:
        actions.append("compact")
    if health.manifests >= settings.manifests_threshold:
        actions.append("rewrite_manifests")
    retention_ms = settings.retention_ms(health.max_snapshot_age_ms)
    if (health.snapshots > settings.retain_last_snapshots and health.oldest_snapshot_ms is not None
            and now_ms - health.oldest_snapshot_ms > retention_ms):
        actions.append("expire")
    if orphans_due and "merge" not in actions:
        actions.append("remove_orphans")  # a listing beside a merge doubled the cost of its minute
    return actions
