"""`lakehouse run maintain`: a pass over every lakehouse table each ``interval_seconds``.

It is a job like the ingestion jobs (``run_once``), so it runs in the same loop (backoff
when the object store or metastore is away, stale-lock clean-up, Ctrl-C after the pass)
and can share a Spark application with them (`lakehouse run pipeline --jobs
clicks,dims,maintain`) or run alone (its own SparkApplication / schedule in Kubernetes).
"""

from __future__ import annotations

import datetime as dt
import logging
import time
from dataclasses import dataclass, field

from lakehouse.errors import LakehouseError
from lakehouse.settings import Settings
from pipeline import metrics
from pipeline.maintenance.actions import ActionResult, Actions, is_conflict, merge_tier, planned
from pipeline.maintenance.health import read_health
from pipeline.tables import INGEST_TIME

log = logging.getLogger(__name__)

#: passes before the first orphan scan of a (re)started maintenance job
FIRST_ORPHAN_SCAN_PASSES = 5


def managed_tables(settings: Settings) -> list[str]:
    """Every table of the lake, as Spark names them (a table added to the settings is maintained too)."""
    return [f"{settings.catalog.name}.{t.table}" for t in settings.tables]


@dataclass
class _Pass:
    """What one pass has done so far."""
    scan: str | None  # the table whose orphan scan this pass may run
    clicks_seen: float = 0.0  # when the click table was last maintained (monotonic s)
    merged: bool = False  # a merge ran: no orphan scan after it in this pass
    done: int = 0
    errors: list[BaseException] = field(default_factory=list)


