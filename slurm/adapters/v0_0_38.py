"""Adapter for Slurm 22.05's JSON: ``openapi/v0.0.38`` (``sinfo``/``squeue --json``) and
``openapi/dbv0.0.38`` (``sacct --json``). Every field name this portal reads from those documents is
here; the values in them are read by :mod:`slurm.values`.

Recorded outputs: ``tests/fixtures/slurm/22.05/``. The readers also accept the shapes later Slurm
writes (numbers as ``{"set", "infinite", "number"}``, states as lists), as they did before versions
were told apart; :func:`slurm.adapters.adapter_for` sends only 22.05 documents here.
"""

from __future__ import annotations

import logging

from ..records import FinishedJob, Node, Partition, QueueJob, Reservation
from ..states import JobState
from ..times import parse_limit_minutes, parse_time_limit, parse_timestamp
from ..tres import parse_gpus, parse_memory_per_gpu, tres_list_count
from ..values import NO_NODES, classify_state, exit_or_none, expand_nodes, first_state, number, parse_exit
from .base import PARTITIONS_EVERY, PollReading, expect_version
from .queue_decode import is_raw, queue_jobs, squeue_decoder
from .sacct_cut import cut_short_error, sacct_read_to_cut

#: ``errors[].error_number`` values that mean "no results", not a failure: ESLURM_REST_EMPTY_RESULT
#: (9003, "Nothing found"), which 22.05's ``sacct --json`` reports with ``jobs: []`` for a query that
#: matched nothing (an unknown job id, a period without jobs). Recorded: ``sacct_nothing_found.json``.
EMPTY_RESULT_ERRORS = frozenset({9003})

logger = logging.getLogger(__name__)


def failure_errors(document: dict) -> list:
    """The document's ``errors`` entries that are real failures (slurmctld or slurmdbd not
    answering...), leaving out those that only say the answer is empty (:data:`EMPTY_RESULT_ERRORS`)."""
    errors = document.get("errors") or []
    return [e for e in errors if not (isinstance(e, dict) and e.get("error_number") in EMPTY_RESULT_ERRORS)]


#: The output version this module reads.
VERSION = "v0.0.38"
SINFO = ["sinfo", "--json"]
SQUEUE = ["squeue", "--json"]  # 22.05 ignores -u/-t: every job, ended ones for MinJobAge
PARTITIONS = ["scontrol", "show", "partition", "--oneliner"]  # no JSON for partitions in 22.05
#: 22.05's scontrol has no ``--json`` ("unrecognized option"): the text, with times as Unix seconds
#: (``SLURM_TIME_FORMAT=%s``, a strftime format), since the default ``2026-12-21T15:21:58`` is in the
#: submit host's local zone, which the portal does not know. Read with the partitions.
RESERVATIONS = ["env", "SLURM_TIME_FORMAT=%s", "scontrol", "show", "reservation", "--oneliner"]


def poll(gateway, *, previous=None, now: float, probe: dict | None = None) -> PollReading:
    """One poll of a 22.05 cluster: ``sinfo --json`` (``probe`` when already fetched), ``squeue
    --json``, and ``scontrol show partition --oneliner`` with ``scontrol show reservation
    --oneliner`` (:data:`RESERVATIONS`) once per :data:`PARTITIONS_EVERY`."""
    sinfo = expect_version(VERSION, probe if probe is not None else gateway.run_json(SINFO), SINFO)
    squeue = expect_version(VERSION, gateway.run_json(SQUEUE, decode=squeue_decoder(SQUEUE)), SQUEUE)
    same = previous is not None and previous.output_version in ("", VERSION)  # after a version change: read again
    partitions, partitions_at = (previous.partitions, previous.partitions_at) if same else ([], 0.0)
    reservations = list(getattr(previous, "reservations", None) or []) if same else []
    if not partitions or now - partitions_at >= PARTITIONS_EVERY:
        partitions, partitions_at = parse_partitions(gateway.run(PARTITIONS).out), now
        reservations = parse_reservations(gateway.run(RESERVATIONS).out)
    return PollReading(
        slurm_version=str(sinfo.get("meta", {}).get("Slurm", {}).get("release", "")),
        output_version=VERSION,
        nodes=parse_nodes(sinfo),
        partitions=partitions,
        partitions_at=partitions_at,
        jobs=parse_jobs(squeue, consume=True),  # the poll's own document: its structs go as read
        reservations=reservations,
    )


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
                gpus=parse_gpus(raw.get("gres")),
                gpus_used=parse_gpus(raw.get("gres_used")),
                reason=raw.get("reason") or "",
                **reason_extras(raw),
            )
        )
    return nodes


