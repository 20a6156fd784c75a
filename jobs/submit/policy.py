"""Site policy (docs/decisions.md#site-policy-is-data): one object that says what may be asked for,
checked by the job form, the API (through profiles), the sessions and the JupyterHub spawner alike. Every refusal says
what was wrong and what is allowed, as a :class:`portal.refusals.Problem` named in
:class:`JobRequest`'s words (what each surface calls those fields: :mod:`jobs.submit.fields`).

Limits come from the cluster snapshot (``scontrol show partition`` MaxTime; ``sinfo`` nodes' GPUs,
CPUs and RealMemory) filtered by configuration (each cluster's ``partitions``, default
``PORTAL_PARTITIONS``). A policy is one cluster's (:meth:`SitePolicy.for_cluster`); a request names
its cluster (``JobRequest.cluster``, "" = the site's default), and a partition of another cluster is
refused naming the cluster that has it.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field

from django.conf import settings

from portal.refusals import Problem, Refused
from slurm.clusters import cluster_get, cluster_names, clusters
from slurm.snapshot import ClusterSnapshot, snapshots_load
from slurm.times import SlurmTimeError, parse_time_limit

from .classes import class_problems

#: GPU counts per job/node are powers of two (a job runs on one node in this version).
GPU_COUNTS = (1, 2, 4, 8)
MAX_SCRIPT_BYTES = 256 * 1024
MAX_NAME = 200
#: The most CPUs a job request's shape allows, on every surface (the New job form, profiles): a guard
#: against numbers no node has (a job's ``cpus`` column holds at most 32,767). Below it the policy
#: refuses what the partition's nodes cannot give, naming their own figure: a cap of 1024 once
#: answered 2000 CPUs with "at most 1024" where the node has 4.
MOST_CPUS = 4096
_SHELL_SHEBANG = re.compile(r"^#!\s*(/usr)?/bin/(env\s+)?(ba)?sh\b")
#: The refusal of a working directory with '..' or too long. A relative one is taken in the user's
#: home; an absolute one is used as written (a scratch area, a shared dataset), run as the user, so
#: the filesystem decides where they may go: the home is known only on the cluster (``getent
#: passwd``, :func:`jobs.worker.send.user_home`), which no check here asks.
WORKDIR_PATH = (
    "The working directory must be a path of at most 512 characters without '..': relative to your home directory"
    " (such as projects/digits), or a full path to a directory you can enter."
)


@dataclass(frozen=True)
class JobRequest:
    """What a researcher asks for. ``memory_mb`` in MiB, ``time_limit_min`` in minutes, ``gpu_type``
    "" for any type, ``workdir`` "" for the portal's per-job directory, else a path relative to the
    user's home or absolute (:data:`WORKDIR_PATH`), written out: ``~`` and ``$HOME`` are refused, not expanded."""

    name: str
    partition: str
    gpu_type: str
    gpu_count: int
    cpus: int
    memory_mb: int
    time_limit_min: int
    script: str
    workdir: str = ""
    account: str = ""
    #: Slurm's ``--requeue``: after a node failure or a preemption Slurm runs the job again (from the
    #: start of its script, which should resume from its checkpoint); ``False`` = ``--no-requeue``.
    requeue: bool = True
    #: The configured cluster it runs on (:mod:`slurm.clusters`); ``""``: the site's default.
    cluster: str = ""
    #: A registered image's name (:mod:`images`) to run the script in; ``""``: none, the node's own system.
    image: str = ""
    #: A priority class (:mod:`teams.priority_classes`: ``high``, ``normal``, ``scavenger``), sent as
    #: ``--qos``; ``""``: none chosen (the association's default QOS).
    priority: str = ""


@dataclass(frozen=True)
class NodeClass:
    """Nodes of one GPU type in a partition: ``gpus`` per node (max), ``cpus`` and ``memory_mb`` per
    node (max over those nodes)."""

    gpu_type: str
    gpus: int
    cpus: int
    memory_mb: int


