"""Borrowing beyond quota on the real cluster1 (22.05, ``AccountingStorageEnforce=...,safe``): with the
priority classes on, the teams sync keeps ``GrpTRESMins=billing=1000000000,gres/gpu=1000000000`` on the
scavenger QOS (read back as sacctmgr prints it). A fresh team with a quota of 0 GPU-minutes: the New job
form offers alice's normal GPU job scavenger, Slurm holds that job (``AssocGrpGRESMinutes``) and its
queue note offers scavenger too; her scavenger job in the same team runs to completion (the QOS's
``GrpTRESMinutes`` takes precedence over the account's), and slurmctld charges the team nothing for it:
``scontrol show assoc_mgr``'s ``GrpTRESMins`` ``gres/gpu`` in use and ``UsageRaw`` stay 0, read once
slurmctld has counted a control job that ended after it (a normal job of a second fresh team without a
quota, whose ``UsageRaw`` turns above 0: ``PriorityCalcPeriod=1``, so within a minute or two). Both
accounts' jobs are cancelled and the accounts deleted in a ``finally``."""

from __future__ import annotations

import re
import uuid

import pytest
from django.test import override_settings

from jobs.models import Job
from jobs.reads.queue import job_row
from jobs.submit.policy import JobRequest, SitePolicy
from jobs.submit.submit import job_check, job_create
from jobs.worker.services import snapshot_refresh
from slurm import get_gateway
from slurm.states import JobState
from slurm.tres import parse_tres_limit_used
from teams.models import Membership, Role, Source, Team
from teams.sync.associations import teams_sync
from teams.sync.classes import SHOW_CLASS_QOS, parse_class_qos
from teams.usage.cache import team_usage, usage_refresh
from tests.teams.test_quota_promised_integration import remove_account_and_jobs, sacctmgr_show
from tests.teams.test_usage_integration import known_to_slurmctld
from tests.waiting import scontrol_show_job, wait_for, wait_for_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(600)]

CLUSTER = "cluster1"  # node3, partition small: two t4 GPUs
OFFER = (
    "Your team's GPU-hours are used up. Run as scavenger: it starts when GPUs are free, costs no quota, "
    "and may be stopped and resumed later."
)
_FIELD = re.compile(r"([\w/]+)=(\S*)")  # UsageRaw/Norm/Efctv=... is one field


@pytest.fixture
def teams_of_alice(django_user_model, clean_cache):
    """Two new teams of alice (Slurm accounts on every cluster, through the sync): one with a quota of
    0 GPU-minutes (frozen), one without a quota (the control); their jobs cancelled and accounts deleted after."""
    spent, control = f"itb{uuid.uuid4().hex[:8]}", f"itc{uuid.uuid4().hex[:8]}"
    alice = django_user_model.objects.create(username="alice", slurm_accounts=[spent, control])
    for name, quota in ((spent, 0), (control, None)):
        team = Team.objects.create(name=name, description="borrowing test", gpu_minutes_quota=quota)
        Membership.objects.create(team=team, user=alice, role=Role.MEMBER, source=Source.ADMIN)
    try:
        yield spent, control, alice
    finally:
        remove_account_and_jobs(spent)
        remove_account_and_jobs(control)


def gpu_job(alice, account: str, capture, **kw) -> Job:
    """A 1 t4 GPU job of 5 minutes running ``sleep 5`` through the portal (checked, created, sent)."""
    fields = dict(
        name="it-borrow",
        partition="small",
        gpu_type="t4",
        gpu_count=1,
        cpus=1,
        memory_mb=500,
        time_limit_min=5,
        script="sleep 5\n",
        account=account,
        cluster=CLUSTER,
    )
    with capture(execute=True):
        job = job_create(
            checked=job_check(user=alice, policy=SitePolicy.for_cluster(CLUSTER), request=JobRequest(**(fields | kw)))
        )
    job.refresh_from_db()
    assert job.slurm_job_id, job.submit_error
    return job


def assoc_mgr(account: str) -> str:
    argv = ["scontrol", "show", "assoc_mgr", f"accounts={account}", "flags=assoc"]
    return get_gateway(CLUSTER).run(argv).out


