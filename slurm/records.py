"""Plain records parsed from Slurm's JSON; what the snapshot stores (as dicts) and pages read."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import msgspec

if TYPE_CHECKING:
    from .states import JobState


#: sinfo base states in which a node takes no new work.
UNAVAILABLE_NODE_STATES = frozenset({"down", "drained", "unknown", "future", "fail", "error"})
#: sinfo ``state_flags`` that keep a node from taking new work (DRAIN on an idle or mixed node is
#: drained or draining; MAINTENANCE/RESERVED: held by a reservation such as a maintenance window).
UNAVAILABLE_NODE_FLAGS = frozenset(
    {
        "DRAIN",
        "DRAINING",
        "DRAINED",
        "NOT_RESPONDING",
        "MAINTENANCE",
        "RESERVED",
        "FAIL",
        "REBOOT_REQUESTED",
        "REBOOT_ISSUED",
        "POWERED_DOWN",
        "POWERING_DOWN",
        "POWER_DOWN",
        "POWERING_UP",
        "INVALID_REG",
    }
)


class Node(msgspec.Struct, frozen=True, gc=False):
    """One node from ``nodes[]`` of ``sinfo --json`` (22.05) or ``scontrol show node --json`` (23.11+,
    whose sinfo has no per-node entries). ``gpus``/``gpus_used``: GPU type -> count, from the ``gres``
    and ``gres_used`` strings (``gpu:a100:4``, ``gpu:a100:1(IDX:0)``); memory in MiB (``real_memory``,
    ``alloc_memory``); ``state`` the base state lower-cased (``idle``, ``mixed``, ``allocated``,
    ``down``...), ``flags`` e.g. ``["DRAIN"]`` (22.05's ``state_flags``; 23.11+: the state list after
    its first element, e.g. ``["PLANNED"]``, ``["NOT_RESPONDING"]``).

    A frozen msgspec struct rather than a dataclass, so that a page's first read after a poll makes
    a 5,000-node cluster's records in C from the stored rows (:func:`slurm.record_pack.nodes_unpack`)
    and the garbage collector never tracks them (``gc=False``: a node holds only text, numbers,
    tuples of text and dicts of text to numbers, so it is never in a cycle): ~1 ms against ~5 ms for
    the pickled field dicts made dataclasses and their collection after (bench/snapshot_size.py).
    Keyword or positional construction, equality by fields and ``repr`` are as a dataclass's; a copy
    with changes is ``msgspec.structs.replace(node, ...)``, its fields ``Node.__struct_fields__``."""

    name: str
    state: str
    flags: tuple[str, ...]
    partitions: tuple[str, ...]
    cpus: int
    alloc_cpus: int
    real_memory: int
    alloc_memory: int
    gpus: dict[str, int] = msgspec.field(default_factory=dict)
    gpus_used: dict[str, int] = msgspec.field(default_factory=dict)
    reason: str = ""
    #: Who set ``reason`` (``reason_set_by_user``: the Unix user who drained it, ``root`` or the
    #: service user; ``slurm`` for one Slurm set itself, e.g. "Not responding") and when
    #: (``reason_changed_at``, Unix seconds; ``None`` when there is no reason).
    reason_set_by: str = ""
    reason_changed_at: int | None = None

    @property
    def available(self) -> bool:
        """True only when the node responds and is neither down, drained or draining, rebooting,
        powered down (or powering up or down), failing, nor reserved (maintenance): a node that can
        take new work now. From sinfo's base ``state`` and its ``state_flags``."""
        return self.state not in UNAVAILABLE_NODE_STATES and not (UNAVAILABLE_NODE_FLAGS & set(self.flags))

    @property
    def state_text(self) -> str:
        """The state as Slurm shows it: base state and flags, ``IDLE+DRAIN``, ``MIXED+DRAIN``,
        ``DOWN+NOT_RESPONDING``."""
        return "+".join([self.state.upper(), *self.flags])


