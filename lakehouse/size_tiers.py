"""Size tiers, the one compaction rule of the lake: files are merged a tier at a time, once enough gathered.

Both compactions use it: maintenance's Spark rewrites of the appended tables (file sizes in bytes,
``MaintenanceSettings.tier_bounds``) and the dimension writer's folds (file sizes in rows,
``pipeline.lake_writer.fold``). A tier spans ``[bound k-1, bound k)``; each bound is the one below
times ``ratio``, so a merge of at least ``ratio`` files from one tier writes a file above it and a
byte is rewritten once per tier it passes through, instead of at every merge until it is large.
Files from the last bound up are final.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TypeVar

F = TypeVar("F")


def tier_bounds(lowest: int, final: int, ratio: float) -> tuple[int, ...]:
    """Upper bound of each tier: ``lowest`` (tier 0 is below it), then each bound ``ratio`` times the one below,
    up to ``final``."""
    if ratio <= 1:
        raise ValueError(f"a tier ratio must be above 1, not {ratio}")
    bounds = [max(1, min(lowest, final))]
    while bounds[-1] < final:
        bounds.append(min(max(int(bounds[-1] * ratio), bounds[-1] + 1), final))
    return tuple(bounds)


def tier_of(size: int, bounds: Sequence[int]) -> int | None:
    """The tier a file of ``size`` is in; None for a final file (from the last bound up)."""
    for tier, bound in enumerate(bounds):
        if size < bound:
            return tier
    return None


def full_tiers(files: Sequence[F], size: Callable[[F], int], bounds: Sequence[int], fan_in: int) -> list[list[F]]:
    """The tiers holding ``fan_in`` files or more, lowest first: what a merge takes."""
    tiers: dict[int, list[F]] = {}
    for file in files:
        tier = tier_of(size(file), bounds)
        if tier is not None:
            tiers.setdefault(tier, []).append(file)
    return [tiers[t] for t in sorted(tiers) if len(tiers[t]) >= fan_in]
