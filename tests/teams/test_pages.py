"""Team pages, settings, audit and the role x page/action matrix (own team / other team / admin).

Permissions are enforced in selectors and services; these tests drive real requests."""

from __future__ import annotations

import codecs
import csv
import io
import re
import uuid
from datetime import UTC, datetime
from http import HTTPStatus
from pathlib import Path
from types import SimpleNamespace

import pytest
from bs4 import BeautifulSoup

from audit.models import AuditEvent
from jobs.models import Job
from slurm.states import JobState
from teams.models import Membership, Role, Source, Team
from teams.usage.cache import MemberUsage, TeamUsage, UsageStatus, _store

pytestmark = pytest.mark.django_db


@pytest.fixture
def world(django_user_model, clean_cache):
    """vision: alice (member), carol (lead); nlp: bob (member), nils (lead); dana: admin; erin: unlinked."""
    users = {
        n: django_user_model.objects.create(username=n, slurm_accounts=[t] if t else [])
        for n, t in [("alice", "vision"), ("carol", "vision"), ("bob", "nlp"), ("nils", "nlp"), ("dana", "")]
    }
    users["dana"].is_staff = True
    users["dana"].save()
    # An identity no admin has linked yet; its IdP claims say admin and vision lead: they count for nothing.
    users["erin"] = django_user_model.objects.create(
        username="unlinked.0123456789abcdef",
        link_state="pending",
        requested_username="alice",
        oidc_groups=["vision-leads", "portal-admins"],
    )
    vision = Team.objects.create(name="vision", gpu_minutes_quota=600, gpu_limit=4)
    nlp = Team.objects.create(name="nlp")
    for user, team, role in [
        ("alice", vision, Role.MEMBER),
        ("carol", vision, Role.LEAD),
        ("bob", nlp, Role.MEMBER),
        ("nils", nlp, Role.LEAD),
    ]:
        Membership.objects.create(user=users[user], team=team, role=role, source=Source.ADMIN)
    start = datetime(2026, 11, 1, tzinfo=UTC)
    _store(
        {
            "vision": TeamUsage(
                account="vision",
                tracked=True,
                period_start=start,
                period_end=None,
                taken_at=1795970000.0,
                gpu_hours_used=7.5,
                gpu_hours_quota=10.0,
                gpu_hours_left=2.5,
                gpu_limit=4,
                gpus_running=2,
                pending_gpu_hours=4.0,
                gpu_hours_promised=1.5,
                promised_jobs=1,
                runout_date=datetime(2026, 11, 30).date(),
                members=[MemberUsage("alice", 5.0, 5.0, 3, 1, 120.0), MemberUsage("carol", 2.5, 2.5, 1, 0, None)],
                daily={"2026-11-27": {"alice": 3.0, "carol": 2.5}, "2026-11-28": {"alice": 2.0}},
            ),
            "nlp": TeamUsage(
                account="nlp",
                tracked=True,
                period_start=start,
                period_end=None,
                taken_at=1795970000.0,
                gpu_hours_used=1.0,
                members=[MemberUsage("bob", 1.0, 1.0, 1, 0, 30.0)],
                daily={"2026-11-28": {"bob": 1.0}},
            ),
        },
        UsageStatus(taken_at=1795970000.0),
    )
    job = Job.objects.create(
        user=users["alice"],
        account="vision",
        name="alice-job",
        partition="train",
        memory_mb=1,
        time_limit_min=10,
        script="true",
        state=JobState.RUNNING,
        slurm_job_id=77,
        output_path="/o/%j.out",
        error_path="/o/%j.err",
    )
    return users, vision, nlp, job


def as_(client, user):
    client.force_login(user)
    return client


