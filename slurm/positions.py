"""The stored queue positions, packed so that a page reads only the rows it shows.

A 100,000-job queue has some 33,000 pending jobs. Stored as a pickled ``{job id: (position, in
line)}`` dict, every page that shows a position (My jobs, the job page, the API, Sessions) unpickled
all of them to look up a handful: 5-10 ms CPU per read (bench/snapshot_size.py). Stored instead as
three arrays of 64-bit integers (job ids sorted, positions, pending jobs in the partition) in one
bytes value, a read copies the bytes into one ``array`` (a memcpy) and each look-up is a binary
search: well under a millisecond however long the queue.

:class:`QueuePositions` is a read-only mapping with the dict's answers (``get``, ``[]``, ``in``,
``len``, iteration, ``==`` against a dict), so the callers that took the dict take it unchanged.
"""

from __future__ import annotations

import sys
from array import array
from bisect import bisect_left
from collections.abc import Iterator, Mapping

#: The array type code of the packed values: signed 64-bit (``q``), Slurm's job ids and counts.
_CODE = "q"
_WIDTH = array(_CODE).itemsize


def positions_pack(positions: Mapping[int, tuple[int, int]]) -> bytes:
    """``positions`` (job id -> (position, pending jobs in that partition), as
    :func:`slurm.queue_index.queue_positions` makes them) as the bytes :class:`QueuePositions` reads:
    the job ids in ascending order, then the positions, then the counts, each an array of
    ``len(positions)`` native-order signed 64-bit integers (the poller and the pages run on the
    same kind of machine)."""
    ids = sorted(positions)
    packed = array(_CODE, ids)
    packed.extend(positions[i][0] for i in ids)
    packed.extend(positions[i][1] for i in ids)
    return sys.byteorder[0].encode() + packed.tobytes()


class QueuePositions(Mapping):
    """The positions :func:`positions_pack` stored: job id -> ``(position, pending jobs in that
    partition)``, both 1-based counts of jobs (Slurm fields ``priority``, ``submit_time``,
    ``partition`` and ``array_task_string`` of ``squeue --json``, as
    :func:`slurm.queue_index.queue_positions` counts them). Raises ``ValueError`` for bytes that are not
    such a pack."""

    __slots__ = ("_values", "_n")

    def __init__(self, packed: bytes):
        order, body = packed[:1], packed[1:]
        if order not in (b"l", b"b") or len(body) % (3 * _WIDTH):
            raise ValueError("not packed queue positions")
        values = array(_CODE)
        values.frombytes(body)
        if order != sys.byteorder[0].encode():
            values.byteswap()
        self._values = values
        self._n = len(values) // 3

    def _index(self, job_id) -> int:
        """Where ``job_id`` is among the sorted ids, or -1."""
        if job_id.__class__ is not int:
            return -1
        i = bisect_left(self._values, job_id, 0, self._n)
        return i if i < self._n and self._values[i] == job_id else -1

    def __getitem__(self, job_id) -> tuple[int, int]:
        i = self._index(job_id)
        if i < 0:
            raise KeyError(job_id)
        return self._values[self._n + i], self._values[2 * self._n + i]

    def get(self, job_id, default=None):
        i = self._index(job_id)
        return default if i < 0 else (self._values[self._n + i], self._values[2 * self._n + i])

    def __contains__(self, job_id) -> bool:
        return self._index(job_id) >= 0

    def __len__(self) -> int:
        return self._n

    def __iter__(self) -> Iterator[int]:
        return iter(self._values[: self._n])

    def __repr__(self) -> str:
        return f"QueuePositions({self._n} pending jobs)"