class MaintenanceJob:
    name = "maintain"

    def __init__(self, spark, settings: Settings, first_orphan_scan_after_s: float | None = None):
        """``first_orphan_scan_after_s``: when the first orphan scan may run (default: after
        ``FIRST_ORPHAN_SCAN_PASSES`` passes). Orphan scans only delete files older than
        ``orphan_older_than_hours``, so putting them off costs nothing, while the first passes
        after a start have the small files a restart left to compact."""
        self.spark, self.settings = spark, settings
        self.tables = managed_tables(settings)
        self.actions = Actions(spark, settings.catalog.name, settings.maintenance)
        self.clicks = f"{settings.catalog.name}.{settings.catalog.clicks_table}"
        #: tables whose writer folds their files itself (``LakeTable.upkeep``): a Spark rewrite here would rewrite
        #: every file with a delete (the whole table, for random keys) and make the writer read its index again;
        #: maintenance only expires their snapshots and removes their orphans
        self.writer_folded = {f"{settings.catalog.name}.{t.table}" for t in settings.tables if t.upkeep == "writer-folds"}
        #: for each table, the tables whose writers read its snapshots incrementally (``LakeTable.reads``)
        self.readers = {f"{settings.catalog.name}.{t.table}": tuple(f"{settings.catalog.name}.{r.table}"
                                                                   for r in settings.tables if r.reads == t.role)
                        for t in settings.tables}
        m = settings.maintenance
        delay = FIRST_ORPHAN_SCAN_PASSES * m.interval_seconds if first_orphan_scan_after_s is None \
            else first_orphan_scan_after_s
        #: when each table's orphan scan last ran (monotonic s); unscanned tables count from here
        self._orphans_never = time.monotonic() - m.orphan_interval_minutes * 60 + delay
        self._orphans_last: dict[str, float] = {}
        self.results: list[tuple[str, ActionResult]] = []  # the last pass, for tests and the soak report
        self._pass = _Pass(scan=None)

    def recover(self) -> None:
        """Nothing to re-read: every pass starts from the tables' current metadata."""

    def close(self) -> None:
        """No resources of its own (the Spark session belongs to the caller)."""

    def run_once(self) -> int:
        """One pass; returns the number of actions that committed something.

        The click table comes first, and again between any other table's actions once an
        interval has passed since its last look: it is the one every reader scans and the writers
        add a file to each trigger, while a cold pass at the maintenance's low priority can spend
        longer on the other tables than the click table takes to gather its fan-in of small files.
        """
        self.results = []
        self._pass = _Pass(scan=self._orphan_scan_due(), clicks_seen=time.monotonic())
        for table in sorted(self.tables, key=lambda t: t != self.clicks):
            self._maintain(table)
        done, errors = self._pass.done, self._pass.errors
        if errors and not done:
            raise errors[-1]  # nothing worked: let the loop back off (object store or metastore away)
        metrics.BATCHES.labels(self.name, "committed" if done else "idle").inc()  # a pass is this job's batch
        return done

    def _maintain(self, table: str) -> None:
        """Read one table's health and run the actions it needs; a failure is counted, not raised."""
        if not self.spark.catalog.tableExists(table):
            return
        m, this_pass = self.settings.maintenance, self._pass
        now_ms = int(time.time() * 1000)
        health = read_health(self.spark, table, m.tier_bounds, self.readers.get(table, ()))
        actions = planned(health, m, now_ms, table == this_pass.scan and not this_pass.merged)
        if table in self.writer_folded:
            actions = [a for a in actions if a in ("expire", "remove_orphans")]
        this_pass.merged = this_pass.merged or "merge" in actions
        for action in actions:
            try:
                result = self._run(table, action, health, now_ms)
            except Exception as exc:  # noqa: BLE001 - one table's trouble must not stop the others
                outcome = "conflict" if is_conflict(exc) else "failed"
                metrics.MAINTENANCE_RUNS.labels(table, action, outcome).inc()
                log.warning("maintenance %s on %s: %s (%s)", action, table, outcome, str(exc).splitlines()[0])
                if outcome == "failed":
                    this_pass.errors.append(exc)
            else:
                if action == "remove_orphans":
                    self._orphans_last[table] = time.monotonic()
                    this_pass.scan = None
                metrics.MAINTENANCE_RUNS.labels(table, action, "done").inc()
                self.results.append((table, result))
                this_pass.done += 1
            if table != self.clicks:
                self._look_at_the_clicks_again()
        if table == self.clicks:
            this_pass.clicks_seen = time.monotonic()

    def _look_at_the_clicks_again(self) -> None:
        """Maintain the click table between another table's actions once an interval has passed since its last look."""
        this_pass = self._pass
        if self.clicks not in self.tables or \
                time.monotonic() - this_pass.clicks_seen < self.settings.maintenance.interval_seconds:
            return
        this_pass.clicks_seen = time.monotonic()  # also when the click table is not there yet
        self._maintain(self.clicks)

    def _orphan_scan_due(self) -> str | None:
        """The one table whose orphan scan this pass may run: the longest overdue, if any is.

        A scan lists the table's whole prefix in the object store. All seven in one pass made
        the first pass of a ten-minute CI soak last 50 s, and the click table's small files
        reached 71 before the second pass compacted them; one per pass keeps passes short.
        """
        limit = self.settings.maintenance.orphan_interval_minutes * 60
        waited = {t: time.monotonic() - self._orphans_last.get(t, self._orphans_never) for t in self.tables}
        table = max(waited, key=lambda t: waited[t], default=None)
        return table if table is not None and waited[table] >= limit else None

    def _not_the_writers(self, table: str, now_ms: int) -> str | None:
        """The filter that leaves the click job the files it may still merge itself (``pipeline.clicks.file_merges``):
        only files holding a row that came in before its horizon are rewritten here."""
        horizon = self.settings.pipeline.merge_horizon_seconds
        if table != self.clicks or horizon <= 0:
            return None
        cutoff = dt.datetime.fromtimestamp(now_ms / 1000 - horizon, dt.timezone.utc)
        return f"{INGEST_TIME} < TIMESTAMP '{cutoff:%Y-%m-%d %H:%M:%S.%f}+00:00'"

    def _run(self, table: str, action: str, health, now_ms: int) -> ActionResult:
        began = time.monotonic()
        if action == "compact":
            result = self.actions.compact(table, sort=table == self.clicks, where=self._not_the_writers(table, now_ms))
        elif action == "merge":
            tier = merge_tier(health, self.settings.maintenance)
            if tier is None:  # the plan asks for a merge only where a tier holds the fan-in
                raise LakehouseError(f"{table}: a merge was planned, but no tier holds enough files")
            result = self.actions.merge(table, sort=table == self.clicks, tier=tier,
                                        where=self._not_the_writers(table, now_ms))
        elif action == "apply_deletes":
            result = self.actions.apply_deletes(table)
        elif action == "rewrite_manifests":
            result = self.actions.rewrite_manifests(table)
        elif action == "expire":
            result = self.actions.expire(table, health, now_ms)
        else:
            result = self.actions.remove_orphans(table, now_ms)
        seconds = time.monotonic() - began
        metrics.MAINTENANCE_SECONDS.labels(action).observe(seconds)
        metrics.MAINTENANCE_FILES.labels(table, action).inc(result.files_rewritten)
        metrics.MAINTENANCE_BYTES.labels(table).inc(result.bytes_rewritten)
        metrics.MAINTENANCE_EXPIRED.labels(table).inc(result.snapshots_expired)
        metrics.MAINTENANCE_ORPHANS.labels(table).inc(result.orphans_removed)
        log.info("maintenance %s on %s in %.1f s: %s", action, table, seconds, result)
        return result
