"""Batch jobs as the portal knows them. PostgreSQL is the source of truth for what a user asked
for (docs/decisions.md#a-request-is-a-row-before-it-is-a-slurm-job); Slurm's view is copied in by
the snapshot poller."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models
from django.utils import timezone as djtz

from portal.formats import mib_to_gb
from portal.units import memory_text
from slurm.clusters import cluster_names, default_cluster
from slurm.states import ACTIVE_STATES, FINAL_STATES, JobState

from .figures import JobFigures


def cluster_of(stored: str) -> str:
    """The configured cluster a stored ``slurm_cluster`` value names: itself when configured, else (``""`` in rows
    from before there were several clusters, or a name no longer configured) the site's default cluster."""
    return stored if stored in cluster_names() else default_cluster().name


def on_cluster(name: str) -> models.Q:
    """The Jobs of cluster ``name`` (the default cluster's include old rows, see :func:`cluster_of`)."""
    if name != default_cluster().name:
        return models.Q(slurm_cluster=name)
    return ~models.Q(slurm_cluster__in=[n for n in cluster_names() if n != name])


#: Seconds a cancel is sent again while its job stays active (jobs.tasks) and "Cancelling..." shown.
CANCEL_RETRY_S = 3600

#: The exit code of a batch script whose image is gone when the job starts (:mod:`jobs.worker.batch`).
IMAGE_GONE_EXIT = 97


def image_gone_sentence(name: str, path: str) -> str:
    """What the log and the job page say when a job's image is no longer there at its start."""
    return f"The image {name} ({path}) is no longer on the cluster: ask your admins or choose another image"


class MemoryPer(models.TextChoices):
    """What Slurm's memory figure of a job counts: ``--mem`` is per node, ``--mem-per-cpu`` (and a
    ``DefMemPerCPU`` default) per CPU, ``--mem-per-gpu`` per GPU."""

    NODE = "node", "per node"
    CPU = "cpu", "per CPU"
    GPU = "gpu", "per GPU"


def slurm_memory_fields(record) -> dict:
    """The Job fields of the memory Slurm holds for a queue or sacct record (``memory_per_gpu``,
    ``memory_per_cpu`` / ``memory_per_node``, MiB): ``{"slurm_memory_mb", "slurm_memory_per"}``,
    ``{}`` when it names none, so what was read before stays. A per-GPU figure wins (Slurm writes
    ``memory_per_node`` 0 beside it), and a per-CPU figure wins over a per-node 0 (0 per node alone
    is ``--mem=0``: all of the node's memory)."""
    if getattr(record, "memory_per_gpu", None):
        return {"slurm_memory_mb": record.memory_per_gpu, "slurm_memory_per": MemoryPer.GPU}
    if record.memory_per_cpu:
        return {"slurm_memory_mb": record.memory_per_cpu, "slurm_memory_per": MemoryPer.CPU}
    if record.memory_per_node is not None:
        return {"slurm_memory_mb": record.memory_per_node, "slurm_memory_per": MemoryPer.NODE}
    return {}


def memory_asked_mb(record) -> int:
    """The memory a queue or sacct record asked for, per node, in MiB (``Job.memory_mb`` of a row
    made from it: a job submitted outside the portal): ``memory_per_gpu`` x its GPUs (``gpus``:
    allocated, else ``gpus_requested`` where the record has it; a job on one node), else
    ``memory_per_node``, else ``memory_per_cpu`` x its CPUs (at least 1); 0 when none is set."""
    per_gpu = getattr(record, "memory_per_gpu", None)
    if per_gpu:
        gpus = record.gpus or getattr(record, "gpus_requested", None) or {}
        return int(per_gpu) * max(1, sum(gpus.values()))
    if record.memory_per_node:
        return int(record.memory_per_node)
    return int(record.memory_per_cpu) * max(1, record.cpus or 1) if record.memory_per_cpu else 0


class JobOrigin(models.TextChoices):
    """Where a job was submitted: through the portal (form, profile, API, CLI: the row came first,
    the Slurm job carries ``--comment=portal:<key>``) or outside it (``sbatch`` in a terminal: the
    poller made the row from Slurm's queue or accounting, see :mod:`jobs.worker.outside`)."""

    PORTAL = "portal", "Submitted in the portal"
    OUTSIDE = "outside", "Submitted outside the portal"


