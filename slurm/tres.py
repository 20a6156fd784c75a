"""Slurm's TRES lists and GPU counts, parsed once for every reader: a TRES list's items
(:func:`tres_items`), its whole-number counts (:func:`parse_tres`, :func:`parse_tres_count`,
:func:`parse_tres_limit_used`), memory per GPU (:func:`parse_memory_per_gpu`) and GPUs by type in any
GRES or TRES form (:func:`parse_gpus`), and a partition's ``TRESBillingWeights`` applied as Slurm applies
them (:func:`parse_billing_weights`, :func:`billable_tres`). No I/O; numbers are read by :mod:`slurm.values`.

Based on outputs recorded from Slurm 22.05.8 and 24.11 (``tests/fixtures/slurm/``)."""

from __future__ import annotations

import math
import re

from .values import number

_DIGITS = re.compile(r"[0-9]+")
_GRES_ITEM = re.compile(r"([^,(]+)(?:\([^)]*\))?")


#: The TRES Slurm counts GPUs in (``GrpTRES=gres/gpu=4``); typed GPUs are ``gres/gpu:<type>``.
GPU_TRES = "gres/gpu"

#: Slurm's billed units (``GrpTRESMins=billing=N``): the allocated TRES weighed by the partition's
#: ``TRESBillingWeights`` (without weights, the CPU count).
BILLING_TRES = "billing"


def tres_items(text: str | None) -> list[tuple[str, str]]:
    """A TRES list's ``(name, value)`` pairs as written: ``cpu=10,gres/gpu:a100=2,mem=1G`` ->
    ``[("cpu", "10"), ("gres/gpu:a100", "2"), ("mem", "1G")]``; names and values stripped, items
    without a name left out, ``None``/``""`` -> ``[]``. The one place a TRES list is split (sacctmgr
    ``GrpTRES``/``GrpTRESMins``, sshare ``GrpTRESMins``/``GrpTRESRaw``, assoc_mgr ``GrpTRES``,
    squeue ``tres_*_str``): items are separated by commas, which no TRES name or value holds."""
    pairs = []
    for item in (text or "").split(","):
        key, _, value = item.partition("=")
        if key.strip():
            pairs.append((key.strip(), value.strip()))
    return pairs


def parse_tres(text: str | None) -> dict[str, int]:
    """``cpu=1000,gres/gpu=60`` -> ``{"cpu": 1000, "gres/gpu": 60}``: the whole-number TRES of a
    list. assoc_mgr's ``limit(used)`` values give the limit (``gres/gpu=6(1)`` -> 6) and ``N(3)``
    (no limit) is left out, as are values with a unit (``mem=1G``) or none; ``""`` -> ``{}``. Never
    raises: for a count that must be read, use :func:`parse_tres_count`."""
    tres: dict[str, int] = {}
    for key, value in tres_items(text):
        limit = value.split("(", 1)[0]
        if limit.isdigit():
            tres[key] = int(limit)
    return tres


def parse_tres_count(text: str | None, name: str = GPU_TRES) -> int | None:
    """The count of TRES ``name`` in a TRES list such as ``cpu=10,gres/gpu:a100=2,gres/gpu=4``
    (-> 4); ``None`` when it is not in the list. Typed entries (``gres/gpu:a100``) are other TRES;
    other values are not read (memory comes with a unit: ``mem=1G``, ``mem=2000M``). Raises
    ``ValueError`` when the count of ``name`` is not a whole number (never a guess)."""
    for key, value in tres_items(text):
        if key == name:
            if not value.isdigit():
                raise ValueError(f"unexpected {name} count {value!r} in {text!r}")
            return int(value)
    return None


def parse_tres_limit_used(text: str | None, name: str = GPU_TRES) -> tuple[int | None, int | None]:
    """``scontrol show assoc_mgr``'s ``GrpTRES=cpu=N(3),gres/gpu=4(1)``: (limit, in use) of TRES
    ``name`` (-> ``(4, 1)``); ``N`` (no limit), a missing TRES or a missing count give ``None``."""
    value = next((v for k, v in tres_items(text) if k == name), "")
    limit, _, used = value.partition("(")
    used = used.rstrip(")")
    return (int(limit) if limit.isdigit() else None, int(used) if used.isdigit() else None)


