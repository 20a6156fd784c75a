"""The maintenance warning where people choose a time limit: the job form's
fragment before sending, the API's submit (``warnings``) and the session form, from the stored
snapshot's reservations (recorded cluster, one maintenance reservation added on node3 30 min
ahead). A warning, never a refusal."""

from __future__ import annotations

import json
import re
import time
from dataclasses import replace
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from api.tokens import token_create
from jobs.models import Job
from slurm.records import Reservation
from slurm.snapshot import snapshot_load, snapshot_store
from tests.jobs.test_job_pages import FORM, alice, cluster, no_slurm  # noqa: F401 (fixtures)
from tests.profiles.conftest import EXAMPLE_TEXT

pytestmark = pytest.mark.django_db


def _maintenance(nodes=("node3",), start_in=30 * 60, length=3600, name="maint_node3"):
    """Add a maintenance reservation to the stored snapshot (as the poller would read it)."""
    now = int(time.time())
    snapshot = snapshot_load()
    reservation = Reservation(
        name=name, start=now + start_in, end=now + start_in + length, nodes=tuple(nodes), flags=("MAINT", "SPEC_NODES")
    )
    snapshot_store(replace(snapshot, reservations=[*snapshot.reservations, reservation]))
    return reservation


def _estimate(client, limit, partition="small"):
    html = client.get("/jobs/new/estimate/", {"partition": partition, "gpu_count": "0", "time_limit": limit}).content
    return BeautifulSoup(html, "html.parser").select_one("[data-testid=maintenance-warning]")


def test_the_job_form_warns_a_limit_that_crosses_maintenance_and_not_a_short_one(client, alice, cluster, no_slurm):  # noqa: F811
    _maintenance()
    client.force_login(alice)
    warning = _estimate(client, "00:45:00")
    assert warning is not None
    text = " ".join(warning.get_text(" ").split())
    assert "This job cannot start before" in text and "because it would run into maintenance" in text
    assert "(reservation maint_node3 on partition small)" in text and re.search(r"ask for at most (29|30) min to start now", text)
    assert warning.find("time")["datetime"].endswith("Z")  # shown in the reader's zone by portal.js
    assert _estimate(client, "00:10:00") is None
    assert _estimate(client, "00:45:00", partition="train") is None  # no maintenance on train's nodes


def test_no_maintenance_no_warning(client, alice, cluster, no_slurm):  # noqa: F811
    client.force_login(alice)
    assert _estimate(client, "00:45:00") is None


def test_the_api_submit_answers_with_the_warning_and_still_accepts_the_job(
    client, alice, cluster, no_slurm, django_capture_on_commit_callbacks
):  # noqa: F811
    from teams.models import Membership, Role, Team

    Membership.objects.create(user=alice, team=Team.objects.create(name="vision"), role=Role.MEMBER)
    _maintenance()
    _, raw = token_create(user=alice, name="t", scopes=["jobs", "read"], days=1)

    def submit(limit):
        text = EXAMPLE_TEXT.replace('time_limit: "00:10:00"', f'time_limit: "{limit}"')
        with django_capture_on_commit_callbacks():  # the submission task is queued, not run
            return client.post(
                "/api/v1/jobs", data=json.dumps({"profile_yaml": text}), content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {raw}",
            )  # fmt: skip

    long = submit("00:45:00")
    assert long.status_code == HTTPStatus.CREATED, long.content
    assert len(long.json()["warnings"]) == 1
    assert (
        long.json()["warnings"][0].startswith("This job cannot start before ") and " UTC because " in long.json()["warnings"][0]
    )
    short = submit("00:10:00")
    assert short.status_code == HTTPStatus.CREATED and short.json()["warnings"] == []
    assert Job.objects.count() == 2


def test_the_session_form_says_how_long_a_session_may_be_to_start_now(client, alice, cluster, no_slurm, settings):  # noqa: F811
    from interactive.options import session_maintenance

    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    settings.PORTAL_SESSION_MAX_HOURS = 8
    # 2 h 10 min away: the form's 2 h session fits with room for a slow machine (at exactly 2 h, a
    # page rendered a second later no longer fits: a CI failure)
    _maintenance(nodes=("node1",), start_in=2 * 3600 + 600, name="maint_node1")
    clash = session_maintenance(cluster="", partition="interactive", hours=4)
    assert clash is not None and clash.text.startswith("This session cannot start before")
    assert clash.text.endswith("; ask for at most 2 h to start now."), clash.text  # whole hours, as a session takes
    assert session_maintenance(cluster="", partition="interactive", hours=1) is None
    client.force_login(alice)
    page = BeautifulSoup(client.get("/sessions/").content, "html.parser")  # the form's 2 h start now
    assert page.select_one("#session-maintenance [data-testid=maintenance-warning]") is None
    note = page.select_one("#session-maintenance [data-testid=maintenance-longest]")
    assert note is not None and "for the longest session (8 h)" in note.get_text() and "maint_node1" in note.get_text()

    def fragment(hours):
        html = client.post("/sessions/maintenance/", {"partition": "interactive", "hours": hours}).content
        return BeautifulSoup(html, "html.parser").select_one("[data-testid=maintenance-warning]")

    warned = fragment("4")  # as the form asks when its hours change (HTMX)
    assert warned is not None and "This session cannot start before" in warned.get_text() and "maint_node1" in warned.get_text()
    assert fragment("1") is None and fragment("x") is None