@dataclass(frozen=True)
class PartitionPolicy:
    """What a partition allows: ``max_time_min`` (None = no limit), its node classes by GPU type
    (``""`` = nodes without GPUs); ``is_default``: Slurm's default partition (``Default=YES``, where
    sbatch sends a job that names none)."""

    name: str
    max_time_min: int | None
    default_time_min: int | None
    classes: dict[str, NodeClass] = field(default_factory=dict)
    is_default: bool = False

    @property
    def gpu_types(self) -> list[str]:
        return sorted(t for t, c in self.classes.items() if t and c.gpus)

    def gpu_counts(self, gpu_type: str) -> list[int]:
        """Allowed GPU counts for a type ("" = any type): powers of two up to the per-node maximum."""
        most = max((c.gpus for t, c in self.classes.items() if t and (not gpu_type or t == gpu_type)), default=0)
        return [n for n in GPU_COUNTS if n <= most]

    def node_limits(self, gpu_type: str, gpu_count: int) -> tuple[int, int]:
        """(max CPUs, max memory MiB) on a node that can hold this request; ``(0, 0)`` when none can.
        A GPU type without GPUs asks for no GPU: it does not narrow the nodes (a profile's
        ``gpu_type: h100`` with ``gpus_per_node: 0`` once matched no node, and its CPUs and memory
        went unchecked)."""
        fitting = [
            c
            for t, c in self.classes.items()
            if (not gpu_count or (t and c.gpus >= gpu_count)) and (not gpu_count or not gpu_type or t == gpu_type)
        ]
        return max((c.cpus for c in fitting), default=0), max((c.memory_mb for c in fitting), default=0)


