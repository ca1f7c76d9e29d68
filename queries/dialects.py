"""Trino SQL to other dialects (sqlglot), with the rewrites every engine needs.

``now`` pins ``current_timestamp`` to a fixed instant, so that two engines (or two runs)
asked a time-relative question give comparable answers.
"""

from __future__ import annotations

import datetime as dt

import sqlglot
from sqlglot import exp
from sqlglot.errors import ErrorLevel

from queries.errors import EngineGap

__all__ = ["EngineGap", "SyntaxProblem", "parse", "pin_now", "to_sql"]


class SyntaxProblem(EngineGap):
    """Not valid Trino SQL; the message shows the line with a caret under the position."""


def parse(sql: str) -> exp.Expression:
    try:
        return sqlglot.parse_one(sql, read="trino")
    except sqlglot.errors.ParseError as exc:
        raise _located(sql, exc) from None
    except sqlglot.errors.TokenError as exc:
        raise SyntaxProblem(f"not valid Trino SQL: {exc}") from None


def _located(sql: str, exc: sqlglot.errors.ParseError) -> SyntaxProblem:
    first = exc.errors[0] if exc.errors else {}
    line, col = first.get("line"), first.get("col")
    lines = sql.splitlines()
    if not line or not col or line > len(lines):
        return SyntaxProblem(f"not valid Trino SQL: {exc}")
    caret = " " * max(0, col - len(first.get("highlight") or " ")) + "^"
    return SyntaxProblem(f"not valid Trino SQL at line {line}, column {col}: "
                         f"{first.get('description', 'syntax error')}\n  {lines[line - 1]}\n  {caret}")


def pin_now(tree: exp.Expression, now: dt.datetime | None) -> exp.Expression:
    if now is None:
        return tree
    literal = now.astimezone(dt.timezone.utc).replace(tzinfo=None).isoformat(sep=" ")

    def swap(node):
        if isinstance(node, (exp.CurrentTimestamp, exp.CurrentDatetime)):
            return exp.cast(exp.Literal.string(literal), exp.DataType.build("timestamp"))
        return node

    return tree.transform(swap)


def to_sql(tree: exp.Expression, dialect: str) -> str:
    """Generate ``dialect`` SQL; constructs it cannot express raise an EngineGap."""
    try:
        return tree.sql(dialect=dialect, unsupported_level=ErrorLevel.RAISE)
    except sqlglot.errors.UnsupportedError as exc:
        raise EngineGap(f"{dialect} cannot express this query: {exc}") from None
