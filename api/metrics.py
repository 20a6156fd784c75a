"""The portal's own metrics at ``/metrics``, in Prometheus's text format, for the
site's Prometheus (and the alert rules in cluster/etc/prometheus-rules.yml):

- ``portal_snapshot_age_seconds{cluster}``: seconds since the cluster's last good poll;
- ``portal_poll_failures_total{cluster}``: polls that failed (``portal.counters``, counted by the poller);
- ``portal_jobs_pending{cluster,partition}``: pending jobs in the snapshot's queue;
- ``portal_submissions_stuck``: portal submissions waiting to be sent longer than they should
  (:func:`jobs.worker.send.jobs_stuck`);
- ``portal_submissions_total{outcome}``: portal jobs by outcome (``submitted``: Slurm took it,
  ``failed``: it could not be submitted), counted from the job rows;
- ``portal_sessions{phase}``: sessions not ended, by state (``requested``, ``starting``, ``running``);
- ``portal_notification_mails{state}``: notifications by email state (``pending``, ``sent``,
  ``failed``, ``off``), and ``portal_notification_mail_oldest_pending_seconds`` (only while one waits):
  SMTP down shows as a growing age (:func:`notifications.selectors.mail_figures`);
- ``portal_gpu_usage_age_seconds{cluster}``: seconds since the last GPU usage read that answered;
- ``portal_queue_wait_seconds{cluster,partition,quantile}``: how long the jobs pending now have
  waited (now minus squeue's ``submit_time``), the median (``0.5``) and the longest (``1``);
- ``portal_slurm_command_seconds{cluster,command}``: a summary of the wall time of every Slurm
  command the portal ran (``squeue``, ``sinfo``, ``sacct`` by the poller, ``sbatch`` per submission...;
  ``_sum`` seconds, ``_count`` calls), and ``portal_slurm_command_failures_total{cluster,command}``
  (:mod:`portal.slurm_metrics`);
- ``portal_slurm_command_throttled_total{cluster,command}``: answers refused by slurmctld's per-user
  RPC rate limit (``SlurmctldParameters=rl_enable``), and ``portal_slurm_command_retries_total``: the
  attempts the gateway resent after its back-off (docs/clusters.md, "Slurm's RPC rate limit"; goal 0).

Everything is read when scraped, from the cache and PostgreSQL (no per-process state, so any number
of gunicorn workers answer the same). Not public: only ``PORTAL_METRICS_ALLOW`` addresses asking
directly (no ``X-Forwarded-For``: a request through the site's proxy is not local), or a request with
``Authorization: Bearer <PORTAL_METRICS_TOKEN>``; anything else is a 403 saying how to get in.
"""

from __future__ import annotations

import hmac
import statistics
import time
from collections import Counter

from django.conf import settings
from django.db.models import Count
from django.http import HttpRequest, HttpResponse
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, SummaryMetricFamily

from gpuusage.store import usages_load
from interactive.models import ACTIVE_SESSION_STATES, Session
from jobs.models import Job, JobOrigin
from jobs.worker.send import jobs_stuck
from notifications.selectors import mail_figures
from portal.counters import counters
from portal.slurm_metrics import slurm_command_figures, slurm_rate_limit_figures
from slurm.clusters import cluster_names
from slurm.snapshot import snapshots_load
from slurm.states import JobState


def metrics_allowed(request: HttpRequest) -> bool:
    """Whether ``request`` may read /metrics (the token, or an allowed address asking directly)."""
    token = settings.PORTAL_METRICS_TOKEN
    header = request.headers.get("Authorization", "")
    if token and header.startswith("Bearer ") and hmac.compare_digest(header[7:].strip(), token):
        return True
    direct = "X-Forwarded-For" not in request.headers and "Forwarded" not in request.headers
    return direct and request.META.get("REMOTE_ADDR", "") in settings.PORTAL_METRICS_ALLOW


