"""Sessions as the portal knows them. JupyterHub owns the server and Slurm the job; this row keeps
what was asked for, the key the Slurm job carries (``--comment=portal:<key>``) and why a session
ended, so that the sessions page can say it after the hub has forgotten the server."""

from __future__ import annotations

import uuid

from django.conf import settings
from django.db import models

from slurm.clusters import default_sessions_cluster

from .kinds import kind_label


class SessionState(models.TextChoices):
    REQUESTED = "REQUESTED", "requested"  # row written, hub not yet asked / job not yet submitted
    STARTING = "STARTING", "starting"  # the hub's spawner submitted the job
    RUNNING = "RUNNING", "running"  # the hub says the server is ready
    STOPPED = "STOPPED", "stopped"
    FAILED = "FAILED", "failed"


ACTIVE_SESSION_STATES = (SessionState.REQUESTED, SessionState.STARTING, SessionState.RUNNING)


class SessionPhase(models.TextChoices):
    """What a session's card says it is doing, from the row, the hub and the snapshot (not stored).
    The label is what the card and the API's explanation say for it."""

    QUEUED = "queued", "queued"  # its Slurm job is pending
    STARTING = "starting", "starting"  # the job runs (or the hub has not said more); the server is not ready yet
    RUNNING = "running", "running"  # the hub says the server is ready
    ENDED = "ended", "ended"  # stopped or failed
    UNKNOWN = "unknown", "state unknown (JupyterHub unreachable)"


class Session(models.Model):
    """One start of a JupyterHub named server. ``memory_mb`` MiB, ``time_limit_min`` minutes;
    ``server_name`` the hub's named server; ``message`` why it stopped or failed, in plain words;
    ``give_up_at`` when the hub's spawner gives up if the session's Slurm job has not started by
    then (set by the spawn check: now + ``PORTAL_SESSION_MAX_QUEUE_MINUTES``; None before);
    ``last_input_at`` a person's last input in the session (kernel execution, terminal keystrokes, a
    save, the VS Code window in use: see :mod:`interactive.kinds`), and ``activity_reported_at`` when
    the hub's spawner last reported it (None: never; the idle limit needs a fresh report);
    ``gpu_seen_at`` the last GPU-usage read that had figures of its GPUs, ``gpu_low_since`` since
    when every such read has had them below ``PORTAL_GPU_LOW_USE_PERCENT`` SM activity (None: not
    low at the last look, or not measured), ``gpu_busy_at`` the last read that had them at or above
    it (:mod:`interactive.gpu_idle`); ``cluster`` the portal's cluster (:mod:`slurm.clusters`) its
    Slurm job runs on, ``slurm_job_id`` that job's id (sbatch's answer, through the cluster's
    gateway: :mod:`interactive.job.send`) and ``submitted_at`` when it was sent (None before)."""

    key = models.UUIDField(default=uuid.uuid4, unique=True, editable=False)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="ide_sessions")
    server_name = models.CharField(max_length=64)
    ide = models.CharField(max_length=16)  # a session kind's name (interactive.kinds)
    account = models.CharField(max_length=64, blank=True, default="")
    partition = models.CharField(max_length=64)
    gpu_type = models.CharField(max_length=64, blank=True, default="")
    gpu_count = models.PositiveSmallIntegerField(default=0)
    cpus = models.PositiveSmallIntegerField(default=1)
    memory_mb = models.PositiveIntegerField()
    time_limit_min = models.PositiveIntegerField()
    #: The site image the single-user server runs in (``images.Image.name`` when it started; "" = the
    #: node's own system), shown on the card and in the API.
    image_name = models.CharField(max_length=64, blank=True, default="")
    state = models.CharField(max_length=16, choices=SessionState.choices, default=SessionState.REQUESTED)
    message = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    started_at = models.DateTimeField(null=True, blank=True)
    give_up_at = models.DateTimeField(null=True, blank=True)
    last_input_at = models.DateTimeField(null=True, blank=True)
    activity_reported_at = models.DateTimeField(null=True, blank=True)
    gpu_seen_at = models.DateTimeField(null=True, blank=True)
    gpu_low_since = models.DateTimeField(null=True, blank=True)
    gpu_busy_at = models.DateTimeField(null=True, blank=True)
    ended_at = models.DateTimeField(null=True, blank=True)
    cluster = models.CharField(max_length=64, blank=True, default="")
    slurm_job_id = models.PositiveBigIntegerField(null=True, blank=True)
    submitted_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        indexes = [models.Index(fields=["user", "state"]), models.Index(fields=["user", "server_name"])]

    def __str__(self) -> str:
        return f"{self.user} {self.server_name} ({self.state})"

    @property
    def is_active(self) -> bool:
        return self.state in ACTIVE_SESSION_STATES

    @property
    def failed(self) -> bool:
        return self.state == SessionState.FAILED

    @property
    def on_cluster(self) -> str:
        """The portal's name of the cluster this session runs on: ``cluster``, chosen when it was
        started (a row from before the portal recorded it, blank: the default session cluster,
        :func:`slurm.clusters.default_sessions_cluster`, where such sessions ran). What acts on an
        existing session (its job, cards, idle limits, bundle) asks this, never the default."""
        return self.cluster or default_sessions_cluster().name

    @property
    def ide_label(self) -> str:
        """The kind's label (the registry's), e.g. "JupyterLab"."""
        return kind_label(self.ide)
