"""The questions in ``queries/sql``: Trino SQL with table placeholders, one description line each.

The library's queries name tables by role, never by their configured names: ``{clicks}`` is
the click table, ``{clicks:snapshots}`` / ``{clicks:files}`` its Iceberg metadata tables, so
they follow the settings. :func:`render` turns them into the Trino names a person would
write, and from there every engine resolves names one way (``queries.names``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from lakehouse.settings import Settings
from queries.names import METADATA_KINDS, TableName

SQL_DIR = Path(__file__).parent / "sql"


@dataclass(frozen=True)
class Query:
    name: str
    description: str
    template: str


def table_roles(settings: Settings) -> dict[str, str]:
    """Placeholder name -> configured ``namespace.table``: every table of the registry, by role."""
    return {t.role: t.table for t in settings.tables}


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


#: ``{role}`` or ``{role:kind}``; other braces (a JSON literal, a regex) are left alone
PLACEHOLDER = re.compile(r"\{(\w+)(?::(\w*))?\}")


def render(sql: str, settings: Settings) -> str:
    """Replace the ``{role}`` / ``{role:kind}`` placeholders with the tables' Trino names.

    What comes out is plain Trino SQL: every engine resolves its table names the same way
    (``queries.names``), whether a placeholder or a person wrote them.
    """
    roles, catalog = table_roles(settings), settings.catalog.trino_catalog

    def name(match: re.Match) -> str:
        role, kind = match.group(1), match.group(2) or ""
        if role not in roles:
            raise KeyError(f"unknown table placeholder {{{role}}}; known: {', '.join(roles)}")
        if kind not in ("", *METADATA_KINDS):
            raise ValueError(f"unknown metadata table {{{role}:{kind}}}; known: {', '.join(METADATA_KINDS)}")
        namespace, table = roles[role].split(".")
        return TableName(namespace, table, kind).trino(catalog)

    return PLACEHOLDER.sub(name, sql)
