"""What the adapters of Slurm's ``data_parser`` JSON share: ``v0.0.40`` (Slurm 23.11), ``v0.0.41``
(24.05) and ``v0.0.42`` (24.11). Every field name those adapters read is here; each version's module
(:mod:`.v0_0_40`, :mod:`.v0_0_41`, :mod:`.v0_0_42`) names its version, its commands and how its
documents differ. The values inside are read by :mod:`slurm.values`.

Recorded outputs: ``tests/fixtures/slurm/24.11/`` (v0.0.42), ``24.05/`` (v0.0.41) and ``23.11/``
(v0.0.40), all from the local Slurm 24.11 (``cluster/record_fixtures.py``). How these documents differ
from 22.05's (``v0.0.38``), and what the readers here do about it so that the records mean the same:

- ``squeue --json`` lists only jobs still in the queue; ended ones (kept for ``MinJobAge``, with their
  exit code) only with ``-t all``, which the poll asks for (22.05 ignored ``-t`` and listed them all).
- ``sinfo --json`` is one ``sinfo[]`` entry per partition x node group, without per-node GPU use: nodes
  are read from ``scontrol show node --json`` (``nodes[]``, one per node, 22.05 sinfo's field names).
- ``scontrol show partition --json`` has no ``Default`` flag, so partitions are still read from
  ``scontrol show partition --oneliner``, whose text is the same as 22.05's (recorded:
  ``24.11/scontrol_show_partition_oneliner.txt``).
- Job and node states are lists, base state first (``["IDLE", "DRAIN"]``, ``["MIXED", "PLANNED"]``,
  ``["PENDING", "REQUEUED"]``): a node's base state and its flags are split as 22.05's ``state`` and
  ``state_flags`` were; a job's state is the word 22.05 wrote (:func:`slurm.values.job_state_word`).
- Numbers are ``{set, infinite, number}`` objects; sacct's job-level ``time.start``/``end``/``elapsed``
  stay ints, with NO_VAL (4294967294) as the start of a job that never started.
- ``exit_code`` is ``{status: [...], return_code, signal: {id, name}}`` everywhere; sacct's is right
  (``["ERROR"]``, return code 3 for ``exit 3``: 22.05 wrote SUCCESS/0), so it is taken as written; a
  signalled job in the queue reads exit code 0 and its signal, as 22.05's wait status did.
- No ``errors`` entry for a query that found nothing (22.05's sacct wrote 9003 "Nothing found").
- With slurmctld down the commands print nothing and exit 1 (22.05 printed JSON with ``errors``):
  the gateway raises :class:`~slurm.errors.SlurmError` on the exit status.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..records import FinishedJob, Node, Partition, QueueJob, Reservation
from ..times import parse_limit_minutes, parse_timestamp
from ..tres import parse_gpus, parse_memory_per_gpu
from ..values import NO_NODES, classify_state, expand_nodes, first_state, job_state_word, number, parse_exit, queue_exit
from .base import PARTITIONS_EVERY, PollReading, expect_version
from .queue_decode import is_raw, queue_jobs, squeue_decoder
from .v0_0_38 import parse_partitions as parse_partitions_text
from .v0_0_38 import queue_extras, reason_extras, requested_memory_per_node, sacct_extras

#: ``errors[].error_number`` values that mean "no results": ESLURM_REST_EMPTY_RESULT (9003). Not
#: written by 24.11 for an empty answer (``sacct_nothing_found.json``: ``jobs: []``, no errors), kept
#: because the number means exactly that should a release write it.
EMPTY_RESULT_ERRORS = frozenset({9003})

#: The poll's commands (every data_parser version: plain ``--json`` is the release's own version;
#: another version's document is read by its adapter, see :func:`slurm.adapters.expect_version`).
SQUEUE = ["squeue", "--json", "-t", "all"]
NODES = ["scontrol", "show", "node", "--json"]
PARTITIONS = ["scontrol", "show", "partition", "--oneliner"]
#: Read with the partitions (the same cadence); 23.02+ scontrol writes reservations as JSON.
RESERVATIONS = ["scontrol", "show", "reservation", "--json"]


def failure_errors(document: dict) -> list:
    """The document's ``errors`` entries that are real failures, leaving out those that only say
    the answer is empty (:data:`EMPTY_RESULT_ERRORS`)."""
    errors = document.get("errors") or []
    return [e for e in errors if not (isinstance(e, dict) and e.get("error_number") in EMPTY_RESULT_ERRORS)]


def release(document: dict) -> str:
    """The Slurm release a document names (``meta.slurm.release``: ``"24.11.5"``), ``""`` if none."""
    meta = document.get("meta") if isinstance(document, dict) else None
    slurm = meta.get("slurm") if isinstance(meta, dict) else None
    return str(slurm.get("release") or "") if isinstance(slurm, dict) else ""


def poll(
    version: str,
    gateway,
    *,
    previous=None,
    now: float,
    probe: dict | None = None,
    squeue_argv: Sequence[str] = SQUEUE,
    nodes_argv: Sequence[str] = NODES,
    partitions_argv: Sequence[str] = PARTITIONS,
    reservations_argv: Sequence[str] = RESERVATIONS,
) -> PollReading:
    """One poll of a cluster whose JSON is data_parser ``version``: ``squeue --json -t all``,
    ``scontrol show node --json``, and ``scontrol show partition --oneliner`` with ``scontrol show
    reservation --json`` once per :data:`PARTITIONS_EVERY` and after an upgrade (the same calls as
    22.05's poll). ``probe`` (the ``sinfo --json``
    that named the version) is only checked: it has no per-node figures. Raises
    :class:`~slurm.adapters.OtherVersion` when a document is of another version, and what the gateway
    raises."""
    if probe is not None:
        expect_version(version, probe, ["sinfo", "--json"])
    squeue = expect_version(version, gateway.run_json(squeue_argv, decode=squeue_decoder(squeue_argv)), squeue_argv)
    nodes = expect_version(version, gateway.run_json(nodes_argv), nodes_argv)
    partitions, partitions_at = kept_partitions(version, previous)
    reservations = list(getattr(previous, "reservations", None) or []) if partitions else []
    if not partitions or now - partitions_at >= PARTITIONS_EVERY:
        partitions, partitions_at = parse_partitions(gateway.run(partitions_argv).out), now
        reservations = parse_reservations(expect_version(version, gateway.run_json(reservations_argv), reservations_argv))
    return PollReading(
        slurm_version=release(squeue),
        output_version=version,
        nodes=parse_nodes(nodes),
        partitions=partitions,
        partitions_at=partitions_at,
        jobs=parse_jobs(squeue, consume=True),  # the poll's own document: its structs go as read
        reservations=reservations,
    )


def kept_partitions(version: str, previous) -> tuple[list[Partition], float]:
    """(partitions, Unix seconds read) of the previous snapshot when it was read as ``version`` (or
    names no version), else ``([], 0.0)``: after an upgrade the partitions are read again."""
    if previous is None or previous.output_version not in ("", version):
        return [], 0.0
    return previous.partitions, previous.partitions_at


def parse_nodes(document: dict) -> list[Node]:
    """Nodes from a ``scontrol show node --json`` document (``nodes[]``: ``state`` a list, base state
    first, then flags such as ``DRAIN``, ``PLANNED``, ``NOT_RESPONDING``; ``gres``/``gres_used`` as in
    22.05's sinfo). Raises ``ValueError`` for a ``sinfo --json`` document, which has no per-node
    figures in these versions (a reading of it would be a cluster without nodes)."""
    if "nodes" not in document and "sinfo" in document:
        raise ValueError("sinfo --json of Slurm 23.11+ has no per-node figures: read scontrol show node --json")
    nodes = []
    for raw in document.get("nodes") or []:
        state = raw.get("state")
        flags = list(raw.get("state_flags") or []) + (list(state[1:]) if isinstance(state, list) else [])
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
                gpus=parse_gpus(raw.get("gres")),
                gpus_used=parse_gpus(raw.get("gres_used")),
                reason=_text(raw.get("reason")),
                **reason_extras(raw),
            )
        )
    return nodes


def parse_partitions(oneliner: str) -> list[Partition]:
    """Partitions from ``scontrol show partition --oneliner``: the same text as 22.05's, read by the
    same reader (:func:`slurm.adapters.v0_0_38.parse_partitions`); the JSON has no ``Default`` flag."""
    return parse_partitions_text(oneliner)


def _names(value: object) -> tuple[str, ...]:
    """A comma list (``"root,alice"``; ``""``/``null`` for none) -> names."""
    text = _text(value).strip()
    return () if text in NO_NODES else tuple(name for name in text.split(",") if name)


def parse_reservations(document: dict) -> list[Reservation]:
    """Reservations from a ``scontrol show reservation --json`` document (``reservations[]``:
    ``name``, ``start_time``/``end_time`` Unix seconds as numbers or ``{set, number}`` objects,
    ``node_list``, ``partition`` (``""``/``null`` for none), ``flags`` a list, ``users`` and
    ``accounts`` comma lists). "No reservations in the system" is ``reservations: []``, so ``[]``.
    ``ValueError`` for a malformed node list."""
    reservations = []
    for raw in document.get("reservations") or []:
        partition = _text(raw.get("partition")).strip()
        reservations.append(
            Reservation(
                name=_text(raw.get("name")),
                start=number(raw.get("start_time"), 0) or 0,
                end=number(raw.get("end_time"), 0) or 0,
                nodes=tuple(expand_nodes(raw.get("node_list"))),
                partition="" if partition in NO_NODES else partition,
                flags=tuple(str(f).upper() for f in raw.get("flags") or ()),
                users=_names(raw.get("users")),
                accounts=_names(raw.get("accounts")),
            )
        )
    return reservations


def parse_jobs(squeue: dict, *, consume: bool = False) -> list[QueueJob]:
    """Jobs from a ``squeue --json`` document (with ``-t all``: ended ones too, for ``MinJobAge``).
    The poll's document (:func:`.queue_decode.decode_squeue`) holds each job's JSON text instead of
    a dict, read by :func:`.queue_decode.queue_jobs` into the same records (this module's
    :func:`job_from_dict` for a job its structs do not take)."""
    if is_raw(squeue.get("jobs")):
        return queue_jobs(squeue["jobs"], lists=True, fallback=job_from_dict, consume=consume)
    return [job_from_dict(raw) for raw in squeue.get("jobs") or []]


def job_from_dict(raw: dict) -> QueueJob:
    """One job of a ``squeue --json`` document read by ``json.loads`` (a dict) as its record."""
    alloc = parse_gpus(raw.get("tres_alloc_str"))
    return QueueJob(
        job_id=number(raw.get("job_id"), 0),
        array_job_id=number(raw.get("array_job_id"), 0) or 0,
        array_task_id=number(raw.get("array_task_id")),
        array_task_string=_text(raw.get("array_task_string")),
        name=_text(raw.get("name")),
        user=_text(raw.get("user_name")),
        account=_text(raw.get("account")),
        partition=_text(raw.get("partition")),
        state=job_state_word(raw.get("job_state")),
        reason=_text(raw.get("state_reason")),
        priority=number(raw.get("priority"), 0) or 0,
        submit_time=number(raw.get("submit_time"), 0) or 0,
        start_time=number(raw.get("start_time"), 0) or 0,
        end_time=number(raw.get("end_time"), 0) or 0,
        time_limit=number(raw.get("time_limit")),
        gpus=alloc or parse_gpus(raw.get("tres_req_str")),
        comment=_text(raw.get("comment")),
        nodes=_text(raw.get("nodes")),
        **dict(zip(("exit_code", "signal"), queue_exit(raw.get("exit_code")), strict=True)),
        restart_count=number(raw.get("restart_cnt"), 0) or 0,
        reason_description=_text(raw.get("state_description")),
        **queue_extras(raw),
        memory_per_node=number(raw.get("memory_per_node")),
        memory_per_cpu=number(raw.get("memory_per_cpu")),
        memory_per_gpu=parse_memory_per_gpu(raw.get("memory_per_tres")),
    )


def parse_sacct_jobs(doc: dict) -> list[FinishedJob]:
    """Jobs from a ``sacct --json`` document, one per ``jobs[]`` entry (steps are nested in
    ``steps`` and not read). ``state.current`` is a list (``["PENDING", "REQUEUED"]`` for a requeued
    run reads REQUEUED); the exit code is taken as written (these versions report ``exit 3`` as 3).
    ``ValueError`` only when a field holds something Slurm does not write."""
    return [_finished_job(raw) for raw in doc.get("jobs") or [] if isinstance(raw, dict) and "step" not in raw]


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _finished_job(raw: dict) -> FinishedJob:
    state, state_raw = classify_state((raw.get("state") or {}).get("current"))
    exit_code, signal = parse_exit(raw.get("exit_code"))
    times = raw.get("time") or {}
    array = raw.get("array") or {}
    nodes = _text(raw.get("nodes"))
    return FinishedJob(
        job_id=number(raw.get("job_id"), 0),
        array_job_id=number(array.get("job_id"), 0) or 0,
        array_task_id=number(array.get("task_id")),
        name=_text(raw.get("name")),
        user=_text(raw.get("user")),
        account=_text(raw.get("account")),
        partition=_text(raw.get("partition")),
        state=state,
        state_raw=state_raw,
        exit_code=exit_code,
        signal=signal,
        elapsed=number(times.get("elapsed"), 0) or 0,
        start=parse_timestamp(times.get("start")),
        end=parse_timestamp(times.get("end")),
        time_limit=parse_limit_minutes(times.get("limit")),
        comment=_text((raw.get("comment") or {}).get("job")),
        nodes="" if nodes.strip() in NO_NODES else nodes,
        gpus=parse_gpus((raw.get("tres") or {}).get("allocated")),
        cancelled_by=_text(raw.get("kill_request_user")),
        submit=parse_timestamp(times.get("submission")),
        **sacct_extras(raw),
        **_required_memory(raw),
    )


def _required_memory(raw: dict) -> dict[str, int | None]:
    """sacct's ``required.memory_per_node`` / ``memory_per_cpu`` (MiB; ``{"set": false}`` -> ``None``);
    a per-node 0 beside no per-CPU figure (``--mem-per-gpu``, which accounting does not keep) is
    :func:`.v0_0_38.requested_memory_per_node`: what Slurm counted on the node."""
    required = raw.get("required") or {}
    per_node, per_cpu = number(required.get("memory_per_node")), number(required.get("memory_per_cpu"))
    if per_node == 0 and not per_cpu:
        per_node = requested_memory_per_node(raw) or per_node
    return {"memory_per_node": per_node, "memory_per_cpu": per_cpu}


# --- the key look-up (a retried submission) -------------------------------------------------------


def queue_job_by_comment(squeue: dict, comment: str) -> tuple[int, str] | None:
    """(job id, cluster) of the ``squeue --json`` job whose ``comment`` is ``comment`` (the portal's
    ``portal:<key>``), ``None`` when no job carries it. For an array the id is the array job's (what
    ``sbatch --parsable`` printed; its tasks carry the same comment). ``cluster``: ``""`` when not
    written."""
    for raw in squeue.get("jobs") or []:
        if raw.get("comment") == comment:
            return number(raw.get("array_job_id"), 0) or int(raw["job_id"]), _text(raw.get("cluster"))
    return None


def sacct_job_by_comment(sacct: dict, comment: str) -> tuple[int, str] | None:
    """The same from a ``sacct --json`` document (``comment.job``; array tasks: ``array.job_id``)."""
    for raw in sacct.get("jobs") or []:
        value = raw.get("comment")
        text = value.get("job") if isinstance(value, dict) else value
        if text == comment:
            return number((raw.get("array") or {}).get("job_id"), 0) or int(raw["job_id"]), _text(raw.get("cluster"))
    return None
