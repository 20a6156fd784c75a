"""Adapter for Slurm 22.05's JSON (``openapi/v0.0.38``), tolerant of newer shapes.

Recorded outputs live in ``tests/fixtures/slurm/22.05/``. Newer Slurm (23.11+) sends numbers as
``{"set": bool, "infinite": bool, "number": int}`` and ``job_state`` as a list; both are read here.
"""
from __future__ import annotations

import re

import hostlist

from ..records import Node, Partition, QueueJob

_GRES_ITEM = re.compile(r"([^,(]+)(?:\([^)]*\))?")


def number(value, default=None):
    """An int from a plain number or a ``{set, infinite, number}`` object; ``None`` for infinite
    or unset; ``default`` for missing values."""
    if isinstance(value, dict):
        if value.get("infinite") or not value.get("set", True):
            return None
        value = value.get("number")
    if value is None:
        return default
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, (int, float)):
        return int(value)
    return default


def first_state(value) -> str:
    """``job_state`` / node ``state`` as one upper-case word (lists: first element)."""
    if isinstance(value, list):
        value = value[0] if value else ""
    return str(value or "").upper()


def parse_gres(text: str | None) -> dict[str, int]:
    """``gpu:a100:4,gpu:t4:1(S:0)`` -> ``{"a100": 4, "t4": 1}``; ``gpu:2`` -> ``{"": 2}``.

    Items are split on commas outside parentheses (``gpu:a100:2(IDX:0,2)`` is one item). Non-GPU
    GRES and ``N/A``/``(null)`` are ignored."""
    gpus: dict[str, int] = {}
    if not text or text in {"N/A", "(null)"}:
        return gpus
    for match in _GRES_ITEM.finditer(text):
        parts = match.group(1).strip().split(":")
        if not parts or parts[0] not in {"gpu", "gres/gpu"}:
            continue
        if len(parts) == 3 and parts[2].isdigit():
            gtype, count = parts[1], int(parts[2])
        elif len(parts) == 2 and parts[1].isdigit():
            gtype, count = "", int(parts[1])
        else:
            continue
        gpus[gtype] = gpus.get(gtype, 0) + count
    return gpus


def parse_tres_gpus(text: str | None) -> dict[str, int]:
    """GPU counts from a TRES string ``cpu=1,mem=1000M,gres/gpu=2,gres/gpu:a100=2`` ->
    ``{"a100": 2}``. Typed entries win; an untyped ``gres/gpu=N`` is kept as ``{"": N}`` only
    when no typed entry exists."""
    typed: dict[str, int] = {}
    untyped = 0
    for item in (text or "").split(","):
        key, _, value = item.partition("=")
        if not key.startswith("gres/gpu") or not value.isdigit():
            continue
        if key == "gres/gpu":
            untyped = int(value)
        elif key.startswith("gres/gpu:"):
            typed[key.split(":", 1)[1]] = int(value)
    if typed:
        return typed
    return {"": untyped} if untyped else {}


def parse_nodes(sinfo: dict) -> list[Node]:
    """Nodes from a ``sinfo --json`` document."""
    nodes = []
    for raw in sinfo.get("nodes", []):
        state = raw.get("state")
        flags = list(raw.get("state_flags") or [])
        if isinstance(state, list):  # 23.11+: ["IDLE", "DRAIN"]
            flags += state[1:]
        nodes.append(
            Node(
                name=raw["name"],
                state=first_state(state).lower(),
                flags=tuple(str(f).upper() for f in flags),
                partitions=tuple(raw.get("partitions") or ()),
                cpus=number(raw.get("cpus"), 0),
                alloc_cpus=number(raw.get("alloc_cpus"), 0),
                real_memory=number(raw.get("real_memory"), 0),
                alloc_memory=number(raw.get("alloc_memory"), 0),
                gpus=parse_gres(raw.get("gres")),
                gpus_used=parse_gres(raw.get("gres_used")),
                reason=raw.get("reason") or "",
            )
        )
    return nodes


