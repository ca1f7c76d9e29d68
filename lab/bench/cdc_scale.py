"""CDC at real size: a member table of N rows snapshotted, then changed at a steady rate.

What it measures, each the way a user feels it:

1. **load**: N generated members into a fresh source database (``loadgen.dimensions``), rows/s;
2. **initial snapshot**: the capture's first run streams them through Kafka into Iceberg
   while changes are written *during* the snapshot; rows/s from the capture's start to the
   commit of the last snapshot row, and the peak memory of the capture and apply processes;
3. **steady changes**: RATE changes/s for DURATION (80 % updates of random existing keys,
   10 % inserts, 10 % deletes, some keys deleted and inserted again in one transaction):
   sustained changes/s, apply freshness p50/p95 (database commit -> first snapshot holding
   the row), write amplification (bytes of data and delete files added per change, folds
   included, over the raw bytes of a changed row), delete files at the end, the apply's peak memory;
4. **a restart**: the apply killed (kill -9) once every change is in, started again: seconds until
   it applies again and its peak memory (it reads where every key lives back from the table);
5. **every reader right**: a fingerprint of the whole table (rows, distinct keys, sums over
   every changed value) from MariaDB, DuckDB, Spark and Trino, and the exact rows of a
   sample of the changed keys.

The capture and the apply job run as their own processes (``lakehouse run cdc`` / ``run dims``),
as in every runtime.
"""

from __future__ import annotations

import random
import threading
import time
from dataclasses import dataclass, field

from deploy.local.services.broker import Broker
from deploy.local.services.mariadb import create_source_database
from lab.bench.cdc import bench_settings, discard_cdc_world
from lab.bench.cdc_processes import CdcProcesses
from lab.bench.freshness import MarkedFreshness
from lab.bench.ingest import commit_rate
from lab.bench.process_cpu import CpuMeter, PeakRss, service_cpu, spark_parts, tree_cpu_seconds, tree_peak_rss_mb, tree_pids
from lab.bench.read_cost import READERS, ReadCost, read_cost, reader_costs
from lab.reconcile import member_fingerprints, member_sample_differences
from lakehouse.catalog import pyiceberg_catalog
from lakehouse.errors import LakehouseError
from lakehouse.kafka_clients import end_offsets
from lakehouse.settings import Settings
from lakehouse.source_database import connect
from loadgen.dimensions import load_table, member_key
from pipeline.lake_writer.live_rows import live_files

MARK = "bench:"


#: seconds the run waits, once the changes end, for the apply to apply the last of them
CATCH_UP_S = 300.0


@dataclass
class ScaleResult:
    members: int
    load_rows_per_s: float
    snapshot_rows_per_s: float
    snapshot_capture_rss_mb: float
    snapshot_apply_rss_mb: float
    changes: int = 0
    sustained_cps: float = 0.0
    freshness_p50_s: float = float("nan")
    freshness_p95_s: float = float("nan")
    freshness_p99_s: float = float("nan")
    #: seconds the changes were written for, and the apply's CPU seconds over them (driver, executors, workers)
    changing_s: float = 0.0
    apply_cpu_s: float = 0.0
    bytes_per_change: float = 0.0
    row_bytes: float = 0.0
    delete_files_end: int = 0
    data_files_end: int = 0
    apply_rss_mb: float = 0.0
    #: the apply's peak RSS by process tree while changing: its driver, each executor with its Python workers
    apply_parts_rss_mb: dict[str, float] = field(default_factory=dict)
    snapshot_apply_parts_rss_mb: dict[str, float] = field(default_factory=dict)
    #: the same by summed PSS (each shared page counted once, as a container's limit counts it), and the whole apply
    apply_parts_pss_mb: dict[str, float] = field(default_factory=dict)
    snapshot_apply_parts_pss_mb: dict[str, float] = field(default_factory=dict)
    #: the apply killed (kill -9) once the changes are in, started again: seconds until it applied a change written
    #: after the kill, and its peak memory until then (its key index read back from the table)
    restart_s: float = float("nan")
    restart_rss_mb: float = float("nan")
    reads_start: ReadCost | str | None = None  # a text: why DuckDB gave no figure (cannot read it, or not in time)
    reads_end: ReadCost | str | None = None
    #: (seconds into the changes, read cost then): whether the read cost levels off, not only where it ends
    reads_during: list[tuple[float, ReadCost]] = field(default_factory=list)
    #: cores each part used while the changes ran (CPU seconds / seconds): what 1,000 changes/s cost
    cores: dict[str, float] = field(default_factory=dict)
    #: cores each part used through the snapshot (two of them busy: the part that uses most is what to cut)
    snapshot_cores: dict[str, float] = field(default_factory=dict)
    fingerprints: dict[str, tuple] = field(default_factory=dict)
    sample_differences: dict[str, int] = field(default_factory=dict)
    kills: list[str] = field(default_factory=list)
    #: whether the apply had applied every change within ``CATCH_UP_S`` of the changes' end
    caught_up: bool = True
    #: each reader's cost at the end, or why it cannot read the table (``reader_costs``)
    readers: dict[str, ReadCost | str] = field(default_factory=dict)

    @property
    def cpu_s_per_million(self) -> float:
        """The apply's CPU seconds per million changes written while changing."""
        return self.apply_cpu_s / self.changes * 1e6 if self.changes else float("nan")

    @property
    def write_amplification(self) -> float:
        return self.bytes_per_change / self.row_bytes if self.row_bytes else float("nan")