def reason_extras(raw: dict) -> dict:
    """Who set a node's reason and when (``reason_set_by_user``, ``reason_changed_at``: 22.05 a
    string or null and an int, 23.11+ a string and a ``{set, number}`` object; 0 = never)."""
    return {
        "reason_set_by": _text(raw.get("reason_set_by_user")),
        "reason_changed_at": parse_timestamp(raw.get("reason_changed_at")),
    }


def _limit(text: str | None) -> int | None:
    """``UNLIMITED`` / ``N/A`` / missing -> ``None``, else the number."""
    value = (text or "").strip()
    return int(value) if value.isdigit() else None


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
                nodes=tuple(expand_nodes(nodes)),
                max_time=parse_time_limit(fields.get("MaxTime", "UNLIMITED")),
                default_time=parse_time_limit(fields.get("DefaultTime", "NONE")),
                is_default=fields.get("Default", "NO").upper() == "YES",
                qos="" if fields.get("QoS", "N/A") in ("N/A", "(null)") else fields["QoS"],
                max_nodes=_limit(fields.get("MaxNodes")),
                allow_accounts=fields.get("AllowAccounts", "ALL"),
                allow_groups=fields.get("AllowGroups", "ALL"),
                allow_qos=fields.get("AllowQos", "ALL"),
                priority_tier=_limit(fields.get("PriorityTier", "1")) or 0,
                total_cpus=_limit(fields.get("TotalCPUs")) or 0,
                total_nodes=_limit(fields.get("TotalNodes")) or 0,
                oversubscribe=fields.get("OverSubscribe", "NO"),
                max_mem_per_node=_limit(fields.get("MaxMemPerNode")),
                def_mem_per_node=_limit(fields.get("DefMemPerNode")),
                billing_weights=fields.get("TRESBillingWeights", ""),
            )
        )
    return partitions


def _names(text: str | None) -> tuple[str, ...]:
    """A comma list as Slurm writes it (``root,alice``) -> names; ``()`` for ``(null)``/``""``/``None``."""
    if text is None or str(text).strip() in NO_NODES:
        return ()
    return tuple(name for name in str(text).split(",") if name)


def _epoch(text: str, what: str) -> int:
    """Unix seconds from a ``StartTime=``/``EndTime=`` printed with ``SLURM_TIME_FORMAT=%s``;
    ``ValueError`` naming the field for anything else (a local time, whose zone is unknown here)."""
    value = text.strip()
    if not value.isdigit():
        raise ValueError(f"scontrol show reservation: {what}={value!r} is not Unix seconds (run with SLURM_TIME_FORMAT=%s)")
    return int(value)


def parse_reservations(oneliner: str) -> list[Reservation]:
    """Reservations from ``scontrol show reservation --oneliner`` run with ``SLURM_TIME_FORMAT=%s``
    (:data:`RESERVATIONS`): one reservation a line of ``Key=Value`` words (``ReservationName``,
    ``StartTime``, ``EndTime``, ``Nodes``, ``PartitionName``, ``Flags``, ``Users``, ``Accounts``;
    ``(null)`` for none). "No reservations in the system" (no such line) is ``[]``. Raises
    ``ValueError`` for times that are not Unix seconds or a malformed node list. Also the text of
    later releases (24.11's is the same, recorded in ``24.11/reservations/``)."""
    reservations = []
    for line in oneliner.splitlines():
        fields = dict(word.split("=", 1) for word in line.split() if "=" in word)
        if "ReservationName" not in fields:
            continue
        partition = fields.get("PartitionName", "")
        reservations.append(
            Reservation(
                name=fields["ReservationName"],
                start=_epoch(fields.get("StartTime", ""), "StartTime"),
                end=_epoch(fields.get("EndTime", ""), "EndTime"),
                nodes=tuple(expand_nodes(fields.get("Nodes"))),
                partition="" if partition in NO_NODES else partition,
                flags=tuple(f.upper() for f in _names(fields.get("Flags"))),
                users=_names(fields.get("Users")),
                accounts=_names(fields.get("Accounts")),
            )
        )
    return reservations