def test_a_job_sent_anyway_is_accepted_and_its_page_repeats_the_warning(
    client,
    alice,
    cluster,
    no_slurm,
    django_capture_on_commit_callbacks,  # noqa: F811
):
    _maintenance()
    client.force_login(alice)
    form = {**FORM, "partition": "small", "gpu_type": "", "gpu_count": "0", "time_limit": "00:45:00"}
    with django_capture_on_commit_callbacks():
        response = client.post("/jobs/new/", form, follow=True)
    assert response.status_code == HTTPStatus.OK and Job.objects.count() == 1  # a warning, not a refusal
    messages = [
        " ".join(m.get_text(" ").split()) for m in BeautifulSoup(response.content, "html.parser").select("ul.messages li")
    ]
    assert any("This job cannot start before" in m and "maint_node3" in m for m in messages), messages
    with django_capture_on_commit_callbacks():
        short = client.post("/jobs/new/", {**form, "name": "short", "time_limit": "00:10:00"}, follow=True)
    assert "would run into maintenance" not in short.content.decode()


def test_the_api_session_start_answers_with_the_warning(client, alice, cluster, no_slurm, settings, monkeypatch):  # noqa: F811
    from interactive import hub
    from teams.models import Membership, Role, Team

    Membership.objects.create(user=alice, team=Team.objects.create(name="vision"), role=Role.MEMBER)
    settings.PORTAL_HUB_API_URL, settings.PORTAL_HUB_TOKEN = "http://127.0.0.1:9/hub/api", "t"
    settings.PORTAL_SESSION_PARTITIONS, settings.PORTAL_SESSION_MAX_GPUS, settings.PORTAL_SESSION_MAX_HOURS = (
        ["interactive"],
        2,
        8,
    )
    monkeypatch.setattr(hub, "ensure_user", lambda username: None)
    monkeypatch.setattr(hub, "remove_stopped_servers", lambda username: 0)
    monkeypatch.setattr(hub, "start_server", lambda username, server, options: False)  # spawning in the background
    monkeypatch.setattr(hub, "servers", lambda username: {})
    _maintenance(nodes=("node1",), start_in=2 * 3600, name="maint_node1")
    _, raw = token_create(user=alice, name="t", scopes=["sessions", "read"], days=1)

    def start(hours):
        body = json.dumps({"partition": "interactive", "hours": hours})
        return client.post("/api/v1/sessions", data=body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")

    long = start(4)
    assert long.status_code == HTTPStatus.CREATED, long.content
    assert len(long.json()["warnings"]) == 1 and long.json()["warnings"][0].startswith("This session cannot start before")
    assert "(reservation maint_node1 on partition interactive)" in long.json()["warnings"][0]
    short = start(1)
    assert short.status_code == HTTPStatus.CREATED and short.json()["warnings"] == []


def test_running_a_profile_from_its_page_repeats_the_warning(
    client, alice, cluster, no_slurm, django_capture_on_commit_callbacks
):  # noqa: F811
    from profiles.models import Profile
    from profiles.schema import parse_profile
    from teams.models import Membership, Role, Team

    Membership.objects.create(user=alice, team=Team.objects.create(name="vision"), role=Role.MEMBER)
    _maintenance()
    profile = Profile.objects.create(owner=alice, name="digits", yaml=EXAMPLE_TEXT, spec=parse_profile(EXAMPLE_TEXT).data)
    client.force_login(alice)
    with django_capture_on_commit_callbacks():
        response = client.post(f"/profiles/{profile.pk}/run/", {"partition": "small", "time_limit": "00:45:00"}, follow=True)
    assert response.status_code == HTTPStatus.OK and Job.objects.get().time_limit_min == 45
    messages = " ".join(m.get_text(" ") for m in BeautifulSoup(response.content, "html.parser").select("ul.messages li"))
    assert "This job cannot start before" in messages and "maint_node3" in messages