@dataclass(frozen=True)
class SitePolicy:
    """The policy for one moment of one cluster (``cluster``: its configured name, "" for a policy
    built from a bare snapshot). Build it with :meth:`for_cluster` (or :meth:`from_snapshot`).
    ``elsewhere``: the other clusters' offered partitions, so a refusal can say where a partition is."""

    partitions: dict[str, PartitionPolicy]
    cluster: str = ""
    elsewhere: dict[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def for_cluster(cls, name: str | None = None) -> SitePolicy:
        """The policy of cluster ``name`` (``None``/"": the default) from the stored snapshots (one
        Redis round trip for every cluster). Raises :class:`Refused` (field ``cluster``) for a name
        that is not configured, naming those that are."""
        cluster = cluster_get(name)
        if cluster is None:
            raise Refused(unknown_cluster(name or ""))
        configured = clusters()
        snapshots = snapshots_load([c.name for c in configured])
        others = {
            c.name: tuple(cls.from_snapshot(snapshots[c.name], allowed=list(c.partitions)).partitions)
            for c in configured
            if c.name != cluster.name
        }
        own = cls.from_snapshot(snapshots[cluster.name], allowed=list(cluster.partitions))
        return cls(partitions=own.partitions, cluster=cluster.name, elsewhere=others)

    @classmethod
    def from_snapshot(cls, snapshot: ClusterSnapshot | None, *, allowed: list[str] | None = None) -> SitePolicy:
        """Partitions Slurm reports, kept to ``allowed`` (default ``settings.PORTAL_PARTITIONS``; empty
        = all), each with its nodes' GPU types and sizes."""
        allowed = settings.PORTAL_PARTITIONS if allowed is None else allowed
        if snapshot is None:
            return cls(partitions={}, cluster=snapshot.cluster if snapshot else "")
        nodes = {n.name: n for n in snapshot.nodes}
        result: dict[str, PartitionPolicy] = {}
        for part in snapshot.partitions:
            if allowed and part.name not in allowed:
                continue
            if part.state != "UP":
                continue
            classes: dict[str, NodeClass] = {}
            for name in part.nodes:
                node = nodes.get(name)
                if node is None:
                    continue
                for gtype, count in (node.gpus or {"": 0}).items():
                    old = classes.get(gtype)
                    classes[gtype] = NodeClass(
                        gtype,
                        max(count, old.gpus if old else 0),
                        max(node.cpus, old.cpus if old else 0),
                        max(node.real_memory, old.memory_mb if old else 0),
                    )
            result[part.name] = PartitionPolicy(
                name=part.name,
                max_time_min=part.max_time // 60 if part.max_time is not None else None,
                default_time_min=part.default_time // 60 if part.default_time is not None else None,
                classes=classes,
                is_default=part.is_default,
            )
        return cls(partitions=result, cluster=snapshot.cluster)

    def check(self, req: JobRequest) -> list[Problem]:
        """Every problem with ``req`` (empty = allowed), each named by a :class:`JobRequest` field."""
        errors = _check_text(req) + class_problems(req.priority, requeue=req.requeue, gpu_count=req.gpu_count)
        part = self.partitions.get(req.partition)
        if part is None:
            offered = ", ".join(sorted(self.partitions)) or "none (the cluster has not been seen yet; try again in a minute)"
            where = f" on {self.cluster}" if self.cluster and (self.elsewhere or req.cluster) else " here"
            having = sorted(name for name, parts in self.elsewhere.items() if req.partition in parts)
            hint = f" ({having[0]} has it: choose cluster {having[0]})" if having else ""
            errors.append(
                Problem("partition", f"Partition '{req.partition[:60]}' is not offered{where}{hint}. Choose one of: {offered}.")
            )
            return errors
        if req.gpu_count:
            if req.gpu_type and req.gpu_type not in part.gpu_types:
                types = ", ".join(part.gpu_types) or "none"
                errors.append(
                    Problem("gpu_type", f"Partition {part.name} has no '{req.gpu_type[:40]}' GPUs. GPU types there: {types}.")
                )
            else:
                counts = part.gpu_counts(req.gpu_type)
                label = f"{req.gpu_type} " if req.gpu_type else ""
                if req.gpu_count not in counts:
                    allowed = ", ".join(str(n) for n in [0, *counts])
                    most = counts[-1] if counts else 0
                    errors.append(
                        Problem(
                            "gpu_count",
                            f"{req.gpu_count} {label}GPUs cannot be given in {part.name}: a job there gets a power of two, at most {most} (what one node has). Allowed: {allowed}.",
                        )
                    )
        if req.time_limit_min < 1:
            errors.append(Problem("time_limit_min", "The time limit must be at least 1 minute."))
        elif part.max_time_min is not None and req.time_limit_min > part.max_time_min:
            errors.append(
                Problem(
                    "time_limit_min",
                    f"The time limit {format_minutes(req.time_limit_min)} is longer than {part.name}'s maximum of {format_minutes(part.max_time_min)}.",
                )
            )
        max_cpus, max_mem = part.node_limits(req.gpu_type, req.gpu_count)
        if max_cpus and not 1 <= req.cpus <= max_cpus:
            errors.append(Problem("cpus", f"CPUs must be between 1 and {max_cpus} (the largest suitable node in {part.name})."))
        if max_mem and not 1 <= req.memory_mb <= max_mem:
            errors.append(Problem("memory_mb", memory_over(part.name, max_mem)))
        return errors


def memory_over(partition: str, max_mib: int) -> str:
    """The refusal of memory above ``max_mib`` (MiB: the largest suitable node of ``partition``, from
    :meth:`PartitionPolicy.node_limits`, Slurm's ``RealMemory``)."""
    return f"Memory must be at most {max_mib / 1024:.1f} GB ({max_mib} MiB, the largest suitable node in {partition})."


def unknown_cluster(name: str) -> Problem:
    """The refusal of a cluster name that is not configured, naming those that are."""
    return Problem("cluster", f"Cluster '{name[:40]}' is not served by this portal. Choose one of: {', '.join(cluster_names())}.")


def _check_text(req: JobRequest) -> list[Problem]:
    errors = []
    if not req.name.strip():
        errors.append(Problem("name", "Give the job a name."))
    elif len(req.name) > MAX_NAME or any(c in req.name for c in "\r\n\x00"):
        errors.append(Problem("name", f"The name must be one line of at most {MAX_NAME} characters."))
    elif any(unicodedata.category(c) in ("Cc", "Cf") for c in req.name):
        errors.append(
            Problem("name", "The name must be plain text: no control characters, terminal escapes or invisible characters.")
        )
    if "\x00" in req.workdir or "\n" in req.workdir or "\r" in req.workdir:
        errors.append(Problem("workdir", "The working directory must be one line without control characters."))
    elif req.workdir and (".." in req.workdir.split("/") or len(req.workdir) > 512):
        errors.append(Problem("workdir", WORKDIR_PATH))
    elif req.workdir.startswith("~"):  # taken as written, it made a directory named "~" in the home directory
        relative = req.workdir[1:].lstrip("/")[:60] if req.workdir.startswith("~/") or req.workdir == "~" else None
        instead = (
            (f"write {relative} (or give a full path)" if relative else "leave it empty")
            if relative is not None
            else ("give the full path, such as /home/<user>/...")
        )
        errors.append(
            Problem(
                "workdir", f"'~' is not expanded here: a relative path is already taken in your home directory, so {instead}."
            )
        )
    elif "$" in req.workdir:  # taken as written, $HOME/proj made a directory named "$HOME" in the home directory
        errors.append(Problem("workdir", _dollar_workdir(req.workdir)))
    script = req.script
    if not script.strip():
        errors.append(Problem("script", "Paste a script or a command to run."))
    elif len(script.encode("utf-8", "surrogatepass")) > MAX_SCRIPT_BYTES or "\x00" in script:
        errors.append(Problem("script", f"The script must be text of at most {MAX_SCRIPT_BYTES // 1024} KiB."))
    else:
        lines = script.lstrip("\ufeff").splitlines()
        if lines and lines[0].startswith("#!") and not _SHELL_SHEBANG.match(lines[0]):
            errors.append(
                Problem(
                    "script",
                    f"The script must be a bash script, but its first line is '{lines[0][:60]}'. To run Python, call python3 your_file.py from bash (or embed it with a heredoc).",
                )
            )
        for number, line in enumerate(lines, 1):
            text = line.strip()
            if text and not text.startswith("#"):
                break  # sbatch reads directives only before the first command; later ones are data
            if text.startswith("#SBATCH"):
                errors.append(
                    Problem(
                        "script",
                        f"Line {number} is an #SBATCH line ('{text[:60]}'). Remove it and use the form's fields: they decide partition, GPUs, CPUs, memory and time.",
                    )
                )
                break
    return errors


def _dollar_workdir(workdir: str) -> str:
    """The refusal of a working directory holding ``$``: a variable is not expanded (``$HOME/proj`` would
    be a directory named "$HOME" in the home directory). After ``$HOME`` or ``${HOME}`` it names the
    relative path to write instead (``proj``)."""
    match = re.match(r"(\$HOME\b|\$\{HOME\})/*", workdir)
    if match is None or "$" in workdir[match.end() :]:
        return (
            "Variables and '$' are not expanded here: write the path itself, relative to your home directory"
            " (such as projects/digits) or a full path."
        )
    relative = workdir[match.end() :][:60]
    instead = (
        f"write {relative} (a path relative to your home directory) or the full path"
        if relative
        else "write the full path of your home directory, or leave it empty for the portal's per-job directory"
    )
    return f"'{match.group(1)}' is not expanded here: {instead}."


def format_minutes(minutes: int) -> str:
    """``90`` -> ``1 h 30 min``; ``2880`` -> ``2 days``."""
    days, rest = divmod(minutes, 1440)
    hours, mins = divmod(rest, 60)
    parts = [f"{days} day{'s' if days != 1 else ''}"] if days else []
    parts += [f"{hours} h"] if hours else []
    parts += [f"{mins} min"] if mins else []
    return " ".join(parts) or "0 min"


#: The time-limit forms a person may type: Slurm's own (``man sbatch --time``), read as Slurm reads them.
TIME_LIMIT_FORMS = (
    "whole minutes (90), MM:SS (90:30, minutes and seconds: 2:00 is 2 minutes), HH:MM:SS (02:00:00), "
    "D-HH (1-12), D-HH:MM (1-12:30) or D-HH:MM:SS (1-00:00:00)"
)


def time_limit_minutes(text: str) -> int:
    """A time limit as a person types it (the job form, a profile's ``resources.time_limit``, the
    API's and the CLI's overrides) -> whole minutes, seconds rounded up as Slurm does
    (``time_str2mins``). Slurm's forms (``man sbatch --time``), read strictly by
    :func:`slurm.times.parse_time_limit` (ASCII digits, fields in range). ``MM:SS`` means what it means
    to Slurm, minutes and seconds (``2:00`` is 2 minutes, ``90:30`` is 91), so a limit the portal
    accepts is the limit Slurm enforces; the forms list says so wherever it is shown. No limit
    (``0``, ``UNLIMITED``) is refused. Raises ``ValueError`` whose text is the refusal: what is wrong
    and the forms accepted. The partition's ``MaxTime`` is :meth:`SitePolicy.check`'s."""
    text = (text or "").strip()
    shown = repr(text[:20])
    try:
        seconds = parse_time_limit(text)
    except SlurmTimeError as exc:
        raise ValueError(f"{shown} is not a time limit: {exc.reason}. Write it as {TIME_LIMIT_FORMS}.") from None
    if not seconds:
        what = "An empty time limit" if not text else f"{shown} (no limit at all to Slurm)"
        raise ValueError(f"{what} cannot be asked for here. Give at least 1 minute, as {TIME_LIMIT_FORMS}.")
    return (seconds + 59) // 60
