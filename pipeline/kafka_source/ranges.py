"""An offset range of one partition: the unit of work of a micro-batch."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int  # first offset to read
    end: int  # one past the last offset to read

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def next_offsets(ranges: list[OffsetRange]) -> dict[str, dict[int, int]]:
    """The offsets to resume from after these ranges are committed."""
    out: dict[str, dict[int, int]] = {}
    for r in ranges:
        out.setdefault(r.topic, {})[r.partition] = r.end
    return out
