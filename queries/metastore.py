"""Read-only lookups in the Hive Metastore over its thrift API, without PyIceberg.

To read a table's rows, a query needs one fact from the catalog: where the table's current
metadata file is (DuckDB reads the rest itself). Importing PyIceberg's Hive catalog (its
whole table model) costs a large share of a one-shot query's budget, and ``load_table``
parses the metadata file in Python (docs/sql.md). So names, schemas and metadata
locations are asked of the metastore directly, with the same thrift client PyIceberg uses;
PyIceberg is loaded only where its table model is needed (metadata tables, time travel,
DESCRIBE).
"""

from __future__ import annotations

from hive_metastore.ThriftHiveMetastore import Client
from hive_metastore.ttypes import NoSuchObjectException
from thrift.protocol.TBinaryProtocol import TBinaryProtocol
from thrift.Thrift import TException
from thrift.transport.TSocket import TSocket
from thrift.transport.TTransport import TBufferedTransport, TTransportException

from queries.errors import EngineGap


class MetastoreDown(EngineGap):
    """The metastore does not answer; the message says how to start it."""


class Metastore:
    """One thrift connection to the metastore, opened on first use and reopened after a failure."""

    def __init__(self, host: str, port: int):
        self.host, self.port = host, port
        self._transport = None
        self._client = None

    def _call(self, method: str, *args):
        for attempt in range(2):
            try:
                return getattr(self._connected(), method)(*args)
            except TTransportException as exc:
                self.close()
                if attempt:
                    raise MetastoreDown(f"the metastore at {self.host}:{self.port} does not answer ({exc}); start the "
                                        "local stack with `lakehouse stack up`") from None
            except TException:
                raise
        raise AssertionError("unreachable")

    def _connected(self):
        if self._client is None:

            self._transport = TBufferedTransport(TSocket(self.host, self.port))
            self._transport.open()
            self._client = Client(TBinaryProtocol(self._transport))
        return self._client

    def close(self) -> None:
        if self._transport is not None:
            try:
                self._transport.close()
            except Exception:  # noqa: BLE001 - closing a broken connection
                pass
        self._transport = self._client = None

    def schemas(self) -> list[str]:
        return sorted(self._call("get_all_databases"))

    def tables(self, schema: str) -> list[str]:
        """The Iceberg tables of ``schema`` (a Hive table of another kind is not one the engines read)."""
        names = self._call("get_all_tables", schema)
        if not names:
            return []
        tables = self._call("get_table_objects_by_name", schema, names)
        return sorted(t.tableName for t in tables if (t.parameters or {}).get("table_type", "").upper() == "ICEBERG")

    def metadata_location(self, schema: str, table: str) -> str | None:
        """The table's current metadata file; None if there is no such Iceberg table."""
        try:
            found = self._call("get_table", schema, table)
        except NoSuchObjectException:
            return None
        parameters = found.parameters or {}
        if parameters.get("table_type", "").upper() != "ICEBERG":
            return None
        return parameters.get("metadata_location")
