"""The source dialects' GTID forms: MySQL 8.4's sets (the cluster) and MariaDB's positions (the local stack).

No MySQL server is in the registries here, so what is MySQL-specific is kept to these pure
functions and tested on the text the servers print; python-mysql-replication's own GtidSet
reads what they write, as the replication protocol would.
"""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pymysqlreplication.gtid import GtidSet

from pipeline.capture import gtid

A = "3e11fa47-71ca-11e1-9e33-c80aa9429562"
B = "8d5b9e0a-1b2c-11ef-9a0b-0242ac120002"


def test_the_dialect_comes_from_the_version_string():
    assert gtid.dialect("10.11.6-MariaDB-log") == gtid.dialect("5.5.5-10.11.6-MariaDB") == "mariadb"
    assert gtid.dialect("8.4.3") == "mysql"


def test_a_mysql_set_as_the_server_prints_it():
    printed = f"{A.upper()}:1-5:7-9,\n{B}:1-3"
    sets = gtid.parse_mysql_set(printed)
    assert sets == {A: [(1, 5), (7, 9)], B: [(1, 3)]}
    assert gtid.format_mysql_set(sets) == f"{A}:1-5:7-9,{B}:1-3"
    assert gtid.parse_mysql_set("") == {}


def test_adding_fills_gaps_merges_and_ignores_a_replay():
    assert gtid.add_mysql(f"{A}:1-5:7-9", f"{A}:6") == f"{A}:1-9"
    assert gtid.add_mysql(f"{A}:1-9", f"{A}:10") == f"{A}:1-10"
    assert gtid.add_mysql(f"{A}:1-10", f"{A}:4") == f"{A}:1-10", "a transaction replayed after a reconnect"
    assert gtid.add_mysql("", f"{B}:1") == f"{B}:1"
    assert gtid.add_mysql(f"{B}:1-3", f"{A}:1") == f"{A}:1,{B}:1-3"


def test_tagged_or_malformed_gtids_are_named():
    with pytest.raises(gtid.GtidFormatError, match="tagged GTIDs"):
        gtid.parse_mysql_set(f"{A}:mytag:1-3")
    with pytest.raises(gtid.GtidFormatError, match="expected uuid:N"):
        gtid.add_mysql(f"{A}:1-3", "0-1-5")
    with pytest.raises(gtid.GtidFormatError, match="expected domain-server-sequence"):
        gtid.add_mariadb("0-1-5", f"{A}:1")


def test_a_mariadb_position_keeps_one_entry_per_domain():
    assert gtid.add_mariadb("0-1-41", "0-1-42") == "0-1-42"
    assert gtid.add_mariadb("0-1-42,1-7-3", "1-7-4") == "0-1-42,1-7-4"
    assert gtid.add_mariadb("", "0-1-1") == "0-1-1"
    assert gtid.add("mariadb", "0-1-1", "0-1-2") == "0-1-2" and gtid.add("mysql", "", f"{A}:1") == f"{A}:1"


@given(st.lists(st.integers(min_value=1, max_value=200), min_size=1, max_size=60))
def test_the_set_the_library_reads_holds_exactly_the_transactions_added(numbers):
    executed = ""
    for n in numbers:
        executed = gtid.add_mysql(executed, f"{A}:{n}")
    library = GtidSet(executed)
    expected = sorted(set(numbers))
    assert [g for g in str(library).split(",") if g] == [executed]
    held = {n for lo, hi in gtid.parse_mysql_set(executed)[A] for n in range(lo, hi + 1)}
    assert sorted(held) == expected


def test_a_checkpoint_falls_only_where_a_transaction_ended():
    from pipeline.capture.connector import ends_transaction

    for inside in ("BEGIN", "SAVEPOINT SP1", "ROLLBACK TO SAVEPOINT SP1", "RELEASE SAVEPOINT SP1", "XA START 'X'",
                   "XA END 'X'", "XA PREPARE 'X'"):
        assert not ends_transaction(inside), inside
    for end in ("COMMIT", "XA COMMIT 'X'", "ROLLBACK", "ALTER TABLE PRODUCTS ADD COLUMN COLOR VARCHAR(8)"):
        assert ends_transaction(end), end


def test_only_a_position_the_source_no_longer_has_stops_the_capture():
    import pymysql

    from pipeline.capture.connector import position_lost

    purged = pymysql.err.OperationalError(1236, "Could not find first log file name in binary log index file")
    twin = pymysql.err.OperationalError(1236, "A slave with the same server_uuid/server_id as this slave has "
                                              "connected to the master")
    assert position_lost(purged)
    assert not position_lost(twin), "another replica with our server_id passes: the capture retries"
    assert not position_lost(pymysql.err.OperationalError(2013, "Lost connection to MySQL server"))