def _queue_families(names: list[str], snapshots: dict, now: float):
    """``portal_snapshot_age_seconds`` (seconds since each cluster's last good poll, the snapshot's
    ``taken_at``) and ``portal_jobs_pending`` (pending jobs per cluster and partition in the
    snapshot's queue); a cluster with no snapshot has neither."""
    age = GaugeMetricFamily("portal_snapshot_age_seconds", "Seconds since the last good poll", labels=["cluster"])
    pending = GaugeMetricFamily("portal_jobs_pending", "Pending jobs in the queue", labels=["cluster", "partition"])
    for name in names:
        snapshot = snapshots.get(name)
        if snapshot is None or not snapshot.taken_at:
            continue
        age.add_metric([name], max(0.0, now - snapshot.taken_at))
        by_partition = Counter(j.partition for j in snapshot.jobs if j.state == JobState.PENDING)
        for partition, count in sorted(by_partition.items()):
            pending.add_metric([name, partition], count)
    yield age
    yield pending


def _queue_wait_family(names: list[str], snapshots: dict, now: float) -> GaugeMetricFamily:
    """``portal_queue_wait_seconds``: how long the jobs pending now have waited (``now`` minus
    squeue's ``submit_time``, seconds), the median (quantile ``0.5``) and longest (``1``) per cluster
    and partition."""
    waits = GaugeMetricFamily(
        "portal_queue_wait_seconds",
        "How long the jobs pending now have waited: median (quantile 0.5) and longest (1)",
        labels=["cluster", "partition", "quantile"],
    )
    for name in names:
        snapshot = snapshots.get(name)
        by_partition: dict[str, list[float]] = {}
        for j in snapshot.jobs if snapshot else []:
            if j.state == JobState.PENDING and j.submit_time:
                by_partition.setdefault(j.partition, []).append(max(0.0, now - j.submit_time))
        for partition, values in sorted(by_partition.items()):
            waits.add_metric([name, partition, "0.5"], statistics.median(values))
            waits.add_metric([name, partition, "1"], max(values))
    return waits


def _slurm_command_families():
    """``portal_slurm_command_seconds`` (a summary: calls and seconds) and
    ``portal_slurm_command_failures_total`` per cluster and command, from
    :func:`portal.slurm_metrics.slurm_command_figures`."""
    latency = SummaryMetricFamily(
        "portal_slurm_command_seconds", "Wall time of the Slurm commands the portal ran", labels=["cluster", "command"]
    )
    command_failures = CounterMetricFamily(
        "portal_slurm_command_failures", "Slurm commands that did not run or exited non-zero", labels=["cluster", "command"]
    )
    for (cluster, command), (calls, seconds, failed) in sorted(slurm_command_figures().items()):
        latency.add_metric([cluster, command], count_value=calls, sum_value=seconds)
        command_failures.add_metric([cluster, command], failed)
    yield latency
    yield command_failures


def _rate_limit_families():
    """``portal_slurm_command_throttled_total`` and ``portal_slurm_command_retries_total`` per
    cluster and command, from :func:`portal.slurm_metrics.slurm_rate_limit_figures`."""
    throttled = CounterMetricFamily(
        "portal_slurm_command_throttled",
        "Slurm answers refused by slurmctld's per-user RPC rate limit",
        labels=["cluster", "command"],
    )
    retries = CounterMetricFamily(
        "portal_slurm_command_retries",
        "Slurm commands resent after a rate-limit back-off",
        labels=["cluster", "command"],
    )
    for (cluster, command), (refused, resent) in sorted(slurm_rate_limit_figures().items()):
        throttled.add_metric([cluster, command], refused)
        retries.add_metric([cluster, command], resent)
    yield throttled
    yield retries


def _poll_failure_family(names: list[str]) -> CounterMetricFamily:
    """``portal_poll_failures_total`` per cluster, from the ``poll_failures`` counters (0 for a
    cluster never counted)."""
    failures = CounterMetricFamily("portal_poll_failures", "Snapshot polls that failed", labels=["cluster"])
    counted = counters("poll_failures")
    for name in names:
        failures.add_metric([name], counted.get(name, 0))
    return failures