class JobKind(models.TextChoices):
    """What one row stands for: a plain job, an array job (every task of ``123_[1-500%20]``) or a
    heterogeneous job (every component ``123+0``, ``123+1``)."""

    JOB = "job", "Job"
    ARRAY = "array", "Array job"
    HET = "het", "Heterogeneous job"


class GpuSummary(models.TextChoices):
    """Whether a job's end-of-job GPU usage was read (``Job.gpu_summary``; "" = not yet)."""

    MEASURED = "measured", "measured"
    NOT_MEASURED = "not-measured", "not measured"


class Job(JobFigures, models.Model):
    """One batch job. The row (with its unique ``key``) exists before any Slurm call; the Slurm job
    carries ``--comment=portal:<key>`` so a retried submission can find it instead of submitting twice.

    Units: ``memory_mb`` MiB, ``time_limit_min`` minutes, ``elapsed_s`` seconds, ``gpu_hours`` hours
    (allocated GPUs x elapsed, from ``sacct`` ``tres.allocated``). Times are aware datetimes (UTC).
    """

    key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="jobs")
    account = models.CharField(max_length=64, blank=True, default="", help_text="Slurm account (team)")
    name = models.CharField(max_length=200)
    partition = models.CharField(max_length=64)
    gpu_type = models.CharField(max_length=64, blank=True, default="")
    gpu_count = models.PositiveSmallIntegerField(default=0)
    cpus = models.PositiveSmallIntegerField(default=1)
    memory_mb = models.PositiveIntegerField()
    time_limit_min = models.PositiveIntegerField()
    script = models.TextField()
    workdir = models.CharField(max_length=1024, blank=True, default="", help_text="--chdir, as sent")
    requeue = models.BooleanField(
        default=True, help_text="--requeue (run again after a node failure or preemption) or --no-requeue"
    )
    priority_class = models.CharField(
        max_length=20, blank=True, default="", help_text="--qos: the priority class chosen (teams.priority_classes); '' = none"
    )
    output_path = models.CharField(max_length=1024, blank=True, default="")
    error_path = models.CharField(max_length=1024, blank=True, default="")

    state = models.CharField(max_length=16, choices=JobState.choices, default=JobState.SUBMITTING)
    slurm_state = models.CharField(max_length=64, blank=True, default="", help_text="state as Slurm wrote it")
    slurm_job_id = models.BigIntegerField(null=True, blank=True)
    #: The configured cluster (slurm.clusters) it runs on; "" in rows from before there were several:
    #: the site's default cluster (:attr:`cluster`).
    slurm_cluster = models.CharField(max_length=64, blank=True, default="")
    reason = models.CharField(max_length=64, blank=True, default="", help_text="squeue state_reason")
    reason_description = models.CharField(max_length=255, blank=True, default="", help_text="squeue state_description")
    priority = models.BigIntegerField(null=True, blank=True)
    nodes = models.CharField(max_length=1024, blank=True, default="")
    submit_error = models.TextField(blank=True, default="")
    #: The profile it was submitted from (None: the form), and that profile's document as run.
    profile = models.ForeignKey("profiles.Profile", null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs")
    profile_spec = models.JSONField(default=dict, blank=True)
    #: The site image (:class:`images.models.Image`) it runs in, as it was when submitted: name, path
    #: and content digest (kept on the job: the registry row may change or go). ``""``: none, the
    #: node's own system.
    image_name = models.CharField(max_length=64, blank=True, default="")
    image_path = models.CharField(max_length=1024, blank=True, default="")
    image_digest = models.CharField(max_length=128, blank=True, default="")

    created_at = models.DateTimeField(auto_now_add=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    eligible_at = models.DateTimeField(null=True, blank=True)
    start_at = models.DateTimeField(null=True, blank=True, help_text="actual start, or the backfill estimate while pending")
    end_at = models.DateTimeField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    signal = models.IntegerField(null=True, blank=True)
    elapsed_s = models.PositiveIntegerField(null=True, blank=True)
    gpu_hours = models.FloatField(null=True, blank=True)
    #: Slurm's ``billing`` TRES x elapsed minutes (sacct ``tres.allocated``), summed over the job's records.
    billed_unit_minutes = models.FloatField(null=True, blank=True)
    status_unknown_since = models.DateTimeField(null=True, blank=True)
    #: Ended as the queue (squeue) reported it while accounting (sacct) had no final record of it yet
    #: (slurmdbd down or behind): state, exit, start and end are the controller's; ``gpu_hours`` is
    #: unknown until accounting's record replaces them (jobs.worker.sync).
    accounting_pending = models.BooleanField(default=False)
    #: Times Slurm started the job again (squeue ``restart_cnt``), and its earlier runs from sacct,
    #: oldest first: ``[{"state", "why", "start", "end", "elapsed_s", "nodes"}]`` (times ISO 8601 UTC).
    restart_count = models.PositiveSmallIntegerField(default=0)
    runs = models.JSONField(default=list, blank=True)
    #: The memory Slurm holds for the job (MiB), per node or per CPU (:class:`MemoryPer`), as the
    #: poller last read it from squeue (``memory_per_node`` / ``memory_per_cpu``), or from sacct's
    #: ``required`` for a job it never saw queued; ``None`` / ``""`` until read.
    slurm_memory_mb = models.PositiveIntegerField(null=True, blank=True)
    slurm_memory_per = models.CharField(max_length=4, choices=MemoryPer.choices, blank=True, default="")
    cancel_requested_at = models.DateTimeField(null=True, blank=True)
    tasks_cancel_requested = models.TextField(blank=True, default="")  # tasks cancelled one by one: jobs.worker.cancels
    updated_at = models.DateTimeField(auto_now=True)

    origin = models.CharField(max_length=8, choices=JobOrigin.choices, default=JobOrigin.PORTAL)
    #: Slurm's submit time of the job's first run (squeue ``submit_time``, sacct ``time.submission``):
    #: with the cluster and the job id, the identity of a job submitted outside the portal (job ids
    #: are reused; a requeue gives later runs later submit times, see :mod:`jobs.worker.identity`).
    slurm_submit_at = models.DateTimeField(null=True, blank=True)
    kind = models.CharField(max_length=8, choices=JobKind.choices, default=JobKind.JOB)
    #: An array job: its tasks as Slurm writes an array (``1-500%20``: every task id seen, and the
    #: ``%`` limit) and the task ids by state, as range text (``{"PENDING": "21-500", "RUNNING":
    #: "11-20", "COMPLETED": "1-9", "FAILED": "10"}``; ``UNKNOWN``: left the queue, accounting's
    #: outcome not read yet), from the queue and then accounting (:mod:`jobs.arrays`).
    array_spec = models.CharField(max_length=255, blank=True, default="")
    array_tasks = models.JSONField(default=dict, blank=True)
    #: An array's tasks counted by group (``{"pending": 4990, "running": 10}``: the groups of
    #: :data:`jobs.arrays.GROUPS`), written by the poller with ``array_tasks`` (:func:`jobs.arrays.array_fields`):
    #: what My jobs shows of an array, a few numbers however many tasks it has.
    array_counts = models.JSONField(default=dict, blank=True)
    #: A heterogeneous job's components, by offset: ``[{"offset", "job_id", "state", "partition",
    #: "nodes", "gpus", "cpus"}]`` (``gpus``: type -> count).
    het_parts = models.JSONField(default=list, blank=True)
    #: End-of-job GPU usage, read from Prometheus once the job has ended
    #: (:mod:`jobs.gpu.gpu_summary`): ``gpu_summary`` is "" until read (Prometheus down at the end: read
    #: later, never recorded as 0), ``measured``, or ``not-measured`` (no exporter series for it).
    #: Mean and max SM activity over its GPUs and life (percent), the highest memory used on one of
    #: its GPUs (MiB) and the energy its GPUs used (Wh, from the energy counter).
    gpu_summary = models.CharField(max_length=16, choices=GpuSummary.choices, blank=True, default="")
    gpu_sm_mean = models.FloatField(null=True, blank=True)
    gpu_sm_max = models.FloatField(null=True, blank=True)
    gpu_memory_peak_mib = models.FloatField(null=True, blank=True)
    gpu_energy_wh = models.FloatField(null=True, blank=True)
    #: Each GPU's mean SM activity over the run (percent, one per GPU series); [] in rows read before.
    gpu_sm_means = models.JSONField(default=list, blank=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [
            models.Index(fields=["user", "state"]),
            models.Index(fields=["slurm_job_id"]),
            models.Index(fields=["slurm_cluster", "slurm_job_id"], name="jobs_job_cluster_id"),
            models.Index(fields=["user", "-end_at", "-id"], name="jobs_job_user_ended"),  # History, My jobs
            models.Index(fields=["user", "-created_at", "-id"], name="jobs_job_user_created"),  # the API's pages
        ]
        # No uniqueness on (cluster, job id): Slurm reuses ids (a controller state reset, MaxJobId
        # wrapping) while older rows keep theirs. A job's identity is its ``key`` (the --comment it
        # carries) with its submit time; see jobs.worker.sync._attempts.

    def __str__(self) -> str:
        return f"{self.name} ({self.slurm_job_id or 'unsubmitted'})"

    @property
    def preempted_runs(self) -> int:
        """How many of its earlier runs (``runs``, from sacct) Slurm preempted (state PREEMPTED)."""
        return sum(1 for run in self.runs or () if run.get("state") == "PREEMPTED")

    @property
    def cluster(self) -> str:
        """The configured name of the cluster it runs on (the default cluster for an old row)."""
        return cluster_of(self.slurm_cluster)

    @property
    def memory_shown(self) -> str:
        """The job page's Memory line: what Slurm holds for it in Slurm's terms, next to what was
        asked, e.g. ``Slurm: 1000M per CPU (1 GB) · asked for 2000M``, or ``asked for 4G`` before
        the poller has read Slurm's figure. Amounts as :func:`portal.units.memory_text` writes them
        (``4G``, ``4000M``), which every memory field reads back."""
        asked = f"asked for {memory_text(self.memory_mb)}" if self.memory_mb else ""
        if self.slurm_memory_mb is None or self.slurm_memory_per not in MemoryPer.values:
            return asked or "not known"
        got = (
            "all of each node's memory (--mem=0)"
            if self.slurm_memory_mb == 0
            else f"{memory_text(self.slurm_memory_mb)} {MemoryPer(self.slurm_memory_per).label}"
            f" ({mib_to_gb(self.slurm_memory_mb)} GB)"
        )
        return f"Slurm: {got}" + (f" · {asked}" if asked else "")

    @property
    def is_cancelled_before_start(self) -> bool:
        """Cancelled while pending: Slurm reports exit 0 and no run time; there is no exit to show."""
        return self.state == JobState.CANCELLED and not self.elapsed_s

    @property
    def is_outside(self) -> bool:
        """Submitted outside the portal (``sbatch`` in a terminal): pages say so."""
        return self.origin == JobOrigin.OUTSIDE

    @property
    def is_array(self) -> bool:
        return self.kind == JobKind.ARRAY

    @property
    def is_het(self) -> bool:
        return self.kind == JobKind.HET

    @property
    def task_counts(self) -> list:
        """An array's tasks by group (running, pending, completed, failed, cancelled, unknown), as
        :func:`jobs.arrays.task_counts`; ``[]`` for a job that is not an array."""
        from .arrays import task_counts

        return task_counts(self.array_tasks) if self.is_array else []

    @property
    def task_totals(self) -> list:
        """An array's tasks by group as :attr:`task_counts` without their ids (``ids`` ""), from the
        counts the poller stored (``array_counts``, :func:`jobs.arrays.totals_shown`): no range is
        parsed. A row whose counts were never stored (written before they were) counts its
        ``array_tasks``. ``[]`` for a job that is not an array."""
        from .arrays import task_counts, totals_shown

        if not self.is_array:
            return []
        return totals_shown(self.array_counts) if self.array_counts else task_counts(self.array_tasks)

    @property
    def slurm_ref(self) -> str:
        """The job as Slurm names it: ``123``, ``123_[1-500%20]`` or ``123_[1-400:3%5]`` for an array (its
        stored ``array_spec``), ``123+0-1`` for a het job of two components; ``""`` before submission."""
        if not self.slurm_job_id:
            return ""
        if self.is_array and self.array_spec:
            return f"{self.slurm_job_id}_[{self.array_spec}]"
        if self.is_het and self.het_parts:
            return f"{self.slurm_job_id}+0-{len(self.het_parts) - 1}"
        return str(self.slurm_job_id)

    @property
    def comment(self) -> str:
        """The ``--comment`` the Slurm job carries."""
        return f"portal:{self.key}"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_STATES

    @property
    def cancelling(self) -> bool:
        """Cancel asked less than :data:`CANCEL_RETRY_S` s ago (still being sent); later it may be asked again."""
        return self.cancel_requested_at is not None and (djtz.now() - self.cancel_requested_at).total_seconds() < CANCEL_RETRY_S

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    @property
    def gpu_summary_measured(self) -> bool:
        """Its end-of-job GPU usage was read (``gpu_sm_mean`` ... are set)."""
        return self.gpu_summary == GpuSummary.MEASURED

    @property
    def gpu_summary_not_measured(self) -> bool:
        """Prometheus had no series of it: nothing to show, and not 0 %."""
        return self.gpu_summary == GpuSummary.NOT_MEASURED

    @property
    def job_state(self) -> JobState:
        return JobState(self.state)

    # Templates ask these instead of comparing state strings.
    @property
    def is_pending(self) -> bool:
        return self.state == JobState.PENDING

    @property
    def is_submitting(self) -> bool:
        return self.state == JobState.SUBMITTING

    @property
    def is_submit_failed(self) -> bool:
        return self.state == JobState.SUBMIT_FAILED

    @property
    def is_other_state(self) -> bool:
        """Slurm reported a state the portal has no name for; show ``slurm_state`` as written."""
        return self.state == JobState.OTHER

    @property
    def in_queue_phase(self) -> bool:
        """Before it runs: submitting, pending, or refused at submission."""
        return self.state in (JobState.SUBMITTING, JobState.PENDING, JobState.SUBMIT_FAILED)

    @property
    def environment_text(self) -> str:
        """Which environment the script ran in, in words: a profile's virtual environment (on top of
        the image's Python, or the node's), or the image's own packages, or the node's system."""
        env = (self.profile_spec or {}).get("environment") if isinstance(self.profile_spec, dict) else None
        base = f"the image {self.image_name}" if self.image_name else "the node's own system"
        if env:
            pip = env.get("pip") or []
            return (
                f"the virtual environment of profile {self.profile_spec.get('name', '')} (Python {env.get('python') or 'default'}, "
                f"{len(pip)} pip package{'s' if len(pip) != 1 else ''}) on top of {base}'s Python"
            )
        return base + ("'s own" if self.image_name else ", with its") + " packages (no virtual environment)"

    @property
    def image_gone(self) -> bool:
        """It failed at its start because its image was no longer on the cluster (the batch script's
        check exits :data:`IMAGE_GONE_EXIT`, :mod:`jobs.worker.batch`)."""
        return bool(self.image_name) and self.state == JobState.FAILED and self.exit_code == IMAGE_GONE_EXIT

    @property
    def end_hint(self) -> str:
        """What to do after a job ended badly, in plain words ("" when nothing to say)."""
        if self.image_gone:
            return image_gone_sentence(self.image_name, self.image_path)
        return {
            JobState.TIMEOUT: f"The job reached its time limit ({self.time_limit_min} min) and was stopped. Ask for more time, or let it resume from a checkpoint.",
            JobState.OUT_OF_MEMORY: "The job ran out of memory and was stopped. Ask for more memory.",
            JobState.NODE_FAIL: 'The node it ran on failed, and it was sent with requeue off (--no-requeue). Submit it again with "Requeue on node failure" on, so Slurm runs it again by itself next time (it resumes from its checkpoint if it writes them).',
            JobState.PREEMPTED: "Slurm stopped it to make room for more urgent work. Submit it again.",
            JobState.DEADLINE: "It could not finish before its deadline.",
            JobState.BOOT_FAIL: "The node could not be started for it. Submit it again; tell the cluster staff if it repeats.",
        }.get(self.state, "")
