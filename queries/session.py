"""A SQL session the way a Trino CLI user keeps one: a current schema, one statement at a time.

``USE``, ``SHOW CATALOGS / SCHEMAS / TABLES``, ``DESCRIBE`` and ``SHOW CREATE TABLE`` are
answered here from the Iceberg catalog, in Trino's words, so they mean the same on every
engine (DuckDB and Spark have their own, different ones); every other statement goes to
the engine with the session's schema. On Trino the engine answers them itself.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import pyarrow as pa
import sqlglot
from sqlglot.errors import TokenError
from sqlglot.tokens import TokenType

from queries.describe import describe, show_create_table
from queries.errors import EngineGap, Outcome
from queries.names import Catalogue

_NAME = r'((?:"[^"]+"|[\w$]+)(?:\s*\.\s*(?:"[^"]+"|[\w$]+)){0,2})'
_LIKE = r"(?:\s+LIKE\s+'((?:[^']|'')*)')?"
_COMMANDS: list[tuple[str, re.Pattern]] = [
    ("use_catalog", re.compile(r"USE\s+CATALOG\s+(\w+)", re.I)),
    ("use", re.compile(r"USE\s+(?:(\w+)\s*\.\s*)?(\w+)", re.I)),
    ("show_catalogs", re.compile(r"SHOW\s+CATALOGS" + _LIKE, re.I)),
    ("show_schemas", re.compile(r"SHOW\s+SCHEMAS(?:\s+(?:FROM|IN)\s+(\w+))?" + _LIKE, re.I)),
    ("show_tables", re.compile(r"SHOW\s+TABLES(?:\s+(?:FROM|IN)\s+" + _NAME + ")?" + _LIKE, re.I)),
    ("describe", re.compile(r"(?:DESCRIBE|DESC|SHOW\s+COLUMNS\s+(?:FROM|IN))\s+" + _NAME, re.I)),
    ("show_create", re.compile(r"SHOW\s+CREATE\s+TABLE\s+" + _NAME, re.I)),
]


class StatementError(EngineGap):
    """A statement that cannot run as written; the message says where and why."""


def split_statements(text: str) -> list[str]:
    """The statements in ``text``, split at each ``;`` outside strings, quotes and comments."""
    try:
        tokens = sqlglot.Dialect.get_or_raise("trino").tokenize(text)
    except TokenError as exc:
        raise StatementError(f"cannot split into statements: {exc}") from None
    statements, start = [], 0
    for token in tokens:
        if token.token_type == TokenType.SEMICOLON:
            statements.append(text[start:token.start].strip())
            start = token.end + 1
    statements.append(text[start:].strip())
    return [s for s in statements if _without_comments(s)]


def is_complete(text: str) -> bool:
    """True once ``text`` ends with a ``;`` that is not inside a string or comment (the shell's Enter)."""
    try:
        tokens = sqlglot.Dialect.get_or_raise("trino").tokenize(text)
    except TokenError:
        return False  # an open quote
    return bool(tokens) and tokens[-1].token_type == TokenType.SEMICOLON


def _without_comments(statement: str) -> str:
    return re.sub(r"--[^\n]*|/\*.*?\*/", "", statement, flags=re.S).strip()


def _like(pattern: str | None) -> Callable[[str], bool]:
    if pattern is None:
        return lambda _: True
    regex = "".join(".*" if c == "%" else "." if c == "_" else re.escape(c) for c in pattern.replace("''", "'"))
    compiled = re.compile(regex + r"\Z", re.S)
    return lambda name: compiled.match(name) is not None


def _parts(name: str) -> list[str]:
    return [p.strip().strip('"') for p in re.split(r'\.(?=(?:[^"]*"[^"]*")*[^"]*$)', name)]


class SqlSession:
    """Statements against one engine, with the session's schema (``USE``) kept between them.

    ``catalogue`` is None on Trino, which answers for its own catalog (the cluster's
    metastore is not reachable from a laptop; Trino is, through `make trino`).
    """

    def __init__(self, engine, catalogue: Catalogue | None, catalog_names: tuple[str, ...],
                 schema: str | None = None):
        self.engine, self.catalogue = engine, catalogue
        self.catalog_names = tuple(n.lower() for n in catalog_names)  # the first is the one shown
        self.schema = schema

    @property
    def engine_name(self) -> str:
        return self.engine.name

    def execute(self, statement: str) -> Outcome:
        began = time.monotonic()
        table, message = self._answer(statement.strip().rstrip(";").strip())
        seconds = time.monotonic() - began
        return Outcome(statement, table, message, seconds, self.schema)

    def _answer(self, statement: str) -> tuple[pa.Table | None, str]:
        for kind, pattern in _COMMANDS:
            match = pattern.fullmatch(statement)
            if match and (kind.startswith("use") or self.catalogue is not None):
                return getattr(self, "_" + kind)(*match.groups())
        table = self.engine.run(statement, schema=self.schema)
        return table, f"{table.num_rows:,} row{'s' if table.num_rows != 1 else ''}"

    def _schemas(self) -> list[str]:
        if self.catalogue is not None:
            return self.catalogue.schemas()
        shown = self.engine.run(f"SHOW SCHEMAS FROM {self.catalog_names[0]}")
        return sorted(str(v).lower() for v in shown.column(0).to_pylist())

    def _use_catalog(self, catalog: str) -> tuple[None, str]:
        self._check_catalog(catalog)
        return None, f"USE CATALOG {catalog}"

    def _use(self, catalog: str | None, schema: str) -> tuple[None, str]:
        if catalog:
            self._check_catalog(catalog)
        schemas = self._schemas()
        if schema.lower() not in schemas:
            raise StatementError(f"schema {schema!r} does not exist; schemas: {', '.join(schemas)}")
        self.schema = schema.lower()
        return None, f"USE {self.schema}"

    def _check_catalog(self, catalog: str) -> None:
        if catalog.lower() not in self.catalog_names:
            raise StatementError(f"unknown catalog {catalog!r}; this lakehouse's catalog is {self.catalog_names[0]!r}")

    def _loaded(self, name: str):
        assert self.catalogue is not None  # only asked when the session answers from the catalog
        return self.catalogue.load(self.catalogue.name(_parts(name), self.schema))

    def _show_catalogs(self, like: str | None) -> tuple[pa.Table, str]:
        names = [n for n in self.catalog_names[:1] if _like(like)(n)]
        return pa.table({"Catalog": names}), f"{len(names)} row(s)"

    def _show_schemas(self, catalog: str | None, like: str | None) -> tuple[pa.Table, str]:
        if catalog:
            self._check_catalog(catalog)
        names = [s for s in self._schemas() if _like(like)(s)]
        return pa.table({"Schema": names}), f"{len(names)} row(s)"

    def _show_tables(self, where: str | None, like: str | None) -> tuple[pa.Table, str]:
        parts = _parts(where) if where else []
        if len(parts) == 2:
            self._check_catalog(parts[0])
        schema = parts[-1].lower() if parts else self.schema
        if schema is None:
            raise StatementError("no schema chosen: `SHOW TABLES FROM schema`, or `USE schema` first; schemas: "
                                 + ", ".join(self._schemas()))
        assert self.catalogue is not None
        names = [t for t in self.catalogue.tables(schema) if _like(like)(t)]
        return pa.table({"Table": names}), f"{len(names)} row(s)"

    def _describe(self, name: str) -> tuple[pa.Table, str]:
        result = describe(self._loaded(name))
        return result, f"{result.num_rows} row(s)"

    def _show_create(self, name: str) -> tuple[pa.Table, str]:
        return show_create_table(self._loaded(name), self.catalog_names[0]), "1 row"
