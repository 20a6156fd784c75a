"""My jobs' fragment answers 304 Not Modified when nothing its user sees changed, and never hides a
change."""

from __future__ import annotations

import time

import pytest

from jobs.models import Job
from jobs.web import fragment_etags
from slurm import SlurmUnreachable
from slurm.clusters import default_cluster
from slurm.snapshot import ClusterSnapshot, snapshot_failed, snapshot_store
from slurm.states import JobState

pytestmark = pytest.mark.django_db

URL = "/jobs/table/"


@pytest.fixture
def frozen_clock(monkeypatch):
    """The clock bucket held still, so only the state under test can change the tag."""
    monkeypatch.setattr(fragment_etags, "clock_bucket", lambda now=None: 1)


@pytest.fixture
def alice(client, django_user_model, clean_cache, frozen_clock):
    user = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    job = Job.objects.create(
        user=user, name="train-resnet", partition="train", memory_mb=1000, time_limit_min=60, script="true", slurm_job_id=7
    )
    Job.objects.filter(pk=job.pk).update(state=JobState.PENDING)
    snapshot_store(ClusterSnapshot(taken_at=time.time() - 1, attempted_at=time.time() - 1, cluster=default_cluster().name))
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
    assert "train-resnet" in first.content.decode()
    assert "private" in first["Cache-Control"] and "no-cache" in first["Cache-Control"]
    assert "Cookie" in first["Vary"]

    again = poll(client, tag)
    assert again.status_code == 304
    assert again["ETag"] == tag
    assert again.content == b""
    wire = "".join(f"{k}: {v}\r\n" for k, v in again.items())
    assert "alice" not in wire and "train-resnet" not in wire and "vision" not in wire
    assert len(wire) < 1024


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


def test_a_new_snapshot_changes_the_tag(alice):
    client, _ = alice
    tag = poll(client)["ETag"]
    snapshot_store(ClusterSnapshot(taken_at=time.time(), attempted_at=time.time(), cluster=default_cluster().name))
    after = poll(client, tag)
    assert after.status_code == 200 and after["ETag"] != tag


def test_a_failed_poll_shows_its_notice(alice):
    client, _ = alice
    tag = poll(client)["ETag"]
    good = ClusterSnapshot(taken_at=time.time() - 1, attempted_at=time.time() - 1, cluster=default_cluster().name)
    snapshot_store(snapshot_failed(good, SlurmUnreachable(["squeue"], None, message="no route"), now=time.time()))
    after = poll(client, tag)
    assert after.status_code == 200
    assert 'data-testid="cluster-unreachable"' in after.content.decode()


def test_the_clock_bucket_changes_the_tag(alice, monkeypatch):
    """Running clocks and "Updated 3 s ago" are re-rendered once per poll interval."""
    client, _ = alice
    tag = poll(client)["ETag"]
    monkeypatch.setattr(fragment_etags, "clock_bucket", lambda now=None: 2)
    assert poll(client, tag).status_code == 200


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

    monkeypatch.setattr("jobs.web.job_views.clusters_version", down)
    answer = poll(client, tag)
    assert answer.status_code == 200 and not answer.has_header("ETag")