class MemberChanges:
    """Paced member changes: 80 % updates, 10 % inserts, 10 % deletes; every row it writes is stamped.

    ``show_params`` of each written row is ``bench:<commit ms>`` (freshness reads it back).
    One change in 50 is a key deleted and inserted again in the same transaction.
    """

    def __init__(self, s: Settings, members: int, seed: int = 7):
        self.s, self.rng = s, random.Random(seed)
        self.next_new = members
        self.deleted: set[str] = set()
        self.touched: list[str] = []

    def _existing(self) -> str:
        while True:
            key = member_key(self.rng.randrange(self.next_new))
            if key not in self.deleted:
                return key

    def run(self, rate: float, duration: float, tick: float = 0.02) -> int:
        sent, began = 0, time.monotonic()
        with connect(self.s, user=self.s.mariadb.app_user, database=self.s.mariadb.database) as conn, \
                conn.cursor() as cur:
            conn.autocommit(False)
            while (elapsed := time.monotonic() - began) < duration:
                mark = f"{MARK}{int(time.time() * 1000)}"
                for _ in range(max(0, int(rate * elapsed) - sent)):
                    sent += self._one(cur, mark)
                conn.commit()
                time.sleep(tick)
        return sent

    def _one(self, cur, mark: str) -> int:
        roll = self.rng.random()
        if roll < 0.02:  # deleted and inserted again, one transaction
            key = self._existing()
            cur.execute("DELETE FROM user_member WHERE userid = %s", (key,))
            cur.execute("INSERT INTO user_member (userid, name, show_params, memberLevel) VALUES (%s, %s, %s, 9)",
                        (key, f"again-{key}", mark))
            self.touched.append(key)
            return 2
        if roll < 0.80:
            key = self._existing()
            cur.execute("UPDATE user_member SET show_params = %s, memberLevel = %s WHERE userid = %s",
                        (mark, self.rng.randint(1, 5), key))
        elif roll < 0.90:
            if self.deleted and self.rng.random() < 0.5:  # a key deleted in an earlier batch comes back
                key = self.deleted.pop()
            else:
                key, self.next_new = member_key(self.next_new), self.next_new + 1
            cur.execute("INSERT INTO user_member (userid, name, show_params, memberLevel) VALUES (%s, %s, %s, 1)",
                        (key, f"member-{key}", mark))
        else:
            key = self._existing()
            cur.execute("DELETE FROM user_member WHERE userid = %s", (key,))
            self.deleted.add(key)
        self.touched.append(key)
        return 1


