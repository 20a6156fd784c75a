"""A session's Slurm job through the portal (interactive/job/send.py, ``/hub-internal/session-*``):
sbatch, scancel and tail run through the cluster's gateway as the session's owner (a scripted
transport: the argv and stdin the gateway sends), the state comes from the recorded snapshot, and
the hub may act only for the user a session belongs to."""

from __future__ import annotations

import time

import pytest

from interactive.models import Session, SessionState
from slurm import SlurmGateway, gateway
from slurm.snapshot import snapshot_load, snapshot_store, snapshot_take
from slurm.states import FINAL_STATES
from tests.fakes import EveryCluster, FakeTransport
from tests.fakes import cluster_transport as scripted

from .conftest import TEST_HUB_PART
from .test_options_and_internal import TOKEN, hub_settings, policy, post  # noqa: F401  (fixtures)

pytestmark = pytest.mark.django_db

HELPER = "/usr/local/libexec/gpuportal/gpuportal-sbatch"  # settings.PORTAL_SBATCH_HELPER's default
PASSWD = "alice:x:1001:1001::/home/alice:/bin/bash\n"


def sudo(user: str) -> list[str]:
    return ["sudo", "-n", "-u", user, "--"]


@pytest.fixture
def people(django_user_model):
    alice = django_user_model.objects.create(username="alice", oidc_issuer="t", oidc_sub="a", slurm_accounts=["vision"])
    bob = django_user_model.objects.create(username="bob", oidc_issuer="t", oidc_sub="b", slurm_accounts=["nlp"])
    return alice, bob


@pytest.fixture
def fake(monkeypatch, settings):
    settings.PORTAL_HOME_CACHE_SECONDS = 0
    transport = FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(transport)))
    return transport


def started(client, user: str = "alice") -> dict:
    """A session of ``user`` after the spawn check (state STARTING): the answer's settings."""
    r = post(client, "/hub-internal/spawn-check", {"user": user, "server_name": "lab-1", "options": {}})
    assert r.status_code == 200, r.content
    return r.json()["settings"]


def submit(client, user: str, key: str, **hub):
    return post(client, "/hub-internal/session-submit", {"user": user, "key": key, **TEST_HUB_PART, **hub})


