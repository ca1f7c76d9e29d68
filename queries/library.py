"""The questions in ``queries/sql``: Trino SQL with table placeholders, one description line each.

A query names tables by role, never by their configured names: ``{clicks}`` is the click
table, ``{clicks:snapshots}`` / ``{clicks:files}`` its Iceberg metadata tables. Each engine
renders the placeholders its own way (Trino ``catalog.ns."t$files"``, Spark
``catalog.ns.t.files``, DuckDB a view it registers), from settings.
"""

from __future__ import annotations

import string
from dataclasses import dataclass
from pathlib import Path

from lakehouse.settings import Settings

SQL_DIR = Path(__file__).parent / "sql"
METADATA_KINDS = ("", "snapshots", "files")


@dataclass(frozen=True)
class Query:
    name: str
    description: str
    template: str


@dataclass(frozen=True)
class TableRef:
    """One placeholder occurrence: which table, and which of its metadata tables ('' = the data)."""

    role: str
    table: str  # namespace.table from settings
    kind: str


def table_roles(settings: Settings) -> dict[str, str]:
    """Placeholder name -> configured ``namespace.table``."""
    cat = settings.catalog
    return {
        "clicks": cat.clicks_table, "dead_letter": cat.dead_letter_table,
        "products": cat.products_table, "members": cat.members_table,
        "product_views": cat.product_views_table, "member_activity": cat.member_activity_table,
        "daily_users": cat.daily_users_table,
    }


def load(name: str) -> Query:
    path = SQL_DIR / f"{name}.sql"
    if not path.exists():
        raise KeyError(f"no query {name!r}; available: {', '.join(q.name for q in all_queries())}")
    text = path.read_text()
    first, _, rest = text.partition("\n")
    if not first.startswith("--"):
        raise ValueError(f"{path}: the first line must be a '-- description' comment")
    return Query(name, first.removeprefix("--").strip(), rest.strip())


def all_queries() -> list[Query]:
    return [load(p.stem) for p in sorted(SQL_DIR.glob("*.sql"))]


class _Renderer(string.Formatter):
    def __init__(self, settings: Settings, name_for):
        self.roles, self.name_for = table_roles(settings), name_for
        self.refs: list[TableRef] = []

    def get_value(self, key, args, kwargs):
        if key not in self.roles:
            raise KeyError(f"unknown table placeholder {{{key}}}; known: {', '.join(self.roles)}")
        return key

    def format_field(self, role, kind):
        if kind not in METADATA_KINDS:
            raise ValueError(f"unknown metadata table {{{role}:{kind}}}; known: snapshots, files")
        ref = TableRef(role, self.roles[role], kind)
        self.refs.append(ref)
        return self.name_for(ref)


def render(sql: str, settings: Settings, name_for) -> tuple[str, list[TableRef]]:
    """Replace placeholders with ``name_for(ref)``; return the SQL and the tables it reads."""
    renderer = _Renderer(settings, name_for)
    return renderer.format(sql), renderer.refs


def trino_name(settings: Settings, ref: TableRef) -> str:
    namespace, table = ref.table.split(".")
    suffix = f"${ref.kind}" if ref.kind else ""
    return f'{settings.catalog.name}.{namespace}."{table}{suffix}"'


def spark_name(settings: Settings, ref: TableRef) -> str:
    return f"{settings.catalog.name}.{ref.table}" + (f".{ref.kind}" if ref.kind else "")
