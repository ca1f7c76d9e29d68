"""An offset range of one partition: the unit of work of a micro-batch."""

from __future__ import annotations

from dataclasses import dataclass

#: next offset to read, per topic and partition (what a table's snapshot records, and a plan starts from)
Offsets = dict[str, dict[int, int]]


@dataclass(frozen=True)
class OffsetRange:
    topic: str
    partition: int
    start: int  # first offset to read
    end: int  # one past the last offset to read

    @property
    def size(self) -> int:
        return max(0, self.end - self.start)


def next_offsets(ranges: list[OffsetRange]) -> Offsets:
    """The offsets to resume from after these ranges are committed."""
    out: Offsets = {}
    for r in ranges:
        out.setdefault(r.topic, {})[r.partition] = r.end
    return out


def balance(ranges: list[OffsetRange], tasks: int, min_task_records: int = 5000) -> list[list[OffsetRange]]:
    """Cut the ranges into at most ``tasks`` groups of near-equal record counts, in offset order.

    A batch's partitions are seldom as many as the cores, nor equally full: three ranges on
    two cores run in two waves, the third alone. Offsets can be cut anywhere, so each group
    gets its share of records (a range may be split between two groups), and no group is
    made smaller than ``min_task_records`` (a task costs more than reading a few records).
    """
    work = [r for r in ranges if r.size > 0]
    total = sum(r.size for r in work)
    if not work:
        return []
    count = max(1, min(tasks, -(-total // min_task_records)))
    quota = -(-total // count)
    groups: list[list[OffsetRange]] = [[]]
    room = quota
    for r in work:
        start = r.start
        while start < r.end:
            if room == 0:
                groups.append([])
                room = quota
            take = min(room, r.end - start)
            groups[-1].append(OffsetRange(r.topic, r.partition, start, start + take))
            start += take
            room -= take
    return groups


def pieces(ranges: list[OffsetRange], most: int) -> list[list[OffsetRange]]:
    """The ranges read in turns of at most ``most`` records: turn i holds the i-th slice of every range, so each
    turn starts where the one before ended, on every partition (a kept consumer just goes on)."""
    total = sum(r.size for r in ranges)
    turns = max(1, -(-total // most))
    if turns == 1:
        return [list(ranges)]
    return [[OffsetRange(r.topic, r.partition, r.start + r.size * i // turns, r.start + r.size * (i + 1) // turns)
             for r in ranges] for i in range(turns)]
