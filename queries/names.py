"""Table names as Trino users write them, resolved against the Iceberg catalog.

A query may name a table ``schema.table``, ``<catalog>.schema.table`` (the Trino catalog name
from settings, or Spark's), or just ``table`` once a schema is chosen (``USE schema``), and
an Iceberg metadata table the Trino way: ``schema."table$snapshots"`` (``$files``,
``$history``, ``$partitions``). Nothing here knows the project's tables: a table anyone
creates, in any schema, is found in the catalog the moment it exists. Engines then name the
resolved table their own way (DuckDB a view, Spark ``catalog.schema.table.files``, Trino as
written).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from lakehouse.catalog import pyiceberg_catalog
from queries.errors import EngineGap
from queries.metastore import Metastore

if TYPE_CHECKING:
    from sqlglot import exp

#: Trino's metadata tables (``table$kind``) the engines answer
METADATA_KINDS = ("snapshots", "files", "history", "partitions")


class UnknownTable(EngineGap):
    """A name that is not a table in the catalog; the message lists what exists."""


@dataclass(frozen=True)
class TableName:
    namespace: str
    table: str
    kind: str = ""  # '' for the table's rows, else one of METADATA_KINDS

    @property
    def identifier(self) -> str:
        """``namespace.table``, as the catalog (and the settings) name it."""
        return f"{self.namespace}.{self.table}"

    def trino(self, catalog: str) -> str:
        return f'{catalog}.{self.namespace}."{self.table}{"$" + self.kind if self.kind else ""}"'

    def spark(self, catalog: str) -> str:
        return f"{catalog}.{self.identifier}" + (f".{self.kind}" if self.kind else "")


class Catalogue:
    """What the Iceberg catalog holds, looked up when a name needs it (never a fixed list).

    Names and metadata locations come from the metastore (``queries.metastore``: fast);
    PyIceberg's table, only when asked for (``load``). ``catalog_names`` are the names a
    query may put in front of ``schema.table``; the first is the one shown.
    """

    def __init__(self, metastore, catalog_names: tuple[str, ...], pyiceberg_catalog=None):
        self.metastore, self.catalog_names = metastore, tuple(n.lower() for n in catalog_names)
        self._pyiceberg = pyiceberg_catalog  # a callable giving the PyIceberg catalog, called once

    @classmethod
    def of(cls, settings) -> Catalogue:
        return cls(Metastore(settings.metastore.host, settings.metastore.port),
                   (settings.catalog.trino_catalog, settings.catalog.name), lambda: pyiceberg_catalog(settings))

    def schemas(self) -> list[str]:
        return self.metastore.schemas()

    def tables(self, schema: str) -> list[str]:
        schemas = self.schemas()
        if schema not in schemas:
            raise UnknownTable(f"schema {schema!r} does not exist; schemas: {', '.join(schemas)}")
        return self.metastore.tables(schema)

    def location(self, name: TableName) -> str:
        """The table's current metadata file; an unknown name raises UnknownTable listing what exists."""
        found = self.metastore.metadata_location(name.namespace, name.table)
        if found is None:
            raise self._unknown(name)
        return found

    def load(self, name: TableName):
        """The PyIceberg table (its schema, snapshots, metadata tables); an unknown name as in ``location``."""
        # deferred: pyiceberg loads pyarrow: only when a table is loaded
        from pyiceberg.exceptions import NoSuchNamespaceError, NoSuchTableError

        if callable(self._pyiceberg):
            self._pyiceberg = self._pyiceberg()
        try:
            return self._pyiceberg.load_table(name.identifier)
        except (NoSuchTableError, NoSuchNamespaceError):
            raise self._unknown(name) from None

    def _unknown(self, name: TableName) -> UnknownTable:
        schemas = self.schemas()
        if name.namespace not in schemas:
            return UnknownTable(f"table {name.identifier} does not exist: there is no schema {name.namespace!r}; "
                                f"schemas: {', '.join(schemas)}")
        return UnknownTable(f"table {name.identifier} does not exist; tables in {name.namespace}: "
                            f"{', '.join(self.metastore.tables(name.namespace)) or '(none)'}")

    def name(self, parts: list[str], schema: str | None) -> TableName:
        """``[catalog.][schema.]table[$kind]`` (as parsed) -> a TableName, checking the catalog and kind."""
        parts = [p.lower() for p in parts]
        if len(parts) > 3:
            raise UnknownTable(f"{'.'.join(parts)}: a table name has at most three parts (catalog.schema.table)")
        if len(parts) == 3:
            if parts[0] not in self.catalog_names:
                raise UnknownTable(f"unknown catalog {parts[0]!r}; this lakehouse's catalog is "
                                   f"{self.catalog_names[0]!r}")
            parts = parts[1:]
        if len(parts) == 1:
            if schema is None:
                raise UnknownTable(f"no schema chosen for table {parts[0]!r}: write schema.table, or `USE schema` "
                                   f"first; schemas: {', '.join(self.schemas())}")
            parts = [schema, parts[0]]
        table, _, kind = parts[1].partition("$")
        if kind and kind not in METADATA_KINDS:
            raise UnknownTable(f"unknown metadata table {parts[1]!r}; known: "
                               + ", ".join(f"{table}${k}" for k in METADATA_KINDS))
        return TableName(parts[0], table, kind)


def table_nodes(tree: exp.Expression) -> list[exp.Table]:
    """The nodes of ``tree`` that name catalog tables (not a CTE's name, not a table function)."""
    # deferred: sqlglot's expression tree (its import is ~0.2 s): only when a statement is resolved
    from sqlglot import exp

    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    return [node for node in tree.find_all(exp.Table)
            if isinstance(node.this, exp.Identifier) and not (not node.db and node.name.lower() in ctes)]


def resolve(tree: exp.Expression, catalogue: Catalogue, schema: str | None) -> list[tuple[exp.Table, TableName]]:
    """Each catalog table ``tree`` reads, with its resolved name (the tables are not loaded here)."""
    return [(node, catalogue.name([p.name for p in node.parts], schema)) for node in table_nodes(tree)]