@dataclass(frozen=True)
class Partition:
    """One partition from ``scontrol show partition --oneliner``. Times in seconds (``None`` =
    unlimited); ``nodes`` expanded with python-hostlist."""

    name: str
    state: str
    nodes: tuple[str, ...]
    max_time: int | None
    default_time: int | None
    is_default: bool = False
    #: The limits the cluster page shows, as the text writes them: ``QoS`` (the partition QOS, ``""``
    #: for ``N/A``), ``MaxNodes`` (``None`` = UNLIMITED), ``AllowAccounts`` / ``AllowGroups`` /
    #: ``AllowQos`` (``ALL`` or a comma list), ``PriorityTier``, ``TotalCPUs``, ``TotalNodes``,
    #: ``OverSubscribe`` (``NO``, ``YES:4``, ``FORCE:1``...), ``MaxMemPerNode`` / ``DefMemPerNode``
    #: (MiB, ``None`` = UNLIMITED).
    qos: str = ""
    max_nodes: int | None = None
    allow_accounts: str = "ALL"
    allow_groups: str = "ALL"
    allow_qos: str = "ALL"
    priority_tier: int = 1
    total_cpus: int = 0
    total_nodes: int = 0
    oversubscribe: str = "NO"
    max_mem_per_node: int | None = None
    def_mem_per_node: int | None = None
    #: ``TRESBillingWeights`` as the text writes it (``CPU=0.5,Mem=0.25G,GRES/gpu:a100=4.0``; read by
    #: :func:`slurm.tres.parse_billing_weights`); ``""`` when the partition has none (Slurm then bills
    #: the allocated CPUs).
    billing_weights: str = ""


@dataclass(frozen=True)
class Reservation:
    """One reservation from ``scontrol show reservation`` (23.11+: ``--json``, ``reservations[]``;
    22.05, which has no JSON for it: ``--oneliner`` text with ``SLURM_TIME_FORMAT=%s``). ``start`` /
    ``end``: Unix seconds (``start_time``/``end_time``, ``StartTime``/``EndTime``); ``nodes`` expanded
    with python-hostlist (``node_list``/``Nodes``; ``()`` for none); ``partition`` ``""`` when none
    (``partition``/``PartitionName``, ``(null)``); ``flags`` upper-case as Slurm writes them
    (``("MAINT", "IGNORE_JOBS", "SPEC_NODES")``); ``users``/``accounts`` the names allowed in it
    (``users``/``Users``, ``accounts``/``Accounts``: comma lists; ``()`` for none)."""

    name: str
    start: int
    end: int
    nodes: tuple[str, ...]
    partition: str = ""
    flags: tuple[str, ...] = ()
    users: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()

    @property
    def maintenance(self) -> bool:
        """True for a maintenance reservation (``MAINT`` in its flags: Slurm counts its nodes as in
        maintenance, not as reserved for work, and accounts them so)."""
        return "MAINT" in self.flags

    @property
    def ignores_jobs(self) -> bool:
        """True when made with ``IGNORE_JOBS`` (it was allowed to overlap jobs already running)."""
        return "IGNORE_JOBS" in self.flags

    def active(self, now: float) -> bool:
        """True when ``start <= now < end`` (Unix seconds)."""
        return self.start <= now < self.end

    def to_dict(self) -> dict:
        """Plain data for the cache (what :meth:`from_dict` reads)."""
        return dict(vars(self))

    @classmethod
    def from_dict(cls, data: dict) -> Reservation:
        """The record from :meth:`to_dict`'s data (lists, as the cache returns them, made tuples)."""
        return cls(
            **{
                **data,
                **{key: tuple(data.get(key) or ()) for key in ("nodes", "flags", "users", "accounts")},
            }
        )