def parse_memory_per_gpu(text: str | None) -> int | None:
    """MiB per GPU of a job that asked ``--mem-per-gpu``, from squeue's ``memory_per_tres``: the
    ``gpu`` item of ``gres:gpu:8192`` (22.05) or ``gres/gpu:8192`` (24.11), items split on commas.
    ``None`` when there is none (``""``: a job of ``--mem`` or ``--mem-per-cpu``) or its amount is
    not a whole number. Never raises."""
    for item in (text or "").split(","):
        name, _, amount = item.strip().removeprefix("gres:").removeprefix("gres/").rpartition(":")
        if name == "gpu":
            return int(amount) if _DIGITS.fullmatch(amount) else None
    return None


def tres_list_count(value: list | None, kind: str) -> int | None:
    """The count of TRES ``kind`` (``billing``, ``cpu``, ``node``; untyped TRES only) in a sacct
    ``--json`` TRES list such as ``tres.allocated`` (``[{"type": "billing", "count": 6}, ...]``);
    ``None`` when it is not there or its count is not a whole number of at least 0 (24.11 writes
    ``-2`` for a TRES it does not count, as ``energy``). Never raises."""
    for entry in value if isinstance(value, list) else []:
        if isinstance(entry, dict) and entry.get("type") == kind and not entry.get("name"):
            count = number(entry.get("count"))
            return count if count is not None and count >= 0 else None
    return None


# --- GPUs ----------------------------------------------------------------------------------------


def parse_gpus(value: str | list | None) -> dict[str, int]:
    """GPUs by type (``""`` = untyped) from any way Slurm writes them; the one GRES/TRES reader.

    - GRES items, as in sinfo's ``gres``/``gres_used`` and squeue's ``tres_per_*``:
      ``gpu:a100:4``, ``gpu:2``, ``gpu:t4:1(S:0)``, ``gpu:a100:2(IDX:0,2)``, with or without the
      ``gres:`` (22.05) or ``gres/`` (newer) prefix; a bare ``gpu`` or ``gpu:a100`` counts 1 (as
      ``--gres=gpu`` asks for one). Counts of several items of a type add up.
    - TRES items, as in ``tres_req_str``/``tres_alloc_str`` and sacctmgr: ``gres/gpu=2``,
      ``gres/gpu:a100=2``. Slurm writes the untyped ``gres/gpu=N`` as the total of the typed ones,
      so typed entries win and the untyped total is kept only when no typed entry exists.
    - sacct's ``tres.allocated`` list (``{"type": "gres", "name": "gpu:a100", "count": 4}``), read as
      the TRES items it stands for.

    Items are split on commas outside parentheses; non-GPU items (``cpu=4``, ``mps:100``,
    ``gres/gpumem=4000``, ``shard:2``), ``N/A`` and ``(null)`` are ignored. Never raises."""
    if isinstance(value, list):
        value = ",".join(
            f"gres/{entry.get('name')}={number(entry.get('count'), 0)}"
            for entry in value
            if isinstance(entry, dict) and entry.get("type") == "gres"
        )
    gres: dict[str, int] = {}
    typed: dict[str, int] = {}
    untyped: int | None = None
    for match in _GRES_ITEM.finditer(value if isinstance(value, str) else ""):
        item = match.group(1).strip()
        key, equals, count = item.partition("=")
        if equals:  # TRES: gres/gpu[:type]=N
            name, _, gtype = key.partition(":")
            if name != "gres/gpu" or not _DIGITS.fullmatch(count):
                continue
            if gtype:
                typed[gtype] = int(count)
            else:
                untyped = int(count)
            continue
        parts = item.removeprefix("gres:").removeprefix("gres/").split(":")
        if parts[0] != "gpu":
            continue
        rest = parts[1:]  # [], [count], [type] or [type, count]
        count = int(rest.pop()) if rest and _DIGITS.fullmatch(rest[-1]) else 1
        if len(rest) > 1:
            continue
        gtype = rest[0] if rest else ""
        gres[gtype] = gres.get(gtype, 0) + count
    for gtype, count in (typed or ({"": untyped} if untyped else {})).items():
        gres[gtype] = gres.get(gtype, 0) + count
    return gres