def parse_jobs(squeue: dict, *, consume: bool = False) -> list[QueueJob]:
    """Jobs from a ``squeue --json`` document (every job Slurm still holds, finished ones for
    ``MinJobAge`` seconds). The poll's document (:func:`.queue_decode.decode_squeue`) holds each
    job's JSON text instead of a dict, read by :func:`.queue_decode.queue_jobs` into the same records
    (:func:`job_from_dict` for a job its structs do not take)."""
    if is_raw(squeue.get("jobs")):
        return queue_jobs(squeue["jobs"], lists=False, fallback=job_from_dict, consume=consume)
    return [job_from_dict(raw) for raw in squeue.get("jobs", [])]


def job_from_dict(raw: dict) -> QueueJob:
    """One job of a ``squeue --json`` document read by ``json.loads`` (a dict) as its record."""
    alloc = parse_gpus(raw.get("tres_alloc_str"))
    return QueueJob(
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
        gpus=alloc or parse_gpus(raw.get("tres_req_str")),
        comment=raw.get("comment") or "",
        nodes=raw.get("nodes") or "",
        **dict(zip(("exit_code", "signal"), exit_or_none(raw.get("exit_code")), strict=True)),
        restart_count=number(raw.get("restart_cnt"), 0) or 0,
        reason_description=raw.get("state_description") or "",
        **queue_extras(raw),
        memory_per_node=number(raw.get("memory_per_node")),
        memory_per_cpu=number(raw.get("memory_per_cpu")),
        memory_per_gpu=parse_memory_per_gpu(raw.get("memory_per_tres")),
    )


def queue_extras(raw: dict) -> dict:
    """The fields of a ``squeue --json`` job that every version writes alike, by name (numbers plain
    in 22.05, ``{set, number}`` objects later; :func:`number` reads both): the het job component,
    CPUs, the stdout/stderr paths and working directory, the array's ``%`` limit."""
    return {
        "het_job_id": number(raw.get("het_job_id"), 0) or 0,
        "het_job_offset": number(raw.get("het_job_offset")),
        "cpus": number(raw.get("cpus"), 0) or 0,
        "stdout": _text(raw.get("standard_output")),
        "stderr": _text(raw.get("standard_error")),
        "cwd": _text(raw.get("current_working_directory")),
        "array_max_tasks": number(raw.get("array_max_tasks")) or None,
    }


def sacct_extras(raw: dict) -> dict:
    """The fields of a ``sacct --json`` job that every version writes alike, by name: the het job
    component, the tasks a never-started array record stands for (``array.task``), what was asked
    for (``required.CPUs``, ``tres.requested``), the working directory and (24.11) the stdout/stderr
    paths (``stdout_expanded``, else ``stdout``) and Slurm's ``billing`` TRES of the allocation
    (``tres.allocated``: billed units, as the partition's ``TRESBillingWeights`` weigh it)."""
    het = raw.get("het") if isinstance(raw.get("het"), dict) else {}
    array = raw.get("array") if isinstance(raw.get("array"), dict) else {}
    required = raw.get("required") if isinstance(raw.get("required"), dict) else {}
    tres = raw.get("tres") if isinstance(raw.get("tres"), dict) else {}
    return {
        "het_job_id": number(het.get("job_id"), 0) or 0,
        "het_job_offset": number(het.get("job_offset")),
        "array_tasks": _text(array.get("task")),
        "cpus": number(required.get("CPUs"), 0) or 0,
        "gpus_requested": parse_gpus(tres.get("requested")),
        "billing": tres_list_count(tres.get("allocated"), "billing"),
        "cwd": _text(raw.get("working_directory")),
        "stdout": _text(raw.get("stdout_expanded") or raw.get("stdout")),
        "stderr": _text(raw.get("stderr_expanded") or raw.get("stderr")),
    }


def parse_sacct_jobs(doc: dict) -> list[FinishedJob]:
    """Jobs from a ``sacct --json`` document (22.05 ``dbv0.0.38``; newer shapes too), one per
    ``jobs[]`` entry; steps (nested ``steps``, or entries carrying a ``step`` key) are not jobs.
    A FAILED job whose JSON says exit 0 without a signal gets ``exit_code=None``: 22.05 writes
    every normal exit as 0 (see :func:`parse_exit`), so the real code is unknown. ``ValueError``
    only when a field holds something Slurm does not write (e.g. a time limit ``"soon"``).

    A document cut short is read up to the cut, with a warning in the log: 22.05 stops writing at a
    job whose QOS has since been deleted (its record ends at ``"qos"``, with no ``state``; every later
    job is missing, sacct exits 0 and ``errors`` is empty). The jobs before the cut are right; refusing
    the whole document would stop the poller finishing any job of the batch and the outside-jobs import
    moving on (docs/clusters.md: never delete a QOS that jobs ran in)."""
    jobs, cut = sacct_read_to_cut(doc)
    if cut is not None:
        logger.warning(
            "sacct --json stopped at job %s: Slurm 22.05 cannot write a job whose QOS was deleted (sacct: "
            '"_parser_dump: failed on field qos"), so the jobs after it are missing from this read',
            cut.get("job_id"),
        )
    return [_finished_job(raw) for raw in jobs]


