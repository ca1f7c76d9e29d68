"""What differs between the two source databases, kept small and testable without a server.

The capture follows the binlog by file and position on both MariaDB (local stack) and MySQL 8.4
(the cluster): the same replication protocol, the same resume. What differs is the GTID form
the changes are labelled with and recorded by:

- MySQL: ``source_uuid:N``; the executed set is ``uuid:1-5:7-9,uuid2:1-3`` (``gtid_executed``,
  ``Executed_Gtid_Set`` of ``SHOW BINARY LOG STATUS``);
- MariaDB: ``domain-server-seq``; a position is one such triple per replication domain.

Each checkpoint carries the executed set after its last transaction (``gtid_set``), so an
operator can tell where the lake stands in the source's own terms, and a capture moved to a
replica could resume by GTID. ``add`` is idempotent: a transaction replayed after a reconnect
must not break the set.
"""

from __future__ import annotations

import re
from typing import Literal

Dialect = Literal["mariadb", "mysql"]
Intervals = list[tuple[int, int]]

_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"


class GtidFormatError(ValueError):
    """Text that is not a GTID or GTID set of the dialect it was read as."""


def dialect(version: str) -> Dialect:
    """``SELECT VERSION()`` to dialect: MariaDB says so (``10.11.6-MariaDB-log``, ``5.5.5-10.11.6-MariaDB``)."""
    return "mariadb" if "mariadb" in version.lower() else "mysql"


def parse_mysql_set(text: str) -> dict[str, Intervals]:
    """``uuid:1-5:7,uuid2:1-3`` (spaces and newlines as the server prints them) to merged intervals per uuid."""
    out: dict[str, Intervals] = {}
    for part in (p.strip() for p in text.replace("\n", "").split(",")):
        if not part:
            continue
        source, *ranges = part.split(":")
        if not re.fullmatch(_UUID, source) or not ranges:
            raise GtidFormatError(f"not a MySQL GTID set element: {part!r} (expected uuid:N[-M][:N-M...])")
        for item in ranges:
            match = re.fullmatch(r"(\d+)(?:-(\d+))?", item)
            if not match:
                raise GtidFormatError(f"not a GTID interval in {part!r}: {item!r} (tagged GTIDs uuid:tag:N, "
                                      "MySQL 8.3+, are not followed)")
            low, high = int(match.group(1)), int(match.group(2) or match.group(1))
            out.setdefault(source.lower(), []).append((low, high))
    return {source: _merged(intervals) for source, intervals in out.items()}


def _merged(intervals: Intervals) -> Intervals:
    merged: Intervals = []
    for low, high in sorted(intervals):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(merged[-1][1], high))
        else:
            merged.append((low, high))
    return merged


def format_mysql_set(sets: dict[str, Intervals]) -> str:
    """The canonical text MySQL prints (sources in order, ``N`` for a one-transaction interval)."""
    def interval(low: int, high: int) -> str:
        return str(low) if low == high else f"{low}-{high}"

    return ",".join(f"{source}:" + ":".join(interval(lo, hi) for lo, hi in _merged(sets[source]))
                    for source in sorted(sets))


def add_mysql(executed: str, gtid: str) -> str:
    """The executed set with one more transaction ``uuid:N``; unchanged when it holds it already (a replay)."""
    match = re.fullmatch(rf"({_UUID}):(\d+)", gtid.strip())
    if not match:
        raise GtidFormatError(f"not a MySQL GTID: {gtid!r} (expected uuid:N)")
    sets = parse_mysql_set(executed)
    number = int(match.group(2))
    sets.setdefault(match.group(1).lower(), []).append((number, number))
    return format_mysql_set(sets)


def add_mariadb(position: str, gtid: str) -> str:
    """A MariaDB GTID position (``d-s-n[,d-s-n]``) after transaction ``d-s-n``: that domain's entry replaced."""
    match = re.fullmatch(r"(\d+)-(\d+)-(\d+)", gtid.strip())
    if not match:
        raise GtidFormatError(f"not a MariaDB GTID: {gtid!r} (expected domain-server-sequence)")
    domains = {}
    for part in (p.strip() for p in position.split(",")):
        if part:
            if not re.fullmatch(r"\d+-\d+-\d+", part):
                raise GtidFormatError(f"not a MariaDB GTID position element: {part!r}")
            domains[int(part.split("-")[0])] = part
    domains[int(match.group(1))] = gtid.strip()
    return ",".join(domains[d] for d in sorted(domains))


def add(kind: Dialect, executed: str, gtid: str) -> str:
    return add_mysql(executed, gtid) if kind == "mysql" else add_mariadb(executed, gtid)


def snapshot_set_query(kind: Dialect) -> str:
    """The statement that gives the executed GTID set at the snapshot's binlog position (under its read lock)."""
    return "SELECT @@GLOBAL.gtid_executed" if kind == "mysql" else "SELECT @@GLOBAL.gtid_binlog_pos"
