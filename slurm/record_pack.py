"""The snapshot's records as stored: one msgpack value per list.

A list of records, the queue's :class:`~slurm.records.QueueJob` ones, is packed as ``{"fields": [field names], "rows": [[values in that order], ...]}``: the field names once
instead of once per record (a map per job spent ~340 of its ~480 bytes on its 31 names), so the
queue a 100,000-job poll writes is some 17 MB instead of 48 and the poller's memory while it stores
(the packed bytes, then the cache's pickle of them) drops by as much. The records are msgspec
structs declared ``array_like``, so packing writes each as its row and reading decodes each row
straight into its record, both in C, and the garbage collector never tracks them. The nodes
(:class:`~slurm.records.Node`, a msgspec struct) are stored as rows too, with a column's equal values
shared, and the cache pickles them (:func:`nodes_pack`): 5,000 nodes read back in ~1 ms, where the
pickled field dicts made dataclasses took ~5 ms.

A value packed by a release with other fields is read by name (fields it lacks take their defaults);
the queue as a release before the rows packed it (a msgpack list of maps) is read as before.
"""

from __future__ import annotations

import gc
import threading
import time
import typing
from collections.abc import Iterator
from contextlib import contextmanager
from itertools import starmap
from typing import Generic, TypeVar

import msgspec

from .records import Node, QueueJob

R = TypeVar("R")

#: The pauses of :func:`gc_paused` now open in this process, whether the collector was on when the
#: first of them began, and since when (``time.monotonic``) it has been off (the poller's threads poll
#: clusters side by side, each in its own pause; a web process's threads read snapshots in theirs).
_PAUSES = {"open": 0, "was_enabled": False, "off_since": 0.0}
_PAUSES_LOCK = threading.Lock()
#: The longest the collector stays off while pauses keep overlapping (seconds): past it, a pause
#: beginning or ending runs one collection of the young objects (a poll stuck on a hung call, or
#: threads whose pauses never all end at once, would otherwise keep it off for good).
GC_MAX_OFF_S = 60.0
_clock = time.monotonic


@contextmanager
def gc_paused() -> Iterator[None]:
    """The cyclic garbage collector off while a poll builds, stores and applies its records (100,000
    jobs are some 3 million objects, none in a cycle: each collection pass would walk them all
    again, and a full one the whole process), back as it was when the last pause open in this
    process ends: pauses nest and overlap across threads (two clusters polled side by side), and
    one ending never turns the collector on under another. The records a poll drops are freed by
    their reference counts meanwhile; objects in a cycle wait for the collector's next pass, at the
    latest :data:`GC_MAX_OFF_S` after it was turned off if pauses are still open."""
    entered = False
    try:
        with _PAUSES_LOCK:
            if _PAUSES["open"] == 0:
                _PAUSES["was_enabled"], _PAUSES["off_since"] = gc.isenabled(), _clock()
                gc.disable()
            _PAUSES["open"] += 1
            entered = True
        _collect_if_off_too_long()
        yield
    finally:
        if entered:
            with _PAUSES_LOCK:
                _PAUSES["open"] -= 1
                if _PAUSES["open"] == 0 and _PAUSES["was_enabled"]:
                    gc.enable()
            _collect_if_off_too_long()


def _collect_if_off_too_long() -> None:
    """One collection of the young generations (0 and 1) when pauses have kept the collector off for
    more than :data:`GC_MAX_OFF_S`; the clock starts again from it."""
    with _PAUSES_LOCK:
        due = _PAUSES["open"] > 0 and _PAUSES["was_enabled"] and _clock() - _PAUSES["off_since"] > GC_MAX_OFF_S
        if due:
            _PAUSES["off_since"] = _clock()
    if due:
        gc.collect(1)