def _text(value: object) -> str:
    return "" if value is None else str(value)


def _finished_job(raw: dict) -> FinishedJob:
    state, state_raw = classify_state((raw.get("state") or {}).get("current"))
    exit_code, signal = parse_exit(raw.get("exit_code"))
    if state == JobState.FAILED and exit_code == 0 and not signal:
        exit_code = None
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
    """sacct's memory request as ``memory_per_node`` / ``memory_per_cpu`` (MiB). 22.05 writes one
    ``required.memory`` (the per-CPU flag taken off, so a job's ``--mem-per-cpu=1000`` on 2 CPUs reads
    1000) and its total in ``tres.requested`` (``mem`` 2000): per CPU when the total is that many
    times the number across more than one CPU, else per node. The newer keys, when written, are read
    as they are."""
    required = raw.get("required") or {}
    if "memory_per_node" in required or "memory_per_cpu" in required:
        return {
            "memory_per_node": number(required.get("memory_per_node")),
            "memory_per_cpu": number(required.get("memory_per_cpu")),
        }
    memory, cpus = number(required.get("memory")), number(required.get("CPUs"), 0) or 0
    if memory == 0 and (per_node := requested_memory_per_node(raw)):
        return {"memory_per_node": per_node}
    if not memory:
        return {}
    total = _requested(raw, "mem")
    if cpus > 1 and total == memory * cpus:
        return {"memory_per_cpu": memory}
    return {"memory_per_node": memory}


def _requested(raw: dict, kind: str) -> int | None:
    """The count of TRES ``kind`` (``mem`` in MiB, ``node``) in sacct's ``tres.requested``; ``None``: not there."""
    requested = (raw.get("tres") or {}).get("requested") or []
    return next((number(t.get("count")) for t in requested if isinstance(t, dict) and t.get("type") == kind), None)


def requested_memory_per_node(raw: dict) -> int | None:
    """The memory per node (MiB) of a sacct job whose ``required`` memory is 0: ``tres.requested``'s
    ``mem`` over its ``node`` count. Accounting keeps no per-GPU figure (no ``memory_per_tres`` in
    22.05's or 24.11's sacct JSON), and a ``--mem-per-gpu`` job's ``required`` memory is 0 per node
    (recorded: ``*/memory_per_gpu/sacct.json``, ``mem`` 6144 for 3G per GPU on 2 GPUs), so this is
    what Slurm counted on its node. ``None`` when no ``mem`` was requested."""
    memory = _requested(raw, "mem")
    return memory // max(1, _requested(raw, "node") or 1) if memory else None


# --- the key look-up (a retried submission) -------------------------------------------------------


def queue_job_by_comment(squeue: dict, comment: str) -> tuple[int, str] | None:
    """(job id, cluster) of the ``squeue --json`` job whose ``comment`` is ``comment`` (the portal's
    ``portal:<key>``); ``None`` when no job carries it. For an array the id is the array job's (what
    ``sbatch --parsable`` printed; every task carries the comment). ``cluster`` is ``""`` when not
    written."""
    for raw in squeue.get("jobs", []):
        if raw.get("comment") == comment:
            return number(raw.get("array_job_id"), 0) or int(raw["job_id"]), str(raw.get("cluster") or "")
    return None


def sacct_job_by_comment(sacct: dict, comment: str) -> tuple[int, str] | None:
    """The same from a ``sacct --json`` document, whose ``comment`` is an object (``comment.job``;
    a plain string is read too; array tasks: ``array.job_id``). A document cut short
    (:mod:`.sacct_cut`) is searched up to and in the cut record; a key not there raises
    :class:`~slurm.errors.SlurmError` (:func:`.sacct_cut.cut_short_error`): the job may be left out."""
    jobs, cut = sacct_read_to_cut(sacct)
    for raw in [*jobs, cut] if cut is not None else jobs:
        value = raw.get("comment")
        text = value.get("job") if isinstance(value, dict) else value
        if text == comment:
            array = raw.get("array") or {}
            return number(array.get("job_id"), 0) or int(raw["job_id"]), str(raw.get("cluster") or "")
    if cut is not None:
        raise cut_short_error(cut, comment)
    return None
