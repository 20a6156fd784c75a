"""Quotas on the real slurmdbd (issue 5, item 7): a small GPU-minute quota, two members' jobs, the
team page's per-member usage, the next job held by quota with a plain reason and the team's numbers,
and removing a member whose default account is the team."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from jobs.models import Job
from jobs.policy import JobRequest, SitePolicy
from jobs.services import snapshot_refresh
from jobs.submit import job_check, job_create
from slurm import get_gateway
from slurm.states import JobState
from teams.models import Membership, Role, Source, Team
from teams.services import membership_remove
from teams.slurm_sync import teams_sync
from teams.usage import team_usage, usage_refresh

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


def sacctmgr(*args: str) -> str:
    return get_gateway().run(["sacctmgr", "-nP", *args]).out


def default_account(user: str) -> str:
    return sacctmgr("show", "user", user, "format=DefaultAccount").strip()


@pytest.fixture
def quota_team(django_user_model, clean_cache):
    name = f"itq{uuid.uuid4().hex[:8]}"
    users = {u: django_user_model.objects.create(username=u) for u in ("alice", "bob", "dana")}
    users["dana"].is_staff = True
    users["dana"].save()
    team = Team.objects.create(name=name, description="quota test", gpu_minutes_quota=3)
    for u in ("alice", "bob"):
        Membership.objects.create(team=team, user=users[u], role=Role.MEMBER, source=Source.ADMIN)
    try:
        yield team, users
    finally:
        gw = get_gateway()
        gw.run(["scancel", "--account", name], check=False)
        for u in ("alice", "bob"):
            if default_account(u) == name:
                gw.run(
                    [
                        "sacctmgr",
                        "-i",
                        "modify",
                        "user",
                        "where",
                        f"name={u}",
                        "set",
                        "defaultaccount=" + ("vision" if u == "alice" else "nlp"),
                    ],
                    check=False,
                )
        gw.run(["sacctmgr", "-i", "delete", "account", f"name={name}"], check=False)
        assert default_account("alice") == "vision" and default_account("bob") == "nlp"


def run_gpu_job(user: str, account: str, seconds: int) -> str:
    out = (
        get_gateway()
        .run(
            [
                "sbatch",
                "--parsable",
                "--chdir=/tmp",
                f"--account={account}",
                "--partition=small",
                "--gres=gpu:t4:1",
                "--time=1",
                "--job-name=quota-it",
                "--wrap",
                f"sleep {seconds}",
            ],
            as_user=user,
        )
        .out
    )
    return out.strip().split(";")[0]


def wait_done(ids: list[str], timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        doc = json.loads(get_gateway().run(["squeue", "--json"]).out)
        if not [
            j
            for j in doc["jobs"]
            if str(j["job_id"]) in ids and j["job_state"] in ("PENDING", "RUNNING", "CONFIGURING", "COMPLETING")
        ]:
            return
        time.sleep(2)
    raise AssertionError(f"jobs {ids} did not finish")


def test_quota_usage_hold_and_member_removal(quota_team, client, django_capture_on_commit_callbacks):
    team, users = quota_team
    report = teams_sync()
    assert report.ok, report.lines
    assert f"{team.name}|" in sacctmgr("show", "association", f"account={team.name}", "format=Account,User,GrpTRESMins")
    assert "gres/gpu=3" in sacctmgr("show", "association", f"account={team.name}", "format=GrpTRESMins")

    # Two members each use one GPU for ~30 s (well inside 3 GPU-minutes with --time=1).
    ids = [run_gpu_job("alice", team.name, 30), run_gpu_job("bob", team.name, 30)]
    wait_done(ids)
    usage = usage_refresh()
    assert usage is not None
    figures = team_usage(team.name)
    assert figures is not None and figures.tracked
    by_member = {m.username: m for m in figures.members}
    assert by_member["alice"].gpu_hours > 0 and by_member["bob"].gpu_hours > 0
    client.force_login(users["dana"])
    page = client.get(f"/teams/{team.name}/").content.decode()
    assert 'data-member="alice"' in page and 'data-member="bob"' in page and "<svg" in page

    # The next job asks for 1 GPU x 5 min = 5 GPU-minutes > what is left: Slurm holds it for quota.
    users["alice"].slurm_accounts = [team.name]
    users["alice"].save()
    snapshot = snapshot_refresh()
    with django_capture_on_commit_callbacks(execute=True):
        job = job_create(
            checked=job_check(
                user=users["alice"],
                policy=SitePolicy.from_snapshot(snapshot),
                request=JobRequest(
                    name="over-quota",
                    partition="small",
                    gpu_type="t4",
                    gpu_count=1,
                    cpus=1,
                    memory_mb=500,
                    time_limit_min=5,
                    script="sleep 5\n",
                    account=team.name,
                ),
            )
        )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        snapshot_refresh()
        job.refresh_from_db()
        if job.reason == "AssocGrpGRESMinutes":
            break
        time.sleep(2)
    assert (job.state, job.reason) == (JobState.PENDING, "AssocGrpGRESMinutes"), (job.state, job.reason, job.submit_error)
    usage_refresh()
    client.force_login(users["alice"])
    table = client.get("/jobs/table/").content.decode()
    assert "Held by your team&#x27;s quota" in table and "more GPU-hours than your team has left" in table
    assert f"Team {team.name} has used" in table and "of 0.05 GPU-hours this period" in table  # 3 GPU-minutes
    get_gateway().run(["scancel", str(job.slurm_job_id)], as_user="alice")

    # bob's default account is the team; removing him changes the default first, then removes him.
    get_gateway().run(["sacctmgr", "-i", "modify", "user", "where", "name=bob", "set", f"defaultaccount={team.name}"])
    with django_capture_on_commit_callbacks():
        membership_remove(team=team, user=users["bob"], by=users["dana"])
    report = teams_sync()
    assert report.ok, report.lines
    assert default_account("bob") == "nlp"
    assert "bob" not in sacctmgr("show", "association", f"account={team.name}", "format=User").split()
    assert not Job.objects.filter(state=JobState.RUNNING).exists()
