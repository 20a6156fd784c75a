"""A team's GPU efficiency on its page: GPU-hours used vs busy per member and the
jobs that left most GPU-hours idle; only the team's leads and admins see it (anyone else: 404)."""

from __future__ import annotations

from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from django.utils import timezone

from jobs.gpu.efficiency import team_gpu_efficiency
from jobs.models import GpuSummary, Job
from slurm.states import JobState
from teams.models import Membership, Role, Source, Team

pytestmark = pytest.mark.django_db


@pytest.fixture
def team(django_user_model):
    team = Team.objects.create(name="vision")
    users = {n: django_user_model.objects.create(username=n) for n in ("lena", "carl", "dora", "eve")}
    Membership.objects.create(user=users["lena"], team=team, role=Role.LEAD, source=Source.ADMIN)
    for name in ("carl", "dora"):
        Membership.objects.create(user=users[name], team=team, role=Role.MEMBER, source=Source.ADMIN)
    end = timezone.now() - timedelta(days=1)

    def job(user, hours, sm=None, *, name="train", account="vision", ended=end):
        j = Job.objects.create(
            user=users[user], name=name, partition="gpu", memory_mb=1, time_limit_min=60, script="true", gpu_count=2,
            account=account,
        )  # fmt: skip
        Job.objects.filter(pk=j.pk).update(
            state=JobState.COMPLETED, slurm_job_id=j.pk + 1000, end_at=ended, gpu_hours=hours,
            gpu_summary=GpuSummary.MEASURED if sm is not None else "", gpu_sm_mean=sm,
        )  # fmt: skip

    job("carl", 10.0, 80.0, name="good")
    job("carl", 4.0, 5.0, name="starved")
    job("dora", 6.0, None, name="unmeasured")
    job("dora", 8.0, 10.0, name="idle-notebook")
    job("dora", 50.0, 0.0, name="old", ended=timezone.now() - timedelta(days=40))  # outside the span
    job("carl", 9.0, 0.0, name="other-team", account="nlp")
    return team, users


def test_used_vs_busy_per_member_and_the_most_idle_jobs(team):
    eff = team_gpu_efficiency(team="vision")
    got = {m.username: (m.used_h, m.measured_h, m.busy_h, round(m.efficiency)) for m in eff.members}
    assert got == {"carl": (14.0, 14.0, 8.2, 59), "dora": (14.0, 8.0, 0.8, 10)}
    assert [(j.name, h) for j, h in eff.worst] == [("idle-notebook", 7.2), ("starved", 3.8), ("good", 2.0)]


def test_the_team_page_shows_it_to_its_lead_only(client, team):
    _, users = team
    client.force_login(users["lena"])
    page = BeautifulSoup(client.get("/teams/vision/").content, "html.parser")
    assert page.select_one("#team-gpu-efficiency")["hx-get"] == "/teams/vision/gpu-efficiency/"
    html = BeautifulSoup(client.get("/teams/vision/gpu-efficiency/").content, "html.parser")
    cells = {tr["data-member"]: tr.select_one('[data-testid="efficiency"]').get_text() for tr in html.select("tbody tr")}
    assert cells == {"carl": "59 %", "dora": "10 %"}
    worst = html.select_one('[data-testid="gpu-worst"] li').get_text(" ", strip=True)
    assert "idle-notebook" in worst and "7.2 of 8.0 GPU-hours unused" in worst, worst
    # unused (1 - mean SM activity) is not the idle GPU-hours of the figures table, and is not named so
    assert "GPU-hours unused" in html.select_one('[data-testid="gpu-worst"]').get_text() and "left idle" not in html.get_text()
    caption = html.select_one('[data-testid="figures-caption"]').get_text(" ", strip=True)  # what it counts, and not
    assert caption.startswith("The jobs the portal has a row for (submitted through it, or found by it in the queue or in")
    assert "every job of the team's account from accounting" in caption
    for outsider in ("carl", "eve"):  # a plain member, someone outside the team
        client.force_login(users[outsider])
        response = client.get("/teams/vision/gpu-efficiency/")
        assert response.status_code == 404 and b"idle-notebook" not in response.content
    assert client.get("/teams/nosuch/gpu-efficiency/").status_code == 404


def test_a_job_whose_unused_hours_round_to_none_is_not_listed(team):
    """A 0.004 GPU-hour job at 10 % SM leaves 0.0036 unused: listed, it read "0.0 of < 0.01 GPU-hours unused"."""
    _, users = team
    tiny = Job.objects.create(user=users["carl"], name="tiny", partition="gpu", memory_mb=1, time_limit_min=60, script="true")
    Job.objects.filter(pk=tiny.pk).update(
        state=JobState.COMPLETED, slurm_job_id=9999, end_at=timezone.now() - timedelta(hours=1), gpu_hours=0.004,
        gpu_summary=GpuSummary.MEASURED, gpu_sm_mean=10.0, account="vision", gpu_count=1,
    )  # fmt: skip
    names = [j.name for j, _ in team_gpu_efficiency(team="vision").worst]
    assert "tiny" not in names and names[:1] == ["idle-notebook"], names


def test_gpu_jobs_whose_accounting_is_not_in_are_said_not_denied(client, django_user_model):
    """A lead's first look right after the team's GPU jobs ended said "No GPU jobs of this team ended
    in the last 30 days" while accounting's GPU-hours were not in yet."""
    team = Team.objects.create(name="vision")
    lena, carl = (django_user_model.objects.create(username=n) for n in ("lena", "carl"))
    Membership.objects.create(user=lena, team=team, role=Role.LEAD, source=Source.ADMIN)
    cases = [
        (JobState.COMPLETED, 501, True),
        (JobState.FAILED, 502, True),
        (JobState.SUBMIT_FAILED, None, False),  # refused at submission: no accounting will ever come
        (JobState.CANCELLED, None, False),  # cancelled before it was sent
        (JobState.COMPLETED, 503, True),  # ended 3 days ago: the poller gave up on its record after 2
    ]
    for n, (state, slurm_id, pending) in enumerate(cases):
        j = Job.objects.create(
            user=carl, name=f"j{n}", partition="gpu", memory_mb=1, time_limit_min=60, script="true", gpu_count=1
        )
        Job.objects.filter(pk=j.pk).update(
            state=state,
            end_at=timezone.now() - timedelta(days=3 if slurm_id == 503 else 0),
            account="vision",
            gpu_hours=None,
            slurm_job_id=slurm_id,
            accounting_pending=pending,
        )
    assert team_gpu_efficiency(team="vision").awaiting == 2
    client.force_login(lena)
    html = BeautifulSoup(client.get("/teams/vision/gpu-efficiency/").content, "html.parser")
    said = html.select_one('[data-testid="gpu-efficiency-none"]').get_text(" ", strip=True)
    assert said.startswith("2 GPU jobs of this team ended in the last 30 days; their GPU-hours come from accounting"), said