# who -> expected status for each (page/action) on team "vision" and alice's job.
# fmt: off
MATRIX = {
    #                    alice(member)  carol(lead)   nils(lead, other team)  dana(admin)  erin (unlinked)
    "team list":         (403,          200,          200,                    200, 403),
    "team page":         (404,          200,          404,                    200, 403),
    "team csv":          (404,          200,          404,                    200, 403),
    "members csv":       (404,          200,          404,                    200, 403),
    "team settings":     (403,          403,          403,                    200, 403),
    "set quota":         (403,          403,          403,                    302, 403),
    "add member":        (403,          403,          403,                    302, 403),
    "remove member":     (403,          403,          403,                    302, 403),
    "audit trail":       (403,          403,          403,                    200, 403),
    "alice's job page":  (200,          404,          404,                    200, 403),
    "alice's job log":   (200,          404,          404,                    200, 403),
    "cancel alice's job": (302,         404,          404,                    403, 403),
    "adoption page":     (403,          403,          403,                    200, 403),
    "adoption csv":      (403,          403,          403,                    200, 403),
    # the cluster page and its actions; dana's POSTs pass the check and are refused for want of a
    # snapshot (400, no Slurm call): tests/ops/test_cluster_page.py runs them for real
    "cluster page":      (403,          403,          403,                    200, 403),
    "drain a node":      (403,          403,          403,                    400, 403),
    "resume a node":     (403,          403,          403,                    400, 403),
    "make maintenance":  (403,          403,          403,                    400, 403),
    "delete a reservation": (403,       403,          403,                    400, 403),
}
# fmt: on
WHO = ["alice", "carol", "nils", "dana", "erin"]


def request_for(client, what, job):
    return {
        "team list": lambda: client.get("/teams/"),
        "team page": lambda: client.get("/teams/vision/"),
        "team csv": lambda: client.get("/teams/vision/usage.csv"),
        "members csv": lambda: client.get("/teams/vision/members.csv"),
        "team settings": lambda: client.get("/teams/vision/settings/"),
        "set quota": lambda: client.post("/teams/vision/settings/limits/", {"gpu_hours_quota": "20", "gpu_limit": "2"}),
        "add member": lambda: client.post("/teams/vision/settings/members/", {"username": "bob", "role": "MEMBER"}),
        "remove member": lambda: client.post("/teams/vision/settings/members/remove/", {"username": "alice"}),
        "audit trail": lambda: client.get("/audit/"),
        "alice's job page": lambda: client.get(f"/jobs/{job.key}/"),
        "alice's job log": lambda: client.get(f"/jobs/{job.key}/log/out/"),
        "cancel alice's job": lambda: client.post(f"/jobs/{job.key}/cancel/"),
        "adoption page": lambda: client.get("/adoption/"),
        "adoption csv": lambda: client.get("/adoption/adoption.csv"),
        "cluster page": lambda: client.get("/ops/cluster/"),
        "drain a node": lambda: client.post("/ops/cluster/cluster1/drain/", {"node": "node3", "reason": "fan"}),
        "resume a node": lambda: client.post("/ops/cluster/cluster1/nodes/node3/resume/"),
        "make maintenance": lambda: client.post("/ops/cluster/cluster1/reservations/", {"nodes": "node3", "duration": "30"}),
        "delete a reservation": lambda: client.post("/ops/cluster/cluster1/reservations/maint_x/delete/"),
    }[what]()


@pytest.mark.parametrize("what", list(MATRIX))
@pytest.mark.parametrize("who", WHO)
def test_role_matrix(client, world, who, what, monkeypatch, django_capture_on_commit_callbacks):
    users, vision, nlp, job = world
    monkeypatch.setattr(
        "jobs.web.job_views.job_log_tail",
        lambda job, stream: __import__("jobs.reads.logs", fromlist=["LogTail"]).LogTail(text="ok"),
    )
    before = (vision.gpu_minutes_quota, Membership.objects.count())
    with django_capture_on_commit_callbacks():  # the Slurm sync is enqueued, not run
        response = request_for(as_(client, users[who]), what, job)
    expected = MATRIX[what][WHO.index(who)]
    assert response.status_code == expected, f"{who} / {what}: {response.status_code}"
    if expected in (403, 404) and what in ("set quota", "add member", "remove member"):
        vision.refresh_from_db()
        assert (vision.gpu_minutes_quota, Membership.objects.count()) == before  # nothing changed


