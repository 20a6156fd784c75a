"""The API's documents (request and response bodies). Units: ``memory_mb`` MiB, ``time_limit_min``
minutes, ``elapsed_s`` seconds, GPU figures in GPU-hours; times are ISO 8601 in UTC."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from ninja import Schema
from pydantic import Field

from .base import In


class FieldErrorOut(Schema):
    field: str
    message: str
    line: int | None = None


class ErrorOut(Schema):
    detail: str
    errors: list[FieldErrorOut] = []


class MeOut(Schema):
    username: str
    teams: list[str]
    scopes: list[str]
    is_admin: bool
    token_expires_at: datetime | None = None


class FreshnessOut(Schema):
    """How old the cluster figures in this answer are, and why when they are old (the pages' notices)."""

    age_s: float | None = Field(None, description="Seconds since the poller's last good look at the cluster (None: none yet)")
    stale: bool = Field(description="True when any reason below applies or the figures are older than PORTAL_SNAPSHOT_MAX_AGE")
    reasons: list[str] = Field(
        default_factory=list,
        description="no-snapshot, snapshot-stale (the poller has not run: its worker or beat is stopped), "
        "cluster-unreachable (slurmctld or the submit host does not answer), accounting-unavailable (slurmdbd/sacct does not answer)",
    )
    since: dict[str, datetime] = Field(default_factory=dict, description="When each reason began, by reason")
    message: str = Field(description='In words: "Updated 3 s ago." or the reasons, times in UTC')


class ClusterOut(Schema):
    name: str = Field(description="What jobs, profiles (cluster:) and the CLI (--cluster) call it")
    label: str
    default: bool = Field(description="Jobs that name no cluster run here")
    sessions: bool = Field(
        description="Sessions (JupyterLab, VS Code) may run here (POST /sessions cluster); the first such is their default"
    )
    slurm_version: str = Field(description="As its last poll saw it; empty before one")
    partitions: list[str] = Field(description="Offered to jobs")
    gpu_types: list[str]
    freshness: FreshnessOut


class ClusterList(Schema):
    items: list[ClusterOut]
    count: int


class TaskCountOut(Schema):
    group: Literal["running", "pending", "completed", "failed", "cancelled", "unknown"] = Field(
        description="unknown: ended without the poller seeing how; accounting tells"
    )
    count: int
    ids: str = Field(description="The task ids, as Slurm writes them: 1-5,7")


class HetPartOut(Schema):
    offset: int = Field(description="The component: 0 for 123+0")
    job_id: int
    state: str
    partition: str = ""
    nodes: str = ""


class GpuFiguresOut(Schema):
    node: str = Field(description="The node (dcgm-exporter's Hostname label)")
    gpu: str = Field(description="The GPU's index on the node")
    model: str = ""
    sm_active_percent: float | None = Field(None, description="DCGM_FI_PROF_SM_ACTIVE × 100: share of time the SMs had work")
    dram_active_percent: float | None = Field(None, description="DCGM_FI_PROF_DRAM_ACTIVE × 100: memory bandwidth in use")
    util_percent: float | None = Field(None, description="DCGM_FI_DEV_GPU_UTIL")
    memory_used_mib: float | None = Field(None, description="DCGM_FI_DEV_FB_USED")
    memory_total_mib: float | None = Field(None, description="FB_USED + FB_FREE")
    power_w: float | None = Field(None, description="DCGM_FI_DEV_POWER_USAGE")


class GpuUsageOut(Schema):
    state: Literal["no-gpus", "not-running", "off", "not-read", "not-measured", "waiting", "not-per-task", "measured"] = Field(
        description="measured: figures in gpus; not-measured: its node has no GPU exporter (not 0 %); waiting: the "
        "exporter has not mapped its GPUs yet; off: this site does not measure GPU usage"
    )
    read_at: datetime | None = Field(None, description="When the poller read these figures from Prometheus")
    unavailable_since: datetime | None = Field(None, description="Prometheus has not answered since then (older figures)")
    low_use: str = Field("", description='The low-use flag: "4 GPUs at 3 % SM activity for the last 30 min", or ""')
    gpus: list[GpuFiguresOut] = Field(default_factory=list)


class GpuSummaryOut(Schema):
    state: Literal["pending", "measured", "not-measured"] = Field(
        description="pending: not read yet (it is read after the job ends; later while Prometheus is down)"
    )
    sm_mean_percent: float | None = Field(None, description="Mean SM activity over its GPUs and its run")
    sm_max_percent: float | None = None
    memory_peak_mib: float | None = Field(None, description="The most memory used on one of its GPUs")
    energy_wh: float | None = Field(None, description="Energy its GPUs used (DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION)")
    idle_gpu_hours: float | None = Field(None, description="GPU-hours of its GPUs below PORTAL_GPU_LOW_USE_PERCENT SM activity")


class CostOut(Schema):
    amount: float = Field(description="Billed unit-hours x the site's PORTAL_BILLING_RATE, to the cent")
    currency: str = Field(description="ISO 4217 code of PORTAL_BILLING_RATE")


class JobOut(Schema):
    key: str = Field(description="The portal's key (the Slurm job's --comment=portal:<key>)")
    id: int | None = Field(None, description="Slurm job id (None until submitted)")
    name: str
    owner: str
    cluster: str = Field(description="The cluster it runs on (GET /clusters lists them); Slurm job ids are per cluster")
    state: str = Field(description="JobState: SUBMITTING, PENDING, RUNNING, COMPLETED, FAILED, ... UNKNOWN")
    state_label: str
    final: bool
    slurm_state: str
    reason: str = Field(description="squeue state_reason while pending")
    explanation: str = Field(description="In plain words: place in line, estimated start, why it waits")
    position: int | None = Field(None, description="1-based place among pending jobs in its partition")
    in_line: int | None = None
    estimated_start: datetime | None = Field(None, description="Slurm's backfill estimate (squeue start_time)")
    partition: str
    account: str
    gpu_type: str
    gpu_count: int
    cpus: int
    memory_mb: int
    time_limit_min: int
    created_at: datetime
    submitted_at: datetime | None = None
    start_at: datetime | None = None
    end_at: datetime | None = None
    exit_code: int | None = None
    signal: int | None = None
    elapsed_s: int | None = None
    submit_error: str
    profile_id: int | None = None
    url: str
    accounting_pending: bool = Field(False, description="Ended as the queue reported it; accounting has not recorded it yet")
    origin: Literal["portal", "outside"] = Field(
        "portal", description="portal: submitted through the portal; outside: submitted outside it (sbatch in a terminal)"
    )
    kind: Literal["job", "array", "het"] = Field(
        "job", description="job, array (one entry for every task) or het (one entry for every component)"
    )
    slurm_ref: str = Field("", description="As Slurm names it: 123, 123_[1-500%20] for an array, 123+0-1 for a het job")
    tasks: list[TaskCountOut] = Field(default_factory=list, description="An array's tasks by state (empty for other jobs)")
    components: list[HetPartOut] = Field(default_factory=list, description="A het job's components (empty for other jobs)")
    gpu_summary: GpuSummaryOut | None = Field(None, description="End-of-job GPU usage (GPU jobs that ended)")
    priority_class: str = Field("", description="The priority class chosen (sent as --qos); empty: none")
    restart_count: int = Field(0, description="How often Slurm started it again (squeue restart_cnt)")
    preempted_runs: int = Field(0, description="How many of its earlier runs Slurm preempted (sacct state PREEMPTED)")
    runs: list[dict] = Field(default_factory=list, description="Earlier runs, oldest first: state, why, start, end, nodes")
    gpu_hours: float | None = Field(None, description="Allocated GPUs x run time, from accounting (null until read)")
    billed_units: float | None = Field(None, description="Slurm's billing TRES (sacct AllocTRES) x run hours (null until read)")
    cost: CostOut | None = Field(None, description="billed_units x PORTAL_BILLING_RATE; null where the site set no rate")
    image: str = Field("", description='The image it runs in (GET /images), "" for none: the node\'s own system')
    image_digest: str = Field("", description="The image's content digest when it was submitted")
    environment: str = Field("", description="Which environment the script runs in, in words")
    gpu_usage: GpuUsageOut | None = Field(None, description="GPU figures at the poller's last read (GET /jobs/{ref} only)")
    freshness: FreshnessOut | None = Field(None, description="How old the figures are (GET /jobs/{ref} only)")
    warnings: list[str] = Field(
        default_factory=list,
        description="At submission (POST /jobs) only: what will keep it from starting although it was accepted, e.g. "
        '"This job cannot start before 2026-12-03 12:00 UTC because it would run into maintenance (reservation '
        'maint_node3 on partition small); ask for at most 3 h to start now." (a maintenance reservation on every node '
        "of its partition within its time limit; Slurm holds it until then), or a per-person cap it is already at "
        '("You already use 4 of your 4 GPUs at once on cluster1: this job (1 GPU) will wait until enough of your jobs end.")',
    )


class JobList(Schema):
    """One page of jobs: ``items`` (at most ``limit``), ``count`` (on this page), ``next_cursor`` (null on the last)."""

    items: list[JobOut]
    count: int = Field(description="Jobs on this page")
    next_cursor: str | None = Field(None, description="cursor of the next page; null when this is the last page")
    warning: str = Field(
        "",
        description='"Cluster unreachable since 14:05 UTC; ..." (and/or "Accounting (slurmdbd) unavailable since ...") '
        "while the poller cannot reach Slurm (states are the last known); freshness.message in words",
    )
    freshness: FreshnessOut


class JobSubmitIn(In):
    profile_yaml: str | None = Field(None, description="A profile file's text (YAML, schema version 1; docs/profiles.md)")
    profile_id: int | None = Field(None, description="A saved profile (yours or shared with your team)")
    overrides: dict[str, Any] = Field(default_factory=dict, description='e.g. {"gpus": 4, "time_limit": "04:00:00"}')
    image: str | None = Field(
        None,
        max_length=64,
        description='A registered image to run in (a name from GET /images), or "none" for the node\'s own system; '
        "replaces the profile's image:",
    )
    filename: str | None = Field(None, max_length=255, description="Shown in error messages")


class LogOut(Schema):
    stream: Literal["out", "err"]
    offset: int
    next_offset: int
    data: str = Field(description="UTF-8 text of the bytes from offset (at most 64 KiB; never a split character)")
    missing: bool = Field(description="No file yet (the job has not started), not submitted, or where_unknown")
    final: bool = Field(description="The job has ended: once data is empty, nothing more will come")
    state: str
    error: str = ""
    where_unknown: bool = Field(
        False,
        description="The portal does not know where the job wrote this stream (submitted outside the portal, ended "
        "before the portal saw it running, on a Slurm whose accounting keeps no paths): no data will come; message says so",
    )
    message: str = Field("", description="With where_unknown: the sentence the job page shows instead of the log")
    tail: int | None = Field(
        None, description="A tail read's bytes asked for from the end (at most a page): null for a read from an offset"
    )


class ProfileOut(Schema):
    id: int
    name: str
    owner: str
    team: str | None = Field(None, description="The team it is shared with")
    version: int
    yaml: str
    spec: dict[str, Any]
    cloned_from: int | None = None
    created_at: datetime
    updated_at: datetime
    url: str


class ProfileList(Schema):
    items: list[ProfileOut]
    count: int


class ProfileIn(In):
    # Over 64 KiB is refused by profiles.document.load_yaml, in the words of the pages and POST /jobs (maxLength says so).
    yaml: str = Field(json_schema_extra={"maxLength": 65536}, description="The profile file's text")
    team: str | None = Field(
        None, max_length=64, description='Share with this team (one you are in); omit to keep, "" to stop sharing'
    )


class ProfileShareIn(In):
    team: str | None = Field(None, max_length=64, description='A team you are in; null or "" to stop sharing')


class ProfileCloneIn(In):
    name: str = Field("", max_length=200)
    overrides: dict[str, Any] = Field(default_factory=dict)


class OverridesIn(In):
    overrides: dict[str, Any] = Field(default_factory=dict)


class ValidateIn(In):
    yaml: str = Field(json_schema_extra={"maxLength": 65536})  # as ProfileIn's: a 400 past it (api.profiles)
    overrides: dict[str, Any] = Field(default_factory=dict)


class ValidateOut(Schema):
    valid: bool
    errors: list[FieldErrorOut]
    spec: dict[str, Any] | None = None
    script: str | None = Field(None, description="The job script it would run")


class QuotaOut(Schema):
    team: str = Field(description="The Slurm account (team) the job is billed to")
    cluster: str = Field(description="The cluster whose quota it is (each cluster enforces its own)")
    gpu_hours_quota: float = Field(description="The team's quota this period (sshare GrpTRESMins gres/gpu / 60)")
    gpu_hours_used: float = Field(description="Used this period (sshare GrpTRESRaw gres/gpu / 60)")
    gpu_hours_promised: float = Field(
        description="What the team's running jobs still hold: GPUs x time limit less run time "
        "(scontrol show assoc_mgr GrpTRESRunMins gres/gpu / 60)"
    )
    promised_jobs: int | None = Field(
        None, description="The team's running GPU jobs (with a billing quota: all its running jobs; None: not known)"
    )
    gpu_hours_left: float = Field(description="quota - used - promised: what a new job may take (negative when over)")
    gpu_hours_max: float = Field(description="This job's GPUs x time limit")
    will_wait: bool = Field(
        description="It does not fit: Slurm holds it (pending reason AssocGrpGRESMinutes; AssocGrpBillingMinutes for billing)"
    )
    frozen: bool = Field(description="The team's quota is 0 GPU-hours")
    fit: str = Field(description='How it would start now, e.g. "ask for at most 30 min, or 1 GPU for 60 min"; "" for none')
    taken_at: float = Field(description="When the usage figures were read (Unix seconds)")
    error_since: float | None = Field(None, description="Since when refreshing them fails (Unix seconds); None: current")
    unit: Literal["gpu", "billing"] = Field(
        "gpu",
        description='What the quota counts: "gpu" GPU-minutes (GrpTRESMins=gres/gpu) or "billing" billed unit-minutes '
        "(GrpTRESMins=billing). With billing, the billed_hours_* fields hold the figures and gpu_hours_quota/left/promised "
        "are 0; the job's billed units per minute (billing) are computed as Slurm does from its partition's "
        "TRESBillingWeights, and will_wait compares billing x time limit with what is left (without them: true only when "
        "nothing is left)",
    )
    billed_hours_used: float | None = Field(
        None, description="Used this period (sshare GrpTRESRaw billing / 60); null: GPU quota"
    )
    billed_hours_quota: float | None = Field(None, description="The quota (sshare GrpTRESMins billing / 60); null: GPU quota")
    billed_hours_promised: float = Field(
        0.0,
        description="What the team's running jobs still hold, billed unit-hours (scontrol show assoc_mgr GrpTRESRunMins "
        "billing / 60); 0 for a GPU quota or when unknown",
    )
    billed_hours_left: float | None = Field(None, description="quota - used - promised, billed unit-hours; null: GPU quota")
    billing: int | None = Field(
        None,
        description="This job's billed units per minute of run (Slurm's billing TRES: the partition's TRESBillingWeights "
        "x its CPUs, memory and GPUs, rounded down; the CPUs without weights); null: GPU quota or the partition is not "
        "known yet",
    )
    billed_hours_max: float | None = Field(None, description="billing x time limit, billed unit-hours; null as billing")
    partition: str = Field("", description='The partition whose TRESBillingWeights gave billing; "" when none')
    billing_weights: str = Field(
        "",
        description='That partition\'s TRESBillingWeights as Slurm prints them (e.g. "CPU=0.5,Mem=0.25G,GRES/gpu:a100=4.0"); "" for none',
    )
    scavenger: bool = Field(
        False, description="The job is in the scavenger class: it costs no quota and the team's quota never holds it"
    )
    offer: str = Field(
        "",
        description="When it will wait for quota and the site offers priority classes: the offer to run it as scavenger "
        '("Your team\'s GPU-hours are used up. Run as scavenger: ..."); "" otherwise. Also the sentence\'s end',
    )
    sentence: str = Field(
        description='In words, e.g. "Team vision: used 80 h, 12 h promised to 3 running jobs, 8 h left; '
        'this job needs 16 h: it will wait for quota (...)."'
    )


class ImagesQuery(Schema):
    cluster: str = Field("", description="Only this cluster's images (default: every cluster's)")
    partition: str = Field("", description="Only images this partition may use")
    session_kind: str = Field("", description="Only images holding this session kind's server (GET /sessions/kinds)")


class ImageStateOut(Schema):
    cluster: str
    available: bool = Field(description="The last check (test -r as the portal's service user) could read it there")
    checked: bool = Field(description="Checked at all; false: not checked yet on this cluster")
    reason: str = Field(description="Why it is not usable there (empty when available)")
    checked_at: datetime | None = None


class ImageOut(Schema):
    name: str = Field(description="What to give as image (POST /jobs, a profile's image:, gpuportal submit --image)")
    description: str
    os: str
    python_version: str
    cuda_version: str = Field(description="Empty: no CUDA in the image")
    runtime: Literal["charliecloud", "apptainer", "enroot"]
    path: str
    digest: str
    clusters: list[str] = Field(description="Clusters that may use it; empty: every one")
    partitions: list[str] = Field(description="Partitions that may use it; empty: every one")
    offers: list[str] = Field(description="Session kinds whose server it holds")
    states: list[ImageStateOut] = Field(description="What the last check saw on each cluster asked about")


class ImageClusterOut(Schema):
    cluster: str
    sessions: bool = Field(description="Sessions may run on it (as in GET /clusters)")
    session_none_allowed: bool = Field(
        description="A session on it may run with no image (none): none_allowed, sessions run on it, and its nodes hold "
        "the site's Jupyter venv (session_venv in the clusters file). A batch job needs no venv: it may choose none on "
        "every cluster when none_allowed is true"
    )


class ImageList(Schema):
    items: list[ImageOut]
    count: int
    none_allowed: bool = Field(
        description="The site lets a job or session choose none (the node's own system) instead of an image "
        "(PORTAL_IMAGE_NONE_ALLOWED): a batch job on any cluster; a session only where session_none_allowed is true"
    )
    clusters: list[ImageClusterOut] = Field(
        description="Where none may be chosen: the cluster asked for, else every configured one, the default first"
    )
