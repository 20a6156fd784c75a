"""My jobs' fragment answers 304 Not Modified when nothing its user sees changed, however much time
passes, and never hides a change: the tag has no clock in it, the fragment prints moments, not ages
(``<time datetime>``, worded and ticked by portal.js)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime, timedelta

import pytest
from django.conf import settings

from jobs.models import Job
from slurm import SlurmUnreachable
from slurm.clusters import cluster_names, default_cluster
from slurm.health import accounting_answered
from slurm.records import QueueJob
from slurm.snapshot import ClusterSnapshot, snapshot_failed, snapshot_store
from slurm.states import JobState

pytestmark = pytest.mark.django_db

URL = "/jobs/table/"


def queue_job(job_id: int, priority: int) -> QueueJob:
    return QueueJob(
        job_id=job_id, array_job_id=0, array_task_id=None, array_task_string="", name=f"j{job_id}", user="u",
        account="vision", partition="train", state="PENDING", reason="Priority", priority=priority,
        submit_time=0, start_time=0, end_time=0, time_limit=60, gpus={}, comment="", nodes="",
    )  # fmt: skip


def land_poll(*queue: QueueJob) -> None:
    """What the poller does every interval: a new snapshot (taken now), and sacct answering."""
    now = time.time()
    for name in cluster_names():  # the queue on the default cluster, the others empty
        jobs = list(queue) if name == default_cluster().name else []
        snapshot_store(ClusterSnapshot(taken_at=now, attempted_at=now, cluster=name, jobs=jobs))
        accounting_answered(now=now, cluster=name)


@pytest.fixture
def alice(client, django_user_model, clean_cache):
    """Alice with job 7 pending, 2nd in line behind job 3 (which is not hers)."""
    user = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    job = Job.objects.create(
        user=user, name="train-resnet", partition="train", memory_mb=1000, time_limit_min=60, script="true", slurm_job_id=7
    )
    Job.objects.filter(pk=job.pk).update(state=JobState.PENDING, reason="Priority")
    land_poll(queue_job(3, 100), queue_job(7, 50))
    client.force_login(user)
    return client, job


def poll(client, etag: str | None = None):
    headers = {"HTTP_HX_REQUEST": "true"}
    if etag:
        headers["HTTP_IF_NONE_MATCH"] = etag
    return client.get(URL, **headers)


def test_same_state_is_304_with_the_same_tag_and_no_body(alice):
    client, _ = alice
    first = poll(client)
    assert first.status_code == 200
    tag = first["ETag"]
    assert tag.startswith('W/"') and len(tag) == 36
    assert "train-resnet" in first.content.decode() and "2nd in line" in first.content.decode()
    assert "private" in first["Cache-Control"] and "no-cache" in first["Cache-Control"]
    assert "Cookie" in first["Vary"]

    again = poll(client, tag)
    assert again.status_code == 304
    assert again["ETag"] == tag
    assert again.content == b""
    wire = "".join(f"{k}: {v}\r\n" for k, v in again.items())
    assert "alice" not in wire and "train-resnet" not in wire and "vision" not in wire
    assert len(wire) < 1024


def test_an_unchanged_queue_polled_later_is_304(alice, _unit_clock):
    """A minute of 5 s polls, each after the poller landed a new snapshot with the same queue and
    sacct answered: every one is 304, with the first poll's tag."""
    client, _ = alice
    tag = poll(client)["ETag"]
    for _ in range(12):
        _unit_clock.shift(5)
        land_poll(queue_job(3, 100), queue_job(7, 50))
        again = poll(client, tag)
        assert again.status_code == 304, again.content.decode()[:300]
        assert again["ETag"] == tag


def test_a_running_job_keeps_its_tag_as_its_clock_runs(alice, _unit_clock):
    client, job = alice
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, reason="", start_at=datetime.now(UTC) - timedelta(minutes=3))
    tag = poll(client)["ETag"]
    _unit_clock.shift(125)
    land_poll(queue_job(3, 100))
    assert poll(client, tag).status_code == 304