def test_team_page_shows_quota_burn_chart_and_members(client, world):
    users, *_ = world
    html = as_(client, users["carol"]).get("/teams/vision/").content.decode()
    assert "10.0 GPU-hours" in html and "7.5 GPU-hours" in html and "2.5 GPU-hours" in html
    assert "around 2026-11-30" in html and "of a limit of 4" in html and "4.0 GPU-hours asked by queued jobs" in html
    assert "<svg" in html and 'data-testid="usage-chart"' in html and 'data-testid="daily-table"' in html
    assert 'data-member="alice"' in html and "2 min" in html  # median wait 120 s
    assert "bob" not in html  # another team's member never shows
    running = BeautifulSoup(html, "html.parser").select_one("[data-testid=gpus-running]").get_text(" ", strip=True)
    assert (
        running
        == "2 GPUs of a limit of 4 at once (the clusters' limits added up) (as of 2026-11-29 16:33 UTC , the last usage refresh)"
    )


def test_csv_export(client, world):
    users, *_ = world
    body = as_(client, users["carol"]).get("/teams/vision/usage.csv").content.decode()
    rows = list(csv.reader(io.StringIO(body)))
    assert rows[0] == ["team", "date", "member", "gpu_hours"]
    assert ["vision", "2026-11-27", "alice", "3.0000"] in rows
    assert all(len(r) == 4 for r in rows)  # one table per download: no second header, no blank row
    members = list(csv.reader(io.StringIO(as_(client, users["carol"]).get("/teams/vision/members.csv").content.decode())))
    assert members[0] == ["team", "member", "gpu_hours_period", "jobs", "failed_jobs", "median_wait_s"]
    assert any(r[:5] == ["vision", "alice", "5.0000", "3", "1"] for r in members)
    assert all(len(r) == 6 for r in members)


def test_untracked_gpus_never_show_zero(client, world):
    users, *_ = world
    _store(
        {
            "vision": TeamUsage(
                account="vision", tracked=False, period_start=datetime(2026, 11, 1, tzinfo=UTC), period_end=None, taken_at=1.0
            )
        },
        UsageStatus(taken_at=1.0),
    )
    html = as_(client, users["dana"]).get("/teams/vision/").content.decode()
    assert "GPU usage is not tracked by this cluster" in html and "AccountingStorageTRES" in html
    assert "0.0 GPU-hours" not in html
    home = as_(client, users["alice"]).get("/").content.decode()
    assert "GPU usage is not tracked by this cluster" in home and "AccountingStorageTRES" not in home


def test_home_shows_the_teams_remaining_quota(client, world):
    users, *_ = world
    html = as_(client, users["alice"]).get("/").content.decode()
    assert 'data-team="vision"' in html and "2.5 GPU-hours" in html


def test_admin_changes_are_audited_and_browsable(client, world, _no_incidental_slurm_sync):
    users, vision, *_ = world
    admin = as_(client, users["dana"])
    admin.post("/teams/vision/settings/limits/", {"gpu_hours_quota": "20", "gpu_limit": ""})
    assert _no_incidental_slurm_sync == [1]  # the Slurm sync is enqueued
    vision.refresh_from_db()
    assert (vision.gpu_minutes_quota, vision.gpu_limit) == (1200, None)
    event = AuditEvent.objects.get(action="team.limits")
    assert (
        event.actor == users["dana"]
        and event.old == {"gpu_minutes_quota": 600, "gpu_limit": 4}
        and event.new == {"gpu_minutes_quota": 1200, "gpu_limit": None}
    )
    page = admin.get("/audit/?action=team.&target=vision").content.decode()
    assert "<code>team.limits</code>" in page and "dana" in page
    assert "<code>team.limits</code>" not in admin.get("/audit/?actor=alice").content.decode()


