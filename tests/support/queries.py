"""Comparing engines' answers in tests: values in one canonical form."""

from __future__ import annotations

import datetime as dt
import decimal


def normalise(value):
    if isinstance(value, decimal.Decimal | float):
        return round(float(value), 4)
    if isinstance(value, dt.datetime):
        return (value.astimezone(dt.timezone.utc).replace(tzinfo=None) if value.tzinfo else value).isoformat()
    if isinstance(value, dt.date):
        return value.isoformat()
    return value


def rows(table) -> list[tuple]:
    return [tuple(normalise(v) for v in row.values()) for row in table.to_pylist()]