class QueueJob(msgspec.Struct, frozen=True, gc=False, array_like=True):
    """One job from ``squeue --json`` ``jobs[]``. Times are Unix seconds (``start_time`` 0 = no
    estimate), ``time_limit`` in minutes (``None`` = unlimited), ``gpus`` GPU type -> count for the
    whole job from ``tres_alloc_str`` when allocated, else ``tres_req_str`` (type ``""`` when the
    request named no type).

    A frozen msgspec struct rather than a dataclass, as :class:`Node` is, so that the garbage
    collector never tracks the poll's records (``gc=False``: a job holds only text, numbers and a
    dict of text to numbers, so it is never in a cycle). A 100,000-job poll made 200,000 tracked
    objects (each record and its ``__dict__``), which the collector's young passes walked after
    every poll, some 0.2 s of CPU (bench/snapshot_size.py). ``array_like``: msgpack writes a record
    as the row of its values in field order, so the stored queue is packed and read back in C
    (:func:`slurm.record_pack.jobs_pack`). Keyword or positional construction, equality by fields
    and ``repr`` are as a dataclass's; a copy with changes is ``msgspec.structs.replace(job, ...)``,
    its fields ``QueueJob.__struct_fields__``, its values ``msgspec.structs.asdict(job)``."""

    job_id: int
    array_job_id: int
    array_task_id: int | None
    array_task_string: str
    name: str
    user: str
    account: str
    partition: str
    state: str
    reason: str
    priority: int
    submit_time: int
    start_time: int
    end_time: int
    time_limit: int | None
    gpus: dict[str, int]
    comment: str
    nodes: str
    #: From squeue's raw ``exit_code`` wait status (kept ~MinJobAge after the end); ``None`` = not set.
    exit_code: int | None = None
    signal: int | None = None
    #: How often Slurm started the job again (``restart_cnt``: requeued by an admin, after a node
    #: failure or a preemption); 0 for a job on its first run.
    restart_count: int = 0
    #: Slurm's own sentence about why it waits (``state_description``), which can say more than the
    #: reason code: ``Resources`` with "Nodes required for job are DOWN, DRAINED or reserved ...".
    reason_description: str = ""
    #: The memory Slurm holds for the job, in MiB: per node (``memory_per_node``, ``--mem``) or per
    #: CPU (``memory_per_cpu``, ``--mem-per-cpu``, also a ``DefMemPerCPU`` default); the other is
    #: ``None`` (23.11+: ``{"set": false}``), both ``None`` when neither is written.
    memory_per_node: int | None = None
    memory_per_cpu: int | None = None
    #: Per GPU (``--mem-per-gpu``), from ``memory_per_tres`` (``gres:gpu:8192`` in 22.05,
    #: ``gres/gpu:8192`` in 24.11; :func:`slurm.tres.parse_memory_per_gpu`); ``None``: not asked so.
    memory_per_gpu: int | None = None
    #: A heterogeneous job's component: ``het_job_id`` the leader's job id (0: not a het job) and
    #: ``het_job_offset`` the component (0, 1, ...).
    het_job_id: int = 0
    het_job_offset: int | None = None
    #: CPUs of the whole job (``cpus``).
    cpus: int = 0
    #: The stdout/stderr paths as the record writes them (``standard_output``/``standard_error``:
    #: 22.05 the pattern as given or ``""``, 24.11 expanded; :func:`slurm.paths.output_path`) and the
    #: working directory (``current_working_directory``).
    stdout: str = ""
    stderr: str = ""
    cwd: str = ""
    #: An array's ``%`` limit on tasks running at once (``array_max_tasks``; ``None``/0: none).
    array_max_tasks: int | None = None