def test_bad_quota_input_is_refused_clearly(client, world):
    users, vision, *_ = world
    resp = as_(client, users["dana"]).post("/teams/vision/settings/limits/", {"gpu_hours_quota": "-5", "gpu_limit": "x"})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    errors = resp.context["limits"].errors
    assert errors["gpu_hours_quota"] == ["A quota cannot be below 0 GPU-hours: leave it empty for no quota."]
    assert errors["gpu_limit"] == ["Give the GPUs in use at once as a whole number, such as 4, or leave it empty for no limit."]
    vision.refresh_from_db()
    assert vision.gpu_minutes_quota == 600


@pytest.mark.parametrize(
    "url, post, field, sentence",
    [
        (
            "limits/",
            {"gpu_hours_quota": "12.25"},
            "gpu_hours_quota",
            "Give the quota to at most one decimal place, such as 12.5 GPU-hours.",
        ),
        (
            "limits/",
            {"gpu_hours_quota": "lots"},
            "gpu_hours_quota",
            "Give the quota in GPU-hours, such as 500 or 12.5, or leave it empty for no quota.",
        ),
        (
            "limits/",
            {"billed_hours_quota": "-1"},
            "billed_hours_quota",
            "A quota cannot be below 0 billed unit-hours: leave it empty for no quota.",
        ),
        ("limits/", {"gpu_limit": "100001"}, "gpu_limit", "The GPUs in use at once must be at most 100000."),
        (
            "members/",
            {"username": "", "role": "MEMBER"},
            "username",
            "Give the person's cluster user name (their Slurm and Unix login).",
        ),
        ("members/", {"username": "bob", "role": "OWNER"}, "role", "'OWNER' is not a role: choose one of the list."),
    ],
)
def test_each_settings_refusal_says_what_to_give(client, world, url, post, field, sentence):
    """Not Django's generic "Enter a number." or "Select a valid choice"."""
    users, vision, *_ = world
    resp = as_(client, users["dana"]).post(f"/teams/vision/settings/{url}", post)
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    form = resp.context["limits" if url == "limits/" else "member_form"]
    assert form.errors[field] == [sentence]
    vision.refresh_from_db()
    assert vision.gpu_minutes_quota == 600 and not vision.memberships.filter(user__username="bob").exists()


def test_unknown_user_cannot_be_added(client, world):
    users, *_ = world
    resp = as_(client, users["dana"]).post("/teams/vision/settings/members/", {"username": "ghost", "role": "MEMBER"})
    assert resp.status_code == HTTPStatus.BAD_REQUEST and b"must sign in once first" in resp.content


def test_job_form_estimate_says_it_will_wait_for_quota(client, world):
    """vision: quota 10 h, used 7.5 h, 1.5 h promised to its one running job: 1 h left for a new job,
    as Slurm's safe enforcement counts it."""
    users, *_ = world
    alice = as_(client, users["alice"])

    def estimate(gpus: str, time_limit: str) -> str:
        form = {"account": "vision", "gpu_count": gpus, "time_limit": time_limit}
        return alice.post("/jobs/new/estimate/", form).content.decode()

    head = "Team vision: used 7.5 h, 1.5 h promised to 1 running job, 1 h left; this job needs"
    too_big = estimate("4", "60")
    assert f"{head} 4 h: it will wait for quota (until the next period or a higher quota)" in too_big
    assert "ask for at most 15 min, or 1 GPU for 60 min" in too_big  # what fits beside the promise
    held_by_promise = estimate("1", "90")  # fits the 2.5 h not used, not the 1 h not promised
    assert f"{head} 1 h 30 min" not in held_by_promise  # hours, as the other figures
    assert f"{head} 1.5 h: it will wait for quota (until running jobs end early," in held_by_promise
    assert f"{head} 1 h: it fits</span>." in estimate("1", "60")  # exactly what is left fits, as in Slurm
    assert estimate("1", "never") == ""