def parse_time_limit(text: str) -> int | None:
    """Slurm time -> seconds. Forms (``man sbatch --time``): ``minutes``, ``minutes:seconds``,
    ``hours:minutes:seconds``, ``days-hours``, ``days-hours:minutes``, ``days-hours:minutes:seconds``;
    ``UNLIMITED``, ``INFINITE`` and ``NONE`` -> ``None``. Raises ``ValueError`` otherwise."""
    text = text.strip()
    if text.upper() in {"UNLIMITED", "INFINITE", "NONE", ""}:
        return None
    if "-" in text:  # days-hours[:minutes[:seconds]]
        d, rest = text.split("-", 1)
        parts = [int(p) for p in rest.split(":")]
        if len(parts) > 3:
            raise ValueError(f"not a Slurm time: {text!r}")
        h, m, s = (parts + [0, 0])[:3]
        return ((int(d) * 24 + h) * 60 + m) * 60 + s
    parts = [int(p) for p in text.split(":")]
    if len(parts) == 1:  # minutes
        h, m, s = 0, parts[0], 0
    elif len(parts) == 2:  # minutes:seconds
        h, m, s = 0, parts[0], parts[1]
    elif len(parts) == 3:
        h, m, s = parts
    else:
        raise ValueError(f"not a Slurm time: {text!r}")
    return (h * 60 + m) * 60 + s


def parse_partitions(oneliner: str) -> list[Partition]:
    """Partitions from ``scontrol show partition --oneliner`` (one partition a line of ``Key=Value``
    words; a value may itself contain ``=``, so each word splits on its first ``=``)."""
    partitions = []
    for line in oneliner.splitlines():
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        if "PartitionName" not in fields:
            continue
        nodes = fields.get("Nodes", "")
        partitions.append(
            Partition(
                name=fields["PartitionName"],
                state=fields.get("State", "UNKNOWN").upper(),
                nodes=tuple(hostlist.expand_hostlist(nodes)) if nodes and nodes != "(null)" else (),
                max_time=parse_time_limit(fields.get("MaxTime", "UNLIMITED")),
                default_time=parse_time_limit(fields.get("DefaultTime", "NONE")),
                is_default=fields.get("Default", "NO").upper() == "YES",
            )
        )
    return partitions


def parse_jobs(squeue: dict) -> list[QueueJob]:
    """Jobs from a ``squeue --json`` document (every job Slurm still holds, finished ones for
    ``MinJobAge`` seconds)."""
    jobs = []
    for raw in squeue.get("jobs", []):
        alloc = parse_tres_gpus(raw.get("tres_alloc_str"))
        jobs.append(
            QueueJob(
                job_id=number(raw.get("job_id"), 0),
                array_job_id=number(raw.get("array_job_id"), 0) or 0,
                array_task_id=number(raw.get("array_task_id")),
                array_task_string=raw.get("array_task_string") or "",
                name=raw.get("name") or "",
                user=raw.get("user_name") or "",
                account=raw.get("account") or "",
                partition=raw.get("partition") or "",
                state=first_state(raw.get("job_state")),
                reason=raw.get("state_reason") or "",
                priority=number(raw.get("priority"), 0) or 0,
                submit_time=number(raw.get("submit_time"), 0) or 0,
                start_time=number(raw.get("start_time"), 0) or 0,
                end_time=number(raw.get("end_time"), 0) or 0,
                time_limit=number(raw.get("time_limit")),
                gpus=alloc or parse_tres_gpus(raw.get("tres_req_str")),
                comment=raw.get("comment") or "",
                nodes=raw.get("nodes") or "",
                **dict(zip(("exit_code", "signal"), _exit_or_none(raw.get("exit_code")), strict=True)),
            )
        )
    return jobs


def _exit_or_none(value) -> tuple[int | None, int | None]:
    from ..parsing import parse_exit

    try:
        return parse_exit(value)
    except ValueError:
        return None, None
