"""Sets of array task ids, kept as sorted disjoint ranges: what an array job's tasks are per state.

Slurm writes task ids as range text (``array_task_string`` ``1-10:2,15,20-30%4``; sacct's
``array.task``, which 22.05 writes as a hex bitmap ``0x7FE`` for tasks that never started). A
:class:`TaskSet` holds them as inclusive ``(low, high)`` ranges without expanding them, so an array of
10,000 tasks costs a few ranges, and writes them back as ranges (``1-5,7,9-12``, :attr:`TaskSet.text`: the
form the portal stores per state, :attr:`jobs.models.Job.array_tasks`) or as Slurm names an array, with
steps (``1-400:3``, :attr:`TaskSet.slurm_text`).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator

#: Most ranges one task text may expand to (a stepped part such as ``1-20000:2`` is one range per
#: id): the portal follows arrays of up to this many separately listed tasks; contiguous ranges of
#: any length are one range each.
MAX_RANGES = 10_000

_PART = re.compile(r"([0-9]+)(?:-([0-9]+)(?::([0-9]+))?)?")
_HEX = re.compile(r"0[xX]([0-9a-fA-F]+)")


class TaskSet:
    """Task ids as sorted, disjoint, non-adjacent inclusive ranges ``((low, high), ...)``. Immutable;
    ``|`` and ``-`` give new sets; ``len()`` counts ids; iterating yields ids in order."""

    __slots__ = ("ranges",)

    def __init__(self, ranges: Iterable[tuple[int, int]] = ()):
        self.ranges: tuple[tuple[int, int], ...] = _normalise(ranges)

    # --- making one -------------------------------------------------------------------------------
    @classmethod
    def parse(cls, text: str) -> TaskSet:
        """Ids from range text without the ``%`` limit: ``"1-10:2,15,20-30"``, ``"7"``, ``""`` (none),
        or a 22.05 sacct hex bitmap ``"0x7FE"`` (bit N set = task N). Raises ``ValueError`` naming the
        text for anything else (an empty or reversed range, a step of 0, more than
        :data:`MAX_RANGES` ranges)."""
        text = (text or "").strip()
        if not text:
            return cls()
        hexed = _HEX.fullmatch(text)
        if hexed:
            return cls.from_ids(i for i, bit in enumerate(reversed(bin(int(hexed.group(1), 16))[2:])) if bit == "1")
        ranges: list[tuple[int, int]] = []
        for part in text.split(","):
            match = _PART.fullmatch(part.strip())
            if not match:
                raise ValueError(f"Not a Slurm array task list: {text!r} (bad part {part!r})")
            low = int(match.group(1))
            high = int(match.group(2)) if match.group(2) else low
            step = int(match.group(3)) if match.group(3) else 1
            if high < low or step == 0:
                raise ValueError(f"Not a Slurm array task list: {text!r} (empty range {part!r})")
            if step == 1:
                ranges.append((low, high))
            else:
                if (high - low) // step + 1 + len(ranges) > MAX_RANGES:
                    raise ValueError(f"Array task list {text[:60]!r} lists more than {MAX_RANGES} separate tasks")
                ranges.extend((i, i) for i in range(low, high + 1, step))
            if len(ranges) > MAX_RANGES:
                raise ValueError(f"Array task list {text[:60]!r} lists more than {MAX_RANGES} separate tasks")
        return cls(ranges)

    @classmethod
    def from_ids(cls, ids: Iterable[int]) -> TaskSet:
        """The set of the given ids (any order, repeats allowed)."""
        ranges: list[tuple[int, int]] = []
        for i in sorted(set(ids)):
            if ranges and ranges[-1][1] + 1 == i:
                ranges[-1] = (ranges[-1][0], i)
            else:
                ranges.append((i, i))
        return cls(ranges)

    # --- reading it -------------------------------------------------------------------------------
    @property
    def text(self) -> str:
        """Range text without steps: ``1-5,7,9-12`` (``""`` when empty), as ``Job.array_tasks`` stores
        each state's ids; :attr:`slurm_text` writes runs of equally spaced ids as Slurm does."""
        return ",".join(str(lo) if lo == hi else f"{lo}-{hi}" for lo, hi in self.ranges)

    @property
    def slurm_text(self) -> str:
        """The ids as Slurm writes an array (``squeue``'s ``1-400:3``): :meth:`slurm_parts` joined by
        commas (``""`` when empty). :meth:`parse` reads it back to the same set."""
        return ",".join(self.slurm_parts())

    def slurm_parts(self) -> list[str]:
        """The ids as Slurm's parts, in order: consecutive ids ``lo-hi``, a run of three or more single
        ids equally spaced (by 2 or more) ``lo-hi:step``, any other id alone (``1-5``, ``7-15:4``, ``18``)."""
        parts: list[str] = []
        ranges, i = self.ranges, 0
        while i < len(ranges):
            lo, hi = ranges[i]
            end = i
            if lo == hi and i + 2 < len(ranges):
                step = ranges[i + 1][0] - lo
                while end + 1 < len(ranges) and ranges[end + 1][0] == ranges[end + 1][1] == ranges[end][1] + step:
                    end += 1
            if end - i >= 2:
                parts.append(f"{lo}-{ranges[end][1]}:{ranges[i + 1][0] - lo}")
                i = end + 1
                continue
            parts.append(str(lo) if lo == hi else f"{lo}-{hi}")
            i += 1
        return parts

    def __len__(self) -> int:
        return sum(hi - lo + 1 for lo, hi in self.ranges)

    def __bool__(self) -> bool:
        return bool(self.ranges)

    def __iter__(self) -> Iterator[int]:
        for lo, hi in self.ranges:
            yield from range(lo, hi + 1)

    def __contains__(self, task: object) -> bool:
        return isinstance(task, int) and any(lo <= task <= hi for lo, hi in self.ranges)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, TaskSet) and self.ranges == other.ranges

    def __hash__(self) -> int:
        return hash(self.ranges)

    def __repr__(self) -> str:
        return f"TaskSet({self.text!r})"

    # --- combining --------------------------------------------------------------------------------
    def __or__(self, other: TaskSet) -> TaskSet:
        return TaskSet(self.ranges + other.ranges)

    def __sub__(self, other: TaskSet) -> TaskSet:
        result: list[tuple[int, int]] = []
        cuts = list(other.ranges)
        for lo, hi in self.ranges:
            start = lo
            for clo, chi in cuts:
                if chi < start or clo > hi:
                    continue
                if clo > start:
                    result.append((start, clo - 1))
                start = max(start, chi + 1)
                if start > hi:
                    break
            if start <= hi:
                result.append((start, hi))
        return TaskSet(result)

    def first(self) -> int | None:
        """The lowest id, ``None`` when empty."""
        return self.ranges[0][0] if self.ranges else None

    def last(self) -> int | None:
        """The highest id, ``None`` when empty."""
        return self.ranges[-1][1] if self.ranges else None


def _normalise(ranges: Iterable[tuple[int, int]]) -> tuple[tuple[int, int], ...]:
    """Sorted, with overlapping or adjacent ranges merged."""
    merged: list[list[int]] = []
    for lo, hi in sorted((int(lo), int(hi)) for lo, hi in ranges):
        if merged and lo <= merged[-1][1] + 1:
            merged[-1][1] = max(merged[-1][1], hi)
        else:
            merged.append([lo, hi])
    return tuple((lo, hi) for lo, hi in merged)