def test_job_form_estimate_is_only_for_the_persons_own_teams(client, world):
    """bob is in nlp, not vision: asking for vision's figures shows none (another team's quota is not
    his to see); alice, in vision, sees them."""
    users, *_ = world
    form = {"account": "vision", "gpu_count": "1", "time_limit": "60"}
    answer = as_(client, users["bob"]).post("/jobs/new/estimate/", form)
    assert answer.status_code == HTTPStatus.OK and b"quota-estimate" not in answer.content
    assert b"Team vision: used 7.5 h" in as_(client, users["alice"]).post("/jobs/new/estimate/", form).content


def test_quota_held_job_shows_the_teams_numbers(client, world):
    users, *_ = world
    Job.objects.create(
        user=users["alice"],
        account="vision",
        name="held",
        partition="train",
        gpu_type="a100",
        gpu_count=2,
        memory_mb=1,
        time_limit_min=60,
        script="true",
        state=JobState.PENDING,
        slurm_job_id=78,
        reason="AssocGrpGRESMinutes",
    )
    html = as_(client, users["alice"]).get("/jobs/table/").content.decode()
    assert "quota" in html.lower()
    assert (
        "Team vision has used 7.5 of 10.0 GPU-hours this period, and 1.5 are promised to its running jobs; "
        "2 of its 4 concurrent GPUs are in use." in html
    )
    # a held job is not "1st in line"; nor "held in train · Held by your team's quota", held twice
    assert "queued in train" in html and "in line" not in html and "held in train" not in html


def confirm_text(page: BeautifulSoup, username: str) -> str:
    """The sentence the browser's confirm() shows for the Remove button of ``username`` (escapejs undone)."""
    onsubmit = page.select_one(f"[data-testid=remove-{username}]").find_parent("form")["onsubmit"]
    quoted = re.fullmatch(r"return confirm\('(.*)'\)", onsubmit).group(1)
    return codecs.decode(quoted, "unicode_escape")


def test_a_member_from_the_claim_is_removed_with_a_note_on_their_idp_group(client, world, _no_incidental_slurm_sync):
    users, vision, *_ = world
    Membership.objects.filter(user=users["alice"], team=vision).update(source=Source.CLAIM)
    admin = as_(client, users["dana"])
    page = BeautifulSoup(admin.get("/teams/vision/settings/").content, "html.parser")
    assert "their next sign-in adds it back" in confirm_text(page, "alice")
    assert page.select_one("[data-testid=claim-alice]").get_text() == "from the IdP group vision"
    assert "sign-in adds it back" not in confirm_text(page, "carol")
    resp = admin.post("/teams/vision/settings/members/remove/", {"username": "alice"}, follow=True)
    said = " ".join(resp.content.decode().split())
    assert resp.status_code == HTTPStatus.OK and "alice removed from vision" in said
    assert "alice&#x27;s membership of vision came from the IdP group vision" in said
    assert not Membership.objects.filter(user=users["alice"], team=vision).exists()


def test_the_remove_confirm_names_every_idp_group_that_adds_a_lead_back(client, world):
    """A lead from the claim comes back at the next sign-in from the lead group or the members' group
    (as a member): the confirm names both, in the words of the note shown after the removal."""
    users, vision, *_ = world
    Membership.objects.filter(user=users["carol"], team=vision).update(source=Source.CLAIM)
    page = BeautifulSoup(as_(client, users["dana"]).get("/teams/vision/settings/").content, "html.parser")
    assert confirm_text(page, "carol") == (
        "Remove carol from vision? Their Slurm association is removed by the sync that follows. carol's membership of "
        "vision came from the IdP group vision-leads: while they are still in it, their next sign-in adds it back. "
        "Remove them from that group (and from vision if they are in it) in the IdP too."
    )