@dataclass(frozen=True)
class FinishedJob:
    """One job from ``sacct --json`` ``jobs[]`` (its ``steps`` are not read), built by its version's
    adapter's ``parse_sacct_jobs`` (:mod:`slurm.adapters`).

    ``state`` is a :class:`slurm.states.JobState` from ``state.current`` and ``state_raw`` that text as
    Slurm wrote it; ``exit_code``/``signal`` from ``exit_code`` (``None`` = not reported); ``elapsed``
    in seconds (``time.elapsed``); ``start``/``end`` Unix seconds (``None`` = never started / not
    ended); ``time_limit`` minutes (``None`` = unlimited); ``comment`` from ``comment.job`` (the
    portal key ``portal:<uuid>``); ``gpus`` GPU type -> count from ``tres.allocated`` (typed entries
    win; ``""`` when untyped); ``nodes`` the node list text (``""`` when none was assigned);
    ``cancelled_by`` the user name from ``kill_request_user`` (``""`` when nobody cancelled it);
    ``array_job_id`` 0 and ``array_task_id`` ``None`` for a job that is not an array task;
    ``submit`` Unix seconds from ``time.submission`` (``None`` = not reported)."""

    job_id: int
    array_job_id: int
    array_task_id: int | None
    name: str
    user: str
    account: str
    partition: str
    state: JobState
    state_raw: str
    exit_code: int | None
    signal: int | None
    elapsed: int
    start: int | None
    end: int | None
    time_limit: int | None
    comment: str
    nodes: str
    gpus: dict[str, int] = field(default_factory=dict)
    cancelled_by: str = ""
    submit: int | None = None
    #: As :attr:`QueueJob.memory_per_node` / ``memory_per_cpu`` (MiB), from sacct's ``required``
    #: (23.11+: ``memory_per_node`` / ``memory_per_cpu``; 22.05 writes one ``memory`` and the adapter
    #: tells which from the job's requested TRES).
    memory_per_node: int | None = None
    memory_per_cpu: int | None = None
    #: A heterogeneous job's component (``het.job_id``, ``het.job_offset``; 0 / ``None``: not one).
    het_job_id: int = 0
    het_job_offset: int | None = None
    #: The tasks one record stands for when they never ran as tasks of their own (an array cancelled
    #: while pending: ``array.task``, range text or 22.05's hex bitmap ``0x7FE``); ``""`` otherwise.
    array_tasks: str = ""
    #: What was asked for (``required.CPUs``, GPUs from ``tres.requested``), the working directory
    #: and the stdout/stderr paths (24.11: ``stdout_expanded``; 22.05's sacct has none).
    cpus: int = 0
    gpus_requested: dict[str, int] = field(default_factory=dict)
    cwd: str = ""
    stdout: str = ""
    stderr: str = ""
    #: Slurm's ``billing`` TRES of the allocation (``tres.allocated``): billed units per hour of run,
    #: the sum of the allocated TRES weighed by the partition's ``TRESBillingWeights`` (with no
    #: weights, the CPU count); ``None`` when accounting has none (a job never allocated).
    billing: int | None = None

    @property
    def gpu_hours(self) -> float:
        """Allocated GPUs (all types together) x ``elapsed`` / 3600."""
        return sum(self.gpus.values()) * self.elapsed / 3600

    @property
    def billed_unit_minutes(self) -> float | None:
        """``billing`` x ``elapsed`` / 60: the billed unit-minutes Slurm charges the job's association
        (its ``billing`` TRES-minutes, what ``GrpTRESMins=billing=N`` is counted in). 0 for a job that
        never ran; ``None`` when it ran and accounting has no ``billing``."""
        if not self.elapsed:
            return 0.0
        return None if self.billing is None else self.billing * self.elapsed / 60


def billed_unit_minutes(records) -> float | None:
    """The billed unit-minutes of a job's sacct records (an array's tasks, a het job's components,
    a requeued job's runs): the sum of each :attr:`FinishedJob.billed_unit_minutes`; ``None`` when
    one of them ran without a ``billing`` figure (never a partial sum shown as the whole)."""
    minutes = [f.billed_unit_minutes for f in records]
    return None if any(m is None for m in minutes) else sum(minutes)
