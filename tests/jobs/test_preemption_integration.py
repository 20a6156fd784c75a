"""Priority classes on the real clusters (``PreemptType=preempt/qos``, ``PreemptMode=REQUEUE``): the sync
keeps the classes' QOS and grants a fresh team them; alice's scavenger job of a checkpointing script holds
every CPU of the small-job pool's node (cluster1: node3, a t4, the example examples/train_digits_job.sh;
cluster2: g2, an l40s, a bash loop with a step file, as cluster2's root has no scikit-learn); a high job of
hers needing that node preempts it; Slurm requeues it, its next run resumes from its checkpoint (its log says
"resuming from ..."), the portal's row lists the preempted run, its pages say so, and its owner is notified once."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from django.test import override_settings

from jobs.models import Job
from jobs.reads.logs import job_log_tail
from jobs.submit.policy import JobRequest, SitePolicy
from jobs.submit.submit import job_check, job_create
from jobs.worker.services import snapshot_refresh
from notifications.models import Notification, NotificationKind
from slurm import get_gateway
from slurm.clusters import cluster_names
from slurm.states import JobState
from teams.models import Membership, Role, Source, Team
from teams.sync.associations import teams_sync
from teams.sync.classes import SHOW_CLASS_QOS
from tests.teams.test_slurm_sync_integration import remove_account
from tests.teams.test_usage_integration import known_to_slurmctld
from tests.waiting import wait_for, wait_for_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(600)]
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "train_digits_job.sh"
#: A checkpointing job in bash: one step a second, the step written to a file in its directory after each.
STEPS = """#!/bin/bash
set -euo pipefail
step=0
if [ -f step.ckpt ]; then step=$(cat step.ckpt); echo "resuming from step $step"; fi
trap 'echo "stopped by signal; the checkpoint holds step $step" >&2; exit 143' TERM
while [ "$step" -lt 150 ]; do
  sleep 1; step=$((step + 1)); echo "$step" > step.ckpt.tmp && mv step.ckpt.tmp step.ckpt; echo "step $step/150"
done
"""
CASES = {
    "cluster1": ("t4", EXAMPLE.read_text().replace("EPOCHS=${EPOCHS:-25}", "EPOCHS=${EPOCHS:-60}"), "epoch 2/60"),
    "cluster2": ("l40s", STEPS, "step 5/150"),
}


def submit(user, account: str, capture, cluster: str, **kw) -> Job:
    snapshot = snapshot_refresh(cluster=cluster)
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    fields = dict(
        name="it-preempt",
        partition="small",
        gpu_count=1,
        cpus=1,
        memory_mb=1000,
        time_limit_min=15,
        script="sleep 10\n",
        account=account,
        cluster=cluster,
    )
    with capture(execute=True):
        checked = job_check(user=user, request=JobRequest(**(fields | kw)), policy=SitePolicy.from_snapshot(snapshot))
        job = job_create(checked=checked)
    job.refresh_from_db()
    assert job.slurm_job_id and job.state == JobState.PENDING, job.submit_error
    return job


def log_text(job: Job) -> str:
    from django.core.cache import cache

    cache.clear()  # the log tail is cached per phase; read it afresh
    return job_log_tail(job, "out").text or ""


# 10 s of grace: Slurm kills the preempted job at slurmctld's first periodic time-limit check (every 30 s)
# after it, and the job checkpoints every step; the site default (60 s) would only make the test wait
@override_settings(PORTAL_PRIORITY_CLASSES=True, PORTAL_SCAVENGER_GRACE_SECONDS=10)
@pytest.mark.parametrize("cluster", sorted(CASES))
def test_a_high_job_preempts_a_scavenger_job_that_resumes_from_its_checkpoint(
    cluster, client, django_user_model, clean_cache, django_capture_on_commit_callbacks
):
    gpu_type, script, checkpointed = CASES[cluster]
    name = f"it-cls-{uuid.uuid4().hex[:8]}"
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision", name])
    team = Team.objects.create(name=name, description="priority classes test")
    Membership.objects.create(team=team, user=alice, role=Role.MEMBER, source=Source.ADMIN)
    try:
        report = teams_sync()
        assert report.ok, report.lines
        qos = get_gateway(cluster).run(SHOW_CLASS_QOS).out
        assert "scavenger|0||requeue|0.000000|00:00:10|" in qos and "high|1000|scavenger|" in qos, qos
        known_to_slurmctld(name, "alice", cluster)
        capture = django_capture_on_commit_callbacks
        scavenger = submit(alice, name, capture, cluster, priority="scavenger", cpus=4, script=script, gpu_type=gpu_type)
        wait_for_job(scavenger, {JobState.RUNNING}, timeout=180)
        wait_for(
            "the scavenger job's first checkpoint",
            lambda: checkpointed in log_text(scavenger),
            timeout=120,
            every=2,
            seen=lambda: log_text(scavenger),
        )
        high = submit(alice, name, capture, cluster, priority="high", cpus=2, gpu_type=gpu_type)
        wait_for_job(high, {JobState.RUNNING, JobState.COMPLETED}, timeout=120)

        def preempted_run():
            snapshot_refresh(cluster=cluster)
            scavenger.refresh_from_db()
            return scavenger.runs if scavenger.restart_count >= 1 and scavenger.runs else None

        runs = wait_for("the scavenger job's preempted run in the portal", preempted_run, timeout=240, every=2,
                        seen=lambda: (scavenger.state, scavenger.restart_count, scavenger.runs))  # fmt: skip
        assert runs[0]["state"] == "PREEMPTED", runs
        assert runs[0]["why"].startswith("preempted at ") and runs[0]["why"].endswith("UTC by a higher class, requeued")
        [note] = Notification.objects.filter(user=alice, kind=NotificationKind.JOB_PREEMPTED)
        assert note.subject == f"Preempted: job {scavenger.slurm_job_id} (it-preempt) (run 1), requeued"
        wait_for(
            "the second run to resume from the checkpoint",
            lambda: "resuming from " in log_text(scavenger),
            timeout=300,
            every=3,
            seen=lambda: (scavenger.state, log_text(scavenger)[-500:]),
        )
        snapshot_refresh(cluster=cluster)
        assert Notification.objects.filter(user=alice, kind=NotificationKind.JOB_PREEMPTED).count() == 1  # once per run
        client.force_login(alice)
        page = client.get(f"/jobs/{scavenger.key}/").content.decode()
        assert runs[0]["why"] in page and 'data-testid="job-priority-class">scavenger' in page
        log = client.get(f"/jobs/{scavenger.key}/log/out/").content.decode()
        assert "Run 2 resumed from " in log, log
    finally:
        for cluster in cluster_names():
            get_gateway(cluster).run(["scancel", "--account", name], check=False)
        remove_account(name, {})