def status(client, user: str, key: str, log: bool = False):
    query = f"user={user}&key={key}" + ("&log=1" if log else "")
    return client.get(f"/hub-internal/session-status?{query}", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")


def test_the_portal_submits_the_session_through_the_gateway_as_its_owner(client, hub_settings, people, fake):
    answer = started(client)
    seen = []
    gateway.command_observers.append(lambda cluster, command, seconds, ok: seen.append((command, ok)))
    fake.expect(["getent", "passwd", "alice"], stdout=PASSWD)
    fake.expect([*sudo("alice"), HELPER, "/home/alice/.gpuportal/sessions", "--", "--parsable"], stdout="4242\n")
    try:
        r = submit(client, "alice", answer["key"])
    finally:
        gateway.command_observers.pop()
    assert r.status_code == 200, r.content
    assert r.json()["job_id"] == 4242 and r.json()["log_path"] == f"/home/alice/.gpuportal/sessions/{answer['key']}.log"
    script = fake.calls[-1][1].decode()
    assert script.startswith("#!/bin/bash\n#SBATCH --job-name=")  # on stdin, never in argv
    assert "export JUPYTERHUB_API_TOKEN=test-api-token" in script
    assert not any("test-api-token" in word for word in fake.calls[-1][0])
    assert ("sbatch", True) in seen  # the gateway's command record (metrics) has it
    session = Session.objects.get(key=answer["key"])
    assert (session.slurm_job_id, session.cluster) == (4242, r.json()["cluster"]) and session.submitted_at
    # A second ask (a hub retry) answers with the same job: nothing is sent again.
    assert submit(client, "alice", answer["key"]).json()["job_id"] == 4242 and len(fake.calls) == 2


def test_the_hub_cannot_start_another_users_session(client, hub_settings, people, fake):
    """The hub asks as bob (the user it authenticated) for alice's session: refused, nothing runs."""
    answer = started(client, "alice")
    r = submit(client, "bob", answer["key"])
    assert r.status_code == 400 and "belongs to another user" in r.json()["errors"][0]["message"]
    r = post(client, "/hub-internal/session-cancel", {"user": "bob", "key": answer["key"]})
    assert r.status_code == 400 and "belongs to another user" in r.json()["errors"][0]["message"]
    assert status(client, "bob", answer["key"]).status_code == 400
    assert fake.calls == [] and Session.objects.get(key=answer["key"]).slurm_job_id is None


@pytest.mark.parametrize("key", ["not-a-uuid", "00000000-0000-0000-0000-000000000000"])
def test_an_unknown_key_is_refused_with_what_to_do(client, hub_settings, people, fake, key):
    r = submit(client, "alice", key)
    assert r.status_code == 400 and "start the session from the portal" in r.json()["errors"][0]["message"]


def test_slurms_refusal_is_a_400_in_its_words_and_a_silent_controller_a_503(client, hub_settings, people, fake):
    answer = started(client)
    argv = [*sudo("alice"), HELPER, "/home/alice/.gpuportal/sessions", "--", "--parsable"]
    fake.expect(["getent", "passwd", "alice"], stdout=PASSWD)
    fake.expect(argv, stderr="sbatch: error: Invalid account or account/partition combination specified\n", returncode=1)
    r = submit(client, "alice", answer["key"])
    assert r.status_code == 400 and "Invalid account" in r.json()["errors"][0]["message"]
    fake.expect(["getent", "passwd", "alice"], stdout=PASSWD)
    fake.expect(argv, stderr="sbatch: error: Unable to contact slurm controller (connect failure)\n", returncode=1)
    r = submit(client, "alice", answer["key"])
    assert r.status_code == 503 and "Try again shortly" in r.json()["errors"][0]["message"]


def test_the_hub_part_of_the_wrong_shape_is_refused(client, hub_settings, people, fake):
    answer = started(client)
    r = submit(client, "alice", answer["key"], env={"LD_PRELOAD": "/tmp/x.so"})
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "env"
    assert fake.calls == []


def test_cancel_runs_scancel_as_the_owner(client, hub_settings, people, fake):
    answer = started(client)
    Session.objects.filter(key=answer["key"]).update(slurm_job_id=4242)
    fake.expect([*sudo("alice"), "scancel", "4242"])
    r = post(client, "/hub-internal/session-cancel", {"user": "alice", "key": answer["key"]})
    assert r.status_code == 200 and r.json() == {"cancelled": True}


def test_status_from_the_sessions_clusters_snapshot(client, hub_settings, people, fake, settings):
    answer = started(client)
    job = snapshot_load().jobs[0]
    Session.objects.filter(key=answer["key"]).update(slurm_job_id=job.job_id)
    r = status(client, "alice", answer["key"])
    assert r.status_code == 200 and r.json()["state"] == job.state
    assert r.json()["ended"] is (job.state in FINAL_STATES)
    # Not listed in a snapshot taken after the submission: ended (gone).
    Session.objects.filter(key=answer["key"]).update(slurm_job_id=999999)
    gone = status(client, "alice", answer["key"]).json()
    assert (gone["state"], gone["ended"]) == ("NOT_FOUND", True)
    # With the log: its last lines, read as the owner.
    fake.expect(["getent", "passwd", "alice"], stdout=PASSWD)
    fake.expect([*sudo("alice"), "tail", "-n", "15", f"/home/alice/.gpuportal/sessions/{answer['key']}.log"], stdout="boom\n")
    r = status(client, "alice", answer["key"], log=True)
    assert r.json()["log_tail"] == "boom"


def test_status_is_unknown_when_the_snapshot_is_stale(client, hub_settings, people, slurm_json, settings):
    from slurm import SlurmUnreachable
    from slurm.snapshot import snapshot_failed

    answer = started(client)
    job = snapshot_load().jobs[0]
    Session.objects.filter(key=answer["key"]).update(slurm_job_id=job.job_id, state=SessionState.STARTING)
    old = snapshot_take(SlurmGateway(scripted(slurm_json)), now=time.time() - settings.PORTAL_SNAPSHOT_MAX_AGE - 30)
    snapshot_store(snapshot_failed(old, SlurmUnreachable(["squeue"], None, message="slurmctld down")))
    r = status(client, "alice", answer["key"])
    assert r.json()["state"] == "UNKNOWN" and r.json()["ended"] is False
    assert "slurmctld down" in r.json()["message"]


@pytest.mark.parametrize("path", ["/hub-internal/session-submit", "/hub-internal/session-cancel"])
def test_the_session_endpoints_need_the_hub_token(client, hub_settings, people, fake, path):
    answer = started(client)
    for token in ("", "wrong", TOKEN + "x"):
        r = post(client, path, {"user": "alice", "key": answer["key"], **TEST_HUB_PART}, token=token)
        assert r.status_code == 403 and "Not the hub" in r.json()["errors"][0]["message"]
    r = client.get(f"/hub-internal/session-status?user=alice&key={answer['key']}", HTTP_AUTHORIZATION="Bearer wrong")
    assert r.status_code == 403
    assert fake.calls == []


def test_a_session_is_sent_cancelled_and_read_on_its_own_cluster(client, hub_settings, people, monkeypatch, settings):
    """Each cluster has its gateway: a session whose row says cluster2 goes to cluster2's, never cluster1's."""
    settings.PORTAL_HOME_CACHE_SECONDS = 0
    one, two = FakeTransport(), FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", {"cluster1": SlurmGateway(one), "cluster2": SlurmGateway(two)})
    answer = started(client)
    Session.objects.filter(key=answer["key"]).update(cluster="cluster2")
    two.expect(["getent", "passwd", "alice"], stdout=PASSWD)
    two.expect([*sudo("alice"), HELPER, "/home/alice/.gpuportal/sessions", "--", "--parsable"], stdout="77;cluster2\n")
    r = submit(client, "alice", answer["key"])
    assert r.status_code == 200 and (r.json()["job_id"], r.json()["cluster"]) == (77, "cluster2")
    two.expect([*sudo("alice"), "scancel", "77"])
    assert post(client, "/hub-internal/session-cancel", {"user": "alice", "key": answer["key"]}).json() == {"cancelled": True}
    assert one.calls == [] and two.script == []
    # Its state is cluster2's snapshot's: none stored here, so not known (never "ended").
    assert status(client, "alice", answer["key"]).json()["state"] == "UNKNOWN"


def test_once_the_server_reported_its_port_the_node_is_asked_for_if_the_snapshot_lacks_it(client, hub_settings, people, fake):
    answer = started(client)
    pending = next(j for j in snapshot_load().jobs if j.state == "PENDING")
    Session.objects.filter(key=answer["key"]).update(slurm_job_id=pending.job_id)
    fake.expect([*sudo("alice"), "squeue", "-h", "-j", str(pending.job_id), "-o", "%B"], stdout="node1\n")
    query = f"user=alice&key={answer['key']}&node=1"
    r = client.get(f"/hub-internal/session-status?{query}", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert r.json()["node"] == "node1" and fake.script == []
    assert (
        "node" not in status(client, "alice", answer["key"]).json() or not status(client, "alice", answer["key"]).json()["node"]
    )