def _wait_applied(s: Settings, target: int, timeout: float, processes: CdcProcesses) -> float:
    """Seconds until the member table holds the changes up to ``target``: polled on the apply's metrics,
    confirmed on the table."""
    began = time.monotonic()
    while time.monotonic() - began < timeout:
        processes.check()
        reported = processes.applied()
        try:
            if (reported is None or reported >= target) and processes.committed() >= target:
                processes.settle()
                return time.monotonic() - began
        except Exception:  # noqa: BLE001 - the table may not exist yet
            pass
        time.sleep(0.5 if reported is not None else 2.0)
    raise LakehouseError(f"the apply did not reach offset {target:,} in {timeout:.0f}s")


def _topic_end(s: Settings) -> int:
    return sum(end_offsets(s.kafka.bootstrap, s.cdc_topic("user_member")).values())


def _files(s: Settings) -> tuple[int, int]:
    """(data files, delete files) of the member table now."""
    files = [e.data_file for e in live_files(pyiceberg_catalog(s).load_table(s.catalog.members_table))]
    data = [f for f in files if f.content == 0]
    return len(data), len(files) - len(data)


def _changed_row_bytes(s: Settings) -> float:
    """Mean raw bytes of a changed row (its values: key, name, params, an int, a timestamp)."""
    with connect(s, database=s.mariadb.database) as conn, conn.cursor() as cur:
        cur.execute("SELECT AVG(LENGTH(userid) + LENGTH(name) + COALESCE(LENGTH(show_params), 0) + 4 + 8) "
                    f"FROM user_member WHERE show_params LIKE '{MARK}%'")
        return float(cur.fetchone()[0] or 0)


def _note_bytes_added(table, since_ms: int, added: dict[int, int]) -> None:
    """Record the bytes of every file (data and deletes, folds included) each commit since ``since_ms`` added.

    Noted as the run goes: the writer expires snapshots older than ten minutes.
    """
    for snap in table.snapshots():
        if snap.timestamp_ms >= since_ms:
            added[snap.snapshot_id] = int((snap.summary.additional_properties if snap.summary else {})
                                          .get("added-files-size", 0))