def test_a_row_state_change_is_200_with_the_new_state(alice):
    client, job = alice
    first = poll(client)
    tag = first["ETag"]
    assert 'data-state="PENDING"' in first.content.decode()
    # A queryset update (as the sync makes), which leaves updated_at alone.
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING)
    after = poll(client, tag)
    assert after.status_code == 200
    assert after["ETag"] != tag
    assert 'data-state="RUNNING"' in after.content.decode()
    assert poll(client, after["ETag"]).status_code == 304


def test_a_new_place_in_line_changes_the_tag(alice):
    client, _ = alice
    tag = poll(client)["ETag"]
    land_poll(queue_job(7, 50))  # job 3 started: 7 moves up
    after = poll(client, tag)
    assert after.status_code == 200 and after["ETag"] != tag
    assert "1st in line" in after.content.decode()


def test_a_job_queued_behind_mine_leaves_my_tag(alice):
    """The line grows behind job 7 (the API's in_line changes, the table's "2nd in line" does not)."""
    client, _ = alice
    tag = poll(client)["ETag"]
    land_poll(queue_job(3, 100), queue_job(7, 50), queue_job(9, 10))
    assert poll(client, tag).status_code == 304


def test_a_changed_reason_changes_the_tag(alice):
    client, job = alice
    tag = poll(client)["ETag"]
    Job.objects.filter(pk=job.pk).update(reason="Resources")
    after = poll(client, tag)
    assert after.status_code == 200 and 'title="Slurm reason: Resources"' in after.content.decode()


def test_a_quota_hold_follows_the_teams_figures(alice):
    """A reason whose words read more than the row (here the team's GPU-hours, from the usage
    store) is worked out for the tag: new figures change it, a new store of the same ones does not."""
    from teams.usage.cache import TeamUsage, _store
    from teams.usage.records import UsageStatus

    def team_used(hours: float) -> None:
        team = TeamUsage(
            account="vision", tracked=True, period_start=datetime(2026, 11, 1, tzinfo=UTC), period_end=None,
            taken_at=time.time(), gpu_hours_quota=10.0, gpu_hours_used=hours, gpu_hours_left=max(0.0, 10.0 - hours),
        )  # fmt: skip
        _store({"vision": team}, UsageStatus(taken_at=time.time()), default_cluster().name)

    client, job = alice
    Job.objects.filter(pk=job.pk).update(reason="AssocGrpGRESMinutes", account="vision", gpu_count=2)
    team_used(9.0)
    first = poll(client)
    assert "has used 9.0 of 10.0 GPU-hours" in first.content.decode()
    team_used(9.0)
    assert poll(client, first["ETag"]).status_code == 304
    team_used(9.5)
    after = poll(client, first["ETag"])
    assert after.status_code == 200 and "has used 9.5 of 10.0 GPU-hours" in after.content.decode()


def test_a_stopped_poller_is_said_once_it_is_stale_and_then_quiet(alice, _unit_clock):
    """No clock in the tag, but "stale" is: the notice appears once PORTAL_SNAPSHOT_MAX_AGE has
    passed without a poll, and the stale fragment is then 304 itself (its age ticks in the browser)."""
    client, _ = alice
    tag = poll(client)["ETag"]
    _unit_clock.shift(settings.PORTAL_SNAPSHOT_MAX_AGE - 5)
    assert poll(client, tag).status_code == 304
    _unit_clock.shift(10)
    stale = poll(client, tag)
    assert stale.status_code == 200 and 'data-testid="snapshot-stale"' in stale.content.decode()
    _unit_clock.shift(30)
    assert poll(client, stale["ETag"]).status_code == 304


def test_a_failed_poll_shows_its_notice(alice):
    client, _ = alice
    tag = poll(client)["ETag"]
    good = ClusterSnapshot(taken_at=time.time() - 1, attempted_at=time.time() - 1, cluster=default_cluster().name)
    snapshot_store(snapshot_failed(good, SlurmUnreachable(["squeue"], None, message="no route"), now=time.time()))
    after = poll(client, tag)
    assert after.status_code == 200
    assert 'data-testid="cluster-unreachable"' in after.content.decode()