def account_record(account: str) -> dict[str, str]:
    """The account's own association (``UserName=`` empty) in ``scontrol show assoc_mgr``: its fields,
    e.g. ``GrpTRESMins`` ``...,gres/gpu=0(0),...`` (limit and, in brackets, minutes used) and
    ``UsageRaw/Norm/Efctv`` ``0.00/0.00/0.00`` (the raw usage first)."""
    record: dict[str, str] = {}
    mine = False
    for line in assoc_mgr(account).splitlines():
        fields = dict(_FIELD.findall(line))
        if "ClusterName" in fields:
            mine = fields.get("Account") == account and not fields.get("UserName")
        elif mine:
            record.update(fields)
    assert record, assoc_mgr(account)
    return record


def raw_usage(account: str) -> float:
    return float(account_record(account)["UsageRaw/Norm/Efctv"].split("/")[0])


@override_settings(PORTAL_PRIORITY_CLASSES=True)
def test_a_scavenger_job_of_a_team_whose_quota_is_spent_runs_and_costs_nothing(
    teams_of_alice, client, django_capture_on_commit_callbacks
):
    spent, control, alice = teams_of_alice
    capture = django_capture_on_commit_callbacks
    report = teams_sync()
    assert report.ok, report.lines
    shown = get_gateway(CLUSTER).run(SHOW_CLASS_QOS).out
    assert parse_class_qos(shown)["scavenger"]["GrpTRESMins"] == "billing=1000000000,gres/gpu=1000000000", shown
    assert "gres/gpu=0" in sacctmgr_show("association", f"account={spent}", "format=GrpTRESMins", cluster=CLUSTER)
    known_to_slurmctld(spent, "alice", CLUSTER)
    known_to_slurmctld(control, "alice", CLUSTER)
    assert snapshot_refresh(cluster=CLUSTER) is not None  # the partitions the site policy offers
    usage_refresh(cluster=CLUSTER)

    # The form offers a normal job scavenger: the team's quota is 0 GPU-hours.
    client.force_login(alice)
    form = {"cluster": CLUSTER, "partition": "small", "account": spent, "gpu_count": "1", "time_limit": "5"}
    html = client.post("/jobs/new/estimate/", form | {"priority": "normal"}).content.decode()
    assert "will wait" in html or "frozen" in html, html
    assert OFFER.replace("'", "&#x27;") in html and 'data-set-priority="scavenger"' in html, html
    scavenger_box = client.post("/jobs/new/estimate/", form | {"priority": "scavenger"}).content.decode()
    assert "as scavenger it costs no quota" in scavenger_box and "data-set-priority" not in scavenger_box

    # Slurm holds the normal job for the quota; its queue note offers scavenger.
    held = gpu_job(alice, spent, capture, priority="normal", name="it-borrow-normal")

    def held_by_quota() -> bool:
        snapshot_refresh(cluster=CLUSTER)
        held.refresh_from_db()
        return held.state == JobState.PENDING and held.reason == "AssocGrpGRESMinutes"

    wait_for(
        f"job {held.slurm_job_id} held by the GPU-minute quota on {CLUSTER}",
        held_by_quota,
        timeout=60,
        every=1,
        seen=lambda: f"portal: {held.state} ({held.reason})\n{scontrol_show_job(held.slurm_job_id, cluster=CLUSTER)}",
    )
    assert job_row(held, {}, usage_for=team_usage).line.quota_note.endswith(OFFER)

    # The scavenger job of the same team runs to completion while the normal one stays held.
    borrowed = gpu_job(alice, spent, capture, priority="scavenger", name="it-borrow-scavenger")
    wait_for_job(borrowed, {JobState.COMPLETED}, timeout=180, accounting_read=True)
    held.refresh_from_db()
    assert held.state == JobState.PENDING and held.reason == "AssocGrpGRESMinutes", (held.state, held.reason)

    # A control job, ended after it, charged to the team without a quota: once slurmctld has counted that
    # one (its UsageRaw above 0), it has counted the scavenger job too, and charged its team nothing.
    counted = gpu_job(alice, control, capture, name="it-borrow-control")
    wait_for_job(counted, {JobState.COMPLETED}, timeout=180)
    wait_for(
        f"slurmctld to count the control job's usage in {control}",
        lambda: raw_usage(control) > 0,
        timeout=180,
        every=2,
        seen=lambda: assoc_mgr(control),
    )
    record = account_record(spent)
    assert parse_tres_limit_used(record["GrpTRESMins"], "gres/gpu") == (0, 0), record["GrpTRESMins"]
    assert raw_usage(spent) == 0.0, assoc_mgr(spent)