class RecordPacker(Generic[R]):
    """Packs and unpacks lists of the frozen msgspec struct ``cls``, declared ``array_like`` (msgpack
    writes each record as the row of its values in field order; every field a number, text,
    ``None``, a tuple of text or a dict of text to numbers). ``fields``: its field names in order,
    the rows' columns."""

    def __init__(self, cls: type[R]):
        if not cls.__struct_config__.array_like:  # type: ignore[attr-defined]
            raise TypeError(f"{cls.__name__} is not an array_like msgspec struct: its records would be packed as maps")
        self.cls = cls
        self.fields: tuple[str, ...] = cls.__struct_fields__  # type: ignore[attr-defined]
        self._field_set = frozenset(self.fields)
        self._hints = typing.get_type_hints(cls)
        # the rows decoded straight into the records, in C (values of the record's own types; a
        # value of another type is refused, then read by name)
        packed = msgspec.defstruct(f"_{cls.__name__}Pack", [("fields", tuple[str, ...]), ("rows", list[cls])], gc=False)
        self._decoder = msgspec.msgpack.Decoder(packed)
        self._encoder = msgspec.msgpack.Encoder()

    def pack(self, records: list[R]) -> bytes:
        """``records`` as msgpack ``{"fields": self.fields, "rows": [[value, ...], ...]}``."""
        return self._encoder.encode({"fields": self.fields, "rows": records})

    def unpack(self, packed: bytes) -> list[R]:
        """The records :meth:`pack` packed, equal field by field (tuples as tuples). Rows of another
        release's fields, of values of other types, or a map per record (a release before the rows)
        are read by name. Raises ``msgspec.DecodeError`` for bytes that are not msgpack,
        ``TypeError`` for a packed record that lacks one of the class's required fields."""
        try:
            doc = self._decoder.decode(packed)
        except msgspec.ValidationError:  # packed before the rows, or by another release
            data = msgspec.msgpack.decode(packed)
            if isinstance(data, list):  # one map per record
                return [self._by_name(tuple(r), tuple(r.values())) for r in data]
            return [self._by_name(tuple(data["fields"]), row) for row in data["rows"]]
        if doc.fields != self.fields:
            # another release's columns: the rows as decoded by position are not its records (a
            # short row took this release's defaults, a long one lost its last values), so each
            # row is read again as plain values, by name
            return [self._by_name(doc.fields, row) for row in msgspec.msgpack.decode(packed)["rows"]]
        return doc.rows

    def _by_name(self, names: tuple[str, ...], row) -> R:
        """One row of another release's ``names`` (or a map's), each value by its name."""
        values = {k: v for k, v in zip(names, row, strict=True) if k in self._field_set}
        for name, value in values.items():  # msgpack arrays come back as lists
            if isinstance(value, list) and typing.get_origin(self._hints[name]) is tuple:
                values[name] = tuple(value)
        return self.cls(**values)


#: The queue (``squeue``'s jobs) as the snapshot stores it.
JOBS: RecordPacker[QueueJob] = RecordPacker(QueueJob)
#: QueueJob's fields, in their order: the stored rows' columns.
JOB_FIELDS = JOBS.fields


def jobs_pack(jobs: list[QueueJob]) -> bytes:
    """The queue as the ``snapshot`` key stores it (:meth:`RecordPacker.pack`)."""
    return JOBS.pack(jobs)


def jobs_unpack(packed: bytes) -> list[QueueJob]:
    """The queue :func:`jobs_pack` packed (:meth:`RecordPacker.unpack`)."""
    return JOBS.unpack(packed)


#: Node's fields, in their order: the stored node rows' columns.
NODE_FIELDS: tuple[str, ...] = Node.__struct_fields__


def nodes_pack(nodes: list[Node]) -> dict:
    """The nodes as the snapshot's ``lite`` and ``snapshot`` keys store them (pickled by the cache
    with the rest of the copy): ``{"fields": NODE_FIELDS, "rows": [(name, state, ...), ...]}``, where
    equal values of a column are one object (the same partitions, GPU dicts, states, memory sizes on
    most nodes of a cluster), so that the pickle writes each once and its reading makes each once.
    ~8 ms for 5,000 nodes, in the poller."""
    columns = []
    for column in zip(*map(msgspec.structs.astuple, nodes), strict=True):
        seen: dict = {}
        shared = []
        for value in column:
            key = tuple(value.items()) if isinstance(value, dict) else (type(value), value)
            try:
                shared.append(seen.setdefault(key, value))
            except TypeError:  # an unhashable value (a list where a tuple belongs): stored unshared
                shared.append(value)
        columns.append(shared)
    return {"fields": NODE_FIELDS, "rows": list(zip(*columns, strict=True))}


def nodes_unpack(packed: dict) -> list[Node]:
    """The nodes :func:`nodes_pack` packed, equal field by field: each row made a record by the
    struct's own constructor, in C (5,000 nodes: ~1 ms with their unpickling, none of them tracked by
    the garbage collector). Rows of a release with other fields are read by name (a field they lack
    takes its default); raises ``TypeError`` for a row that lacks a field without a default."""
    if tuple(packed["fields"]) == NODE_FIELDS:
        return list(starmap(Node, packed["rows"]))
    known = frozenset(NODE_FIELDS)
    nodes = []
    for row in packed["rows"]:
        values = {k: v for k, v in zip(packed["fields"], row, strict=True) if k in known}
        nodes.append(Node(**values))
    return nodes