def test_an_estimate_that_passes_changes_the_tag(alice, _unit_clock):
    """A start estimate is shown while it is ahead; once it has passed the line says "start not
    estimated yet", so that moment is in the tag (as a yes/no)."""
    client, job = alice
    Job.objects.filter(pk=job.pk).update(start_at=datetime.now(UTC) + timedelta(minutes=2))
    first = poll(client)
    assert 'data-testid="estimate"' in first.content.decode()
    _unit_clock.shift(50)
    land_poll(queue_job(3, 100), queue_job(7, 50))
    assert poll(client, first["ETag"]).status_code == 304
    _unit_clock.shift(50)
    land_poll(queue_job(3, 100), queue_job(7, 50))
    assert poll(client, first["ETag"]).status_code == 304
    _unit_clock.shift(50)
    land_poll(queue_job(3, 100), queue_job(7, 50))
    after = poll(client, first["ETag"])
    assert after.status_code == 200 and "start not estimated yet" in after.content.decode()


def test_times_are_time_elements_with_their_moment_in_utc(alice):
    """Run time and time left: the start and the limit's end as ISO-8601 UTC, the absolute time as
    the text (what shows with scripts off), not announced (aria-live off); the estimate likewise."""
    client, job = alice
    started = datetime(2026, 12, 4, 17, 30, 5, tzinfo=UTC)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, reason="", start_at=started)
    html = poll(client).content.decode()
    since = re.search(r'<time datetime="([^"]+)" data-tick="since" aria-live="off" title="([^"]+)">([^<]*)</time>', html)
    assert since.groups() == ("2026-12-04T17:30:05Z", "2026-12-04 17:30:05 UTC", "since 2026-12-04 17:30 UTC")
    left = re.search(r'<time datetime="([^"]+)" data-tick="left" aria-live="off" title="[^"]+">([^<]*)</time>', html)
    assert left.groups() == ("2026-12-04T18:30:05Z", "until 2026-12-04 18:30 UTC")  # 60 min limit
    assert not re.search(r"\d (?:s|min|h|days?) (?:ago|left)\b", html)  # no relative time in the markup

    estimate = datetime(2026, 12, 4, 19, 15, tzinfo=UTC)
    Job.objects.filter(pk=job.pk).update(state=JobState.PENDING, reason="Priority", start_at=estimate)
    html = poll(client).content.decode()
    assert 'estimated start <time datetime="2026-12-04T19:15:00Z" data-local="time"' in html
    assert '<time datetime="2026-12-04T19:15:00Z" data-tick="in" aria-live="off"' in html
    assert "in about" not in html


def test_the_page_says_when_it_checked(alice):
    """The full page (scripts off: it does not refresh) says when its figures were checked, as a
    moment; the polled fragment does not carry it."""
    client, _ = alice
    page = client.get("/jobs/").content.decode()
    checked = re.search(r'data-checks="job-table" aria-live="off">Checked <time datetime="([^"]+)" data-tick="ago"', page)
    assert checked, page
    at = datetime.fromisoformat(checked.group(1).replace("Z", "+00:00"))
    assert abs((datetime.now(UTC) - at).total_seconds()) < 60  # the unit clock's moment, not a measured time
    assert 'data-testid="snapshot-age"' not in poll(client).content.decode()


def test_another_users_change_leaves_my_tag(alice, django_user_model):
    client, _ = alice
    tag = poll(client)["ETag"]
    bob = django_user_model.objects.create(username="bob", slurm_accounts=["vision"])
    Job.objects.create(user=bob, name="bobs", partition="train", memory_mb=1, time_limit_min=5, script="true")
    assert poll(client, tag).status_code == 304


def test_the_tag_is_per_user(alice, django_user_model):
    client, _ = alice
    tag = poll(client)["ETag"]
    bob = django_user_model.objects.create(username="bob", slurm_accounts=["vision"])
    client.force_login(bob)
    assert poll(client, tag).status_code == 200


def test_signed_out_is_never_304(alice):
    client, _ = alice
    tag = poll(client)["ETag"]
    client.logout()
    assert poll(client, tag).status_code != 304


def test_cache_down_renders_in_full(alice, monkeypatch):
    client, _ = alice
    tag = poll(client)["ETag"]

    def down(*args, **kwargs):
        raise ConnectionError("redis down")

    monkeypatch.setattr("jobs.web.fragment_etags.clusters_state", down)
    answer = poll(client, tag)
    assert answer.status_code == 200 and not answer.has_header("ETag")