def run(settings: Settings, members: int, rate: float, duration: float, progress=print,
        engines: tuple[str, ...] = ("duckdb", "spark", "trino"), chaos: bool = False, keep: bool = False,
        apply: str = "pipeline", flink_checkpoint_s: float = 1.0) -> ScaleResult:
    """The whole benchmark (module docstring); ``chaos``: kill -9 the capture and the apply job, each once
    during the snapshot and once during the changes, restarting them; the readers must still agree.
    ``apply``: what applies the changes (``CdcProcesses``)."""
    s = bench_settings(settings, time.strftime("%Y%m%d%H%M%S"))
    create_source_database(s, s.mariadb.database)
    with connect(s, database=s.mariadb.database) as conn, conn.cursor() as cur:
        cur.execute("DELETE FROM user_member")  # the seed's 5 members: the generated key space only
    loaded = load_table(s, "user_member", members)
    progress(f"loaded {members:,} members in {loaded.seconds:.1f}s ({loaded.rows_per_s:,.0f} rows/s)")
    Broker(s).bootstrap()
    began = time.monotonic()
    processes = CdcProcesses(s, s.mariadb.database, apply, flink_checkpoint_s)
    writer = MemberChanges(s, members)
    try:
        peaks = PeakRss(lambda: _watched(processes), pss=True)
        meter = _cpu_meter(s, processes)
        meter.start()
        during = threading.Thread(target=writer.run, args=(100, 20.0), daemon=True)  # changes *during* the snapshot
        during.start()
        if chaos:
            _wait_applied(s, members // 3, 3600, processes)
            processes.crash("dims", "during the snapshot")
            _wait_topic(s, members // 2 if members > 100_000 else 1, processes)
            processes.crash("cdc", "during the snapshot")
        _wait_applied(s, members, 3600, processes)
        snapshot_s = time.monotonic() - began
        during.join()
        snapshot_peaks = peaks.stop()
        snapshot_cpu = meter.stop()
        progress(f"snapshot: {members:,} rows applied in {snapshot_s:.1f}s ({members / snapshot_s:,.0f} rows/s); "
                 f"peak RSS capture {snapshot_peaks['capture']:,.0f} MiB, apply {snapshot_peaks['apply']:,.0f} MiB")
        result = ScaleResult(members, loaded.rows_per_s, members / snapshot_s, snapshot_peaks["capture"],
                             snapshot_peaks["apply"],
                             snapshot_cores={part: cpu / snapshot_s for part, cpu in snapshot_cpu.items()},
                             snapshot_apply_parts_rss_mb=_parts(snapshot_peaks),
                             snapshot_apply_parts_pss_mb=_parts(peaks.pss_peak_mb(), whole=True))
        _wait_applied(s, _topic_end(s), 300, processes)
        result.reads_start = read_cost(s, members)
        if duration > 0:
            _steady(s, result, writer, rate, duration, processes, progress, chaos)
            result.reads_end = read_cost(s, members)
        if result.caught_up:
            result.restart_s, result.restart_rss_mb = _restart(s, processes, writer)
    finally:
        processes.stop()
    result.kills = processes.kills
    result.data_files_end, result.delete_files_end = _files(s)
    progress("what each reader pays: " + ", ".join(READERS))
    result.readers = reader_costs(s, members)
    progress("reading the table back through " + ", ".join(("mariadb", *engines)))
    result.fingerprints = member_fingerprints(s, engines)
    result.sample_differences = member_sample_differences(s, sorted(set(writer.touched[-2000:])), engines)
    if not keep:
        discard_cdc_world(s)
    return result


def _watched(processes: CdcProcesses, only: tuple[str, ...] = ("capture", "apply")) -> dict[str, list[int]]:
    """The processes whose memory the benchmark samples: the capture's and the apply's trees, and the apply's
    by part (``apply: driver``, ``apply: executor N``) when it is a Spark application with executors."""
    pids = processes.pids()
    out = {name: tree_pids(pid) for name, pid in pids.items() if name in only}
    if "apply" in out:
        out.update({f"apply: {part}": members for part, members in spark_parts(pids["apply"]).items()})
    return out


def _parts(peaks: dict[str, float], whole: bool = False) -> dict[str, float]:
    """The apply's parts' peaks (``_watched``), and with ``whole`` the whole apply's as "all"."""
    parts = {name.removeprefix("apply: "): mb for name, mb in peaks.items() if name.startswith("apply: ")}
    return {**parts, "all": peaks["apply"]} if whole else parts


def _cpu_meter(s: Settings, processes: CdcProcesses) -> CpuMeter:
    """CPU seconds of every part the CDC path runs on (the benchmark's own process left out)."""
    return CpuMeter({"apply": lambda: tree_cpu_seconds(processes.pids()["apply"]),
                     "capture": lambda: tree_cpu_seconds(processes.pids()["capture"]),
                     "MariaDB": service_cpu(s.mariadb.port), "Kafka": service_cpu(s.kafka.port),
                     "object store": service_cpu(s.s3.port), "metastore": service_cpu(s.metastore.port)})


def _restart(s: Settings, processes: CdcProcesses, writer: MemberChanges) -> tuple[float, float]:
    """kill -9 of the apply job with every change applied, started again at once, a second of changes written:
    seconds from the kill until they are applied, and the new process's peak RSS until then (MiB). What a user
    waits for after a crash or a redeploy: the job reads where every key lives back from the table first."""
    before = _topic_end(s)
    began = time.monotonic()
    processes.crash("dims", "after the changes")
    sent = writer.run(10, 1.0)
    _wait_topic(s, before + sent, processes)  # a change is one record or more (delete and insert again: two)
    _wait_applied(s, _topic_end(s), 600, processes)
    return time.monotonic() - began, tree_peak_rss_mb(processes.pids()["apply"])


def _wait_topic(s: Settings, target: int, processes: CdcProcesses, timeout: float = 3600) -> None:
    deadline = time.monotonic() + timeout
    while _topic_end(s) < target:
        processes.check()
        if time.monotonic() > deadline:
            raise LakehouseError(f"the capture did not publish up to offset {target:,} in {timeout:.0f}s; its log: "
                                 f"{processes.logs / f'bench-cdc-scale-cdc-{processes.tag}.log'}")
        time.sleep(0.2)


def _steady(s: Settings, result: ScaleResult, writer: MemberChanges, rate: float, duration: float,
            processes: CdcProcesses, progress, chaos: bool) -> None:
    progress(f"writing {rate:,.0f} changes/s for {duration:.0f}s")
    peaks = PeakRss(lambda: _watched(processes, only=("apply",)), pss=True)
    meter = _cpu_meter(s, processes)
    meter.start()
    since_ms, began = int(time.time() * 1000), time.monotonic()
    first = processes.committed()
    written: list[int] = []
    thread = threading.Thread(target=lambda: written.append(writer.run(rate, duration)), daemon=True)
    thread.start()
    samples = []
    crashes = [(duration / 3, "dims"), (2 * duration / 3, "cdc")] if chaos else []
    fresh, polled, added = MarkedFreshness(("userid", "show_params"), since_ms, MARK), 0.0, {}
    read_every, next_read = max(duration / 6, 60.0), max(duration / 6, 60.0)
    # A reader that could not read the table after the snapshot (or stops at its time limit once) is not asked
    # again while the system changes: a read left running up to its limit takes the cores the system is
    # measured on (DuckDB on the Flink peer's equality deletes: two cores for the whole limit, each minute).
    reads = isinstance(result.reads_start, ReadCost)
    if not reads:
        progress(f"no reads while changing: DuckDB's read after the snapshot gave no figure ({result.reads_start})")
    while thread.is_alive():
        elapsed = time.monotonic() - began
        if crashes and elapsed >= crashes[0][0]:
            processes.crash(crashes.pop(0)[1], "during the changes")
        reported = processes.applied()
        samples.append((elapsed, (processes.committed() if reported is None else reported) - first))
        if reads and elapsed >= next_read and elapsed < duration - 10:
            cost = read_cost(s, result.members, repeat=5)
            if isinstance(cost, ReadCost):
                result.reads_during.append((elapsed, cost))
                progress(f"{elapsed / 60:.0f} min: point p95 {cost.point_p95_s:.2f}s, count p95 "
                         f"{cost.count_p95_s:.2f}s, {cost.delete_files} delete files, {cost.deleted_rows:,} deleted rows")
            else:
                reads = False
                progress(f"{elapsed / 60:.0f} min: DuckDB read: {cost}; no more reads while changing")
            next_read += read_every
        if elapsed - polled >= 30:  # before the writer expires them (it keeps ten minutes)
            table = pyiceberg_catalog(s).load_table(s.catalog.members_table)
            fresh.poll(table)
            _note_bytes_added(table, since_ms, added)
            polled = elapsed
        time.sleep(1.0)
    samples.append((time.monotonic() - began, processes.committed() - first))
    cpu = meter.stop()
    result.changing_s = time.monotonic() - began
    result.cores = {part: seconds / result.changing_s for part, seconds in cpu.items()}
    result.apply_cpu_s = cpu["apply"]
    try:
        _wait_applied(s, _topic_end(s), CATCH_UP_S, processes)
    except LakehouseError:  # a system that fell behind: its figures say so, its table is compared as it stands
        result.caught_up = False
        progress(f"the apply had not caught up {CATCH_UP_S:.0f}s after the changes ended: figures as they stand")
    table = pyiceberg_catalog(s).load_table(s.catalog.members_table)
    fresh.poll(table)
    _note_bytes_added(table, since_ms, added)
    result.changes = written[0] if written else 0
    result.sustained_cps = commit_rate(samples)
    steady_peaks = peaks.stop()
    result.apply_rss_mb, result.apply_parts_rss_mb = steady_peaks["apply"], _parts(steady_peaks)
    result.apply_parts_pss_mb = _parts(peaks.pss_peak_mb(), whole=True)
    result.bytes_per_change = sum(added.values()) / max(result.changes, 1)
    result.row_bytes = _changed_row_bytes(s)
    result.freshness_p50_s, result.freshness_p95_s, result.freshness_p99_s = fresh.quantiles_s((50, 95, 99))