def test_remove_with_a_nul_username_is_a_clear_refusal(client, world):
    users, *_ = world
    resp = as_(client, users["dana"]).post("/teams/vision/settings/members/remove/", {"username": "a\x00b"}, follow=True)
    assert resp.status_code == HTTPStatus.OK and b"No portal user is called a\\x00b, so there is nobody to remove" in resp.content


# --- the Slurm sync: queued for a worker, followed by the page -----------------------------------------


@pytest.fixture
def worker(monkeypatch, slurmdbds):
    """Celery's broker as the request sees it: ``queued`` holds each task sent, none is run (a worker
    would run it later; ``run`` does, with each cluster's scripted slurmdbd reading its recorded demo
    accounts: cluster1 Slurm 22.05, cluster2 Slurm 24.11)."""
    from teams.tasks import teams_sync_task
    from tests.teams.conftest import RELEASE, expect_sacctmgr_reads

    queued: list[dict] = []
    monkeypatch.setattr("teams.services.teams_sync_task.delay", lambda **kwargs: queued.append(kwargs))

    def run(kwargs: dict) -> None:
        for cluster, fake in slurmdbds.items():
            expect_sacctmgr_reads(fake, RELEASE[cluster])
        teams_sync_task.apply(kwargs=kwargs)

    return SimpleNamespace(queued=queued, run=run, slurm=slurmdbds)


def test_check_slurm_is_queued_and_the_page_shows_the_report_when_it_ends(client, world, worker):
    users, *_ = world
    admin = as_(client, users["dana"])
    resp = admin.post("/teams/vision/settings/sync/", {"mode": "check"})
    assert resp.status_code == HTTPStatus.FOUND and resp["Location"] == "/teams/vision/settings/"  # post/redirect/get
    (task,) = worker.queued
    assert task["dry_run"] is True and task["actor_id"] == users["dana"].pk
    assert all(fake.calls == [] for fake in worker.slurm.values())  # nothing ran in the request
    status_url = f"/teams/vision/settings/sync/{task['run_id']}/"
    page = admin.get("/teams/vision/settings/").content.decode()
    assert "Slurm check on its way" in page and "by dana" in page and f'hx-get="{status_url}"' in page
    fragment = admin.get(status_url).content.decode()
    assert "on its way" in fragment and 'hx-trigger="every 2s"' in fragment
    worker.run(task)
    fragment = admin.get(status_url).content.decode()
    assert "Dry run:" in fragment and "none applied" in fragment and "hx-trigger" not in fragment  # done: polling stops
    # the report's lines, per cluster: vision's limits differ from each Slurm's (cluster2 has none yet)
    assert "<code>cluster1: ~ set vision GrpTRES gres/gpu=4 (was gres/gpu=6)" in fragment
    assert "<code>cluster2: ~ set vision GrpTRES gres/gpu=4 (was none), GrpTRESMins gres/gpu=600 (was none)" in fragment
    assert all(not fake.script for fake in worker.slurm.values())  # each cluster's slurmdbd was read
    page = admin.get("/teams/vision/settings/").content.decode()
    assert "Dry run:" in page and "on its way" not in page
    assert len(worker.queued) == 1  # reloading the page queued nothing


@pytest.mark.real_sync
def test_a_settings_change_queues_the_sync_and_the_page_follows_it(client, world, worker, django_capture_on_commit_callbacks):
    users, *_ = world
    admin = as_(client, users["dana"])
    with django_capture_on_commit_callbacks(execute=True):
        resp = admin.post("/teams/vision/settings/limits/", {"gpu_hours_quota": "20", "gpu_limit": ""})
    assert resp.status_code == HTTPStatus.FOUND
    (task,) = worker.queued
    assert task["dry_run"] is False and task["actor_id"] is None and all(f.calls == [] for f in worker.slurm.values())
    page = admin.get(resp["Location"]).content.decode()
    assert "the Slurm sync is on its way" in page and "Slurm sync on its way" in page and "by dana" in page