def _gpu_usage_age_family(names: list[str], now: float) -> GaugeMetricFamily:
    """``portal_gpu_usage_age_seconds`` per cluster: seconds since the stored GPU usage's
    ``read_at``; a cluster with no usage read that answered has none."""
    usage_age = GaugeMetricFamily(
        "portal_gpu_usage_age_seconds", "Seconds since the last GPU usage read that answered", labels=["cluster"]
    )
    for name, usage in usages_load(names).items():
        if usage is not None and usage.read_at:
            usage_age.add_metric([name], max(0.0, now - usage.read_at))
    return usage_age


def _submission_families():
    """``portal_submissions_stuck`` (:func:`jobs.worker.send.jobs_stuck`) and
    ``portal_submissions_total{outcome}``, counted from the portal's job rows."""
    yield GaugeMetricFamily("portal_submissions_stuck", "Portal submissions waiting to be sent too long", value=len(jobs_stuck()))
    outcomes = CounterMetricFamily("portal_submissions", "Portal job submissions by outcome", labels=["outcome"])
    portal_jobs = Job.objects.filter(origin=JobOrigin.PORTAL)
    outcomes.add_metric(["submitted"], portal_jobs.filter(slurm_job_id__isnull=False).count())
    outcomes.add_metric(["failed"], portal_jobs.filter(state=JobState.SUBMIT_FAILED).count())
    yield outcomes


def _session_family() -> GaugeMetricFamily:
    """``portal_sessions{phase}``: sessions not ended, by state (0 for a state with none)."""
    sessions = GaugeMetricFamily("portal_sessions", "Sessions not ended, by phase", labels=["phase"])
    found = dict(Session.objects.filter(state__in=ACTIVE_SESSION_STATES).values_list("state").annotate(n=Count("id")).order_by())
    for state in ACTIVE_SESSION_STATES:
        sessions.add_metric([state.label], found.get(state, 0))
    return sessions


def _mail_families():
    """``portal_notification_mails{state}`` and, only while a mail waits,
    ``portal_notification_mail_oldest_pending_seconds``, from
    :func:`notifications.selectors.mail_figures`."""
    counts, oldest = mail_figures()
    mails = GaugeMetricFamily("portal_notification_mails", "Notifications by email state", labels=["state"])
    for state, n in counts.items():
        mails.add_metric([state], n)
    yield mails
    if oldest is not None:
        yield GaugeMetricFamily(
            "portal_notification_mail_oldest_pending_seconds",
            "Age of the oldest notification mail not sent yet",
            value=oldest,
        )


class PortalCollector:
    """Builds every metric family at scrape time."""

    def collect(self):
        """Every family of the module's list, in that order, read now (generated: each source is
        read when its families are reached)."""
        now = time.time()
        names = cluster_names()
        snapshots = snapshots_load(names, with_jobs=True)
        yield from _queue_families(names, snapshots, now)
        yield _queue_wait_family(names, snapshots, now)
        yield from _slurm_command_families()
        yield from _rate_limit_families()
        yield _poll_failure_family(names)
        yield _gpu_usage_age_family(names, now)
        yield from _submission_families()
        yield _session_family()
        yield from _mail_families()


def metrics_view(request: HttpRequest) -> HttpResponse:
    """``GET /metrics``: the text format (403 unless :func:`metrics_allowed`)."""
    if not metrics_allowed(request):
        return HttpResponse(
            "Forbidden: /metrics is for the site's Prometheus. Ask from an address in PORTAL_METRICS_ALLOW "
            "(directly, not through the proxy) or send Authorization: Bearer <PORTAL_METRICS_TOKEN>.\n",
            status=403,
            content_type="text/plain; charset=utf-8",
        )
    registry = CollectorRegistry(auto_describe=False)
    registry.register(PortalCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