# --- billing ---------------------------------------------------------------------------------------

#: A ``TRESBillingWeights`` weight: a number as ``strtod`` reads it, then an optional unit.
_WEIGHT = re.compile(r"([-+]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?)([A-Za-z]?)")
#: A weight's unit -> MiB in it: Slurm counts memory in MB, so ``Mem=0.25G`` is 0.25 per GiB, 0.25/1024 per MiB.
_WEIGHT_UNITS = {"": 1.0, "K": 1 / 1024, "M": 1.0, "G": 1024.0, "T": 1024.0**2, "P": 1024.0**3}
#: The TRES that ``PriorityFlags=MAX_TRES`` counts per node (the others, e.g. licenses, are added).
_NODE_TRES = ("cpu", "mem", "node")


def parse_billing_weights(text: str | None) -> dict[str, float]:
    """A partition's ``TRESBillingWeights`` as ``scontrol show partition --oneliner`` prints it
    (``CPU=0.5,Mem=0.25G,GRES/gpu:a100=4.0,GRES/gpu:t4=1.0``, the same on 22.05 and 24.11) -> TRES
    name lower-cased (``cpu``, ``mem``, ``gres/gpu:a100``; Slurm matches names without case) ->
    billed units per unit of that TRES's count: per CPU, per node, per GPU, per MiB of memory (a
    unit suffix K, M, G, T or P divides the weight by that many MiB: ``Mem=0.25G`` -> 0.25/1024).
    ``{}`` for none (``None``, ``""``). An item that is not a weight is left out. Never raises."""
    weights: dict[str, float] = {}
    for key, value in tres_items(text):
        match = _WEIGHT.fullmatch(value)
        if match and match.group(2).upper() in _WEIGHT_UNITS:
            weights[key.lower()] = float(match.group(1)) / _WEIGHT_UNITS[match.group(2).upper()]
    return weights


def job_tres(*, cpus: int, memory_mib: int, gpus: int, gpu_type: str = "", nodes: int = 1) -> dict[str, float]:
    """The TRES Slurm allocates a job of ``nodes`` nodes, ``cpus`` CPUs, ``memory_mib`` MiB per node
    and ``gpus`` GPUs of ``gpu_type`` (``""``: untyped), as Slurm names them (``cpu``, ``mem`` in MiB,
    ``node``, ``gres/gpu`` for every GPU and ``gres/gpu:<type>`` for the typed ones), for
    :func:`billable_tres`."""
    tres = {"cpu": float(cpus), "mem": float(memory_mib * nodes), "node": float(nodes), GPU_TRES: float(gpus)}
    if gpu_type and gpus:
        tres[f"{GPU_TRES}:{gpu_type.lower()}"] = float(gpus)
    return tres


def billable_tres(weights: dict[str, float], tres: dict[str, float], *, max_tres: bool = False) -> int:
    """Slurm's ``billing`` TRES of an allocation ``tres`` (:func:`job_tres`) on a partition with
    ``weights`` (:func:`parse_billing_weights`), as slurm.conf(5) ``TRESBillingWeights`` describes it
    (the same text in 22.05 and 24.11): the sum over the TRES of weight x count; with
    ``PriorityFlags=MAX_TRES`` (``max_tres``) the largest of the per-node TRES (CPU, memory, node,
    GRES) plus the sum of the others; without weights (``{}``) "the job is billed against the total
    number of allocated CPUs". Slurm keeps the result as a whole number, rounded down (1.75 is billed
    1: recorded in ``tests/fixtures/slurm/*/billing/``), never below 0. These are the billed units
    per minute of run the job's association is charged (``GrpTRESMins=billing`` counts unit-minutes)."""
    if not weights:
        return int(tres.get("cpu", 0))
    per_node, other = 0.0, 0.0
    for name, count in tres.items():
        value = count * weights.get(name.lower(), 0.0)
        if max_tres and (name in _NODE_TRES or name.startswith("gres/")):
            per_node = max(per_node, value)
        else:
            other += value
    return max(0, math.floor(per_node + other + 1e-9))