def test_unknown_sync_mode_queues_nothing(client, world, worker):
    users, *_ = world
    resp = as_(client, users["dana"]).post("/teams/vision/settings/sync/", {"mode": "apply-everything"}, follow=True)
    assert resp.status_code == HTTPStatus.OK and b"Unknown sync mode" in resp.content and worker.queued == []


def test_a_broker_that_is_down_is_said_not_a_500(client, world, monkeypatch):
    from kombu.exceptions import OperationalError

    def down(**kwargs):
        raise OperationalError("Error 111 connecting to 127.0.0.1:6379. Connection refused.")

    monkeypatch.setattr("teams.services.teams_sync_task.delay", down)
    users, *_ = world
    resp = as_(client, users["dana"]).post("/teams/vision/settings/sync/", {"mode": "sync"}, follow=True)
    assert resp.status_code == HTTPStatus.OK and b"cannot queue it for a worker" in resp.content


@pytest.mark.parametrize("who", ["alice", "carol", "nils", "erin"])
def test_only_admins_start_or_follow_a_sync(client, world, worker, who):
    users, *_ = world
    as_(client, users["dana"]).post("/teams/vision/settings/sync/", {"mode": "check"})
    (task,) = worker.queued
    client.logout()
    assert as_(client, users[who]).post("/teams/vision/settings/sync/", {"mode": "sync"}).status_code == HTTPStatus.FORBIDDEN
    assert client.get(f"/teams/vision/settings/sync/{task['run_id']}/").status_code == HTTPStatus.FORBIDDEN
    assert len(worker.queued) == 1


def test_a_run_no_longer_kept_is_a_404(client, world):
    users, *_ = world
    assert as_(client, users["dana"]).get(f"/teams/vision/settings/sync/{uuid.UUID(int=0)}/").status_code == HTTPStatus.NOT_FOUND


def test_settings_actions_accept_only_post(client, world):
    users, *_ = world
    admin = as_(client, users["dana"])
    for url in ("limits/", "members/", "members/remove/", "sync/"):
        assert admin.get(f"/teams/vision/settings/{url}").status_code == HTTPStatus.METHOD_NOT_ALLOWED
    assert admin.post("/teams/vision/settings/", {"action": "limits"}).status_code == HTTPStatus.METHOD_NOT_ALLOWED


@pytest.mark.integration
def test_dry_run_then_reload_never_reruns_the_sync(client, world):
    users, *_ = world
    resp = as_(client, users["dana"]).post("/teams/vision/settings/sync/", {"mode": "check"})
    assert resp.status_code == HTTPStatus.FOUND  # post/redirect/get
    page = client.get(resp["Location"]).content.decode()
    assert "Dry run:" in page and ("none applied" in page or "nothing to change" in page)


def test_a_team_without_use_says_so_once(client, world):
    """A regression: the chart and the table each said there was no usage."""
    users, *_ = world
    _store(
        {
            "vision": TeamUsage(
                account="vision",
                tracked=True,
                period_start=datetime(2026, 11, 1, tzinfo=UTC),
                period_end=None,
                taken_at=1.0,
                daily={"2026-11-28": {}},
            )
        },
        UsageStatus(taken_at=1.0),
    )
    html = as_(client, users["carol"]).get("/teams/vision/").content.decode()
    assert html.count("No GPU use yet this period.") == 1 and "No usage in this period yet." not in html


def test_audit_table_wraps_long_ids(client, world):
    users, *_ = world
    html = as_(client, users["dana"]).get("/audit/").content.decode()
    assert 'class="jobs small audit"' in html
    css = (Path(__file__).resolve().parents[2] / "static" / "css" / "portal.css").read_text()
    assert "table.audit td { overflow-wrap:anywhere;" in css
