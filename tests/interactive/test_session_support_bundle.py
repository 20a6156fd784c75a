"""A session's support bundle (jobs/support/session.py, interactive/views.py): its Slurm job found by
the comment in the snapshot, Slurm 22.05's recorded ``scontrol show job`` (tests/fixtures/slurm/22.05/
bundle/), the log's tail with tokens replaced, no batch script (the hub writes its token into it);
who may download it; an unreachable cluster still gives a bundle."""

from __future__ import annotations

import copy
import json
from http import HTTPStatus

import pytest

from interactive.models import Session, SessionState
from jobs.support.bundle import BUNDLE_LOG_BYTES
from jobs.support.session import redact_tokens
from slurm import SlurmGateway
from slurm.snapshot import snapshot_store, snapshot_take
from teams.models import Membership, Role, Team
from tests.conftest import FIXTURES
from tests.fakes import ANY, EveryCluster, FakeTransport, cluster_transport
from tests.jobs.test_support_bundle import Unreachable, opened

pytestmark = pytest.mark.django_db

RECORDED = FIXTURES / "slurm" / "22.05" / "bundle"
JOB_ID = json.loads((RECORDED / "manifest.json").read_text())["job_id"]
SUDO = ["sudo", "-n", "-u", "alice", "--"]
HUB_TOKEN = "5f1e0c9a7b3d4e2f8a6b1c0d9e8f7a6b"


@pytest.fixture
def people(django_user_model):
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    lead = django_user_model.objects.create(username="lena", slurm_accounts=["vision"])
    carol = django_user_model.objects.create(username="carol", slurm_accounts=["nlp"])
    dora = django_user_model.objects.create(username="dora", is_staff=True)
    vision, nlp = Team.objects.create(name="vision"), Team.objects.create(name="nlp")
    Membership.objects.create(team=vision, user=lead, role=Role.LEAD)
    Membership.objects.create(team=nlp, user=carol, role=Role.LEAD)
    return {"alice": alice, "lead": lead, "carol": carol, "dora": dora}


def running_session(alice) -> Session:
    return Session.objects.create(
        user=alice,
        server_name="lab-x",
        ide="lab",
        account="vision",
        partition="small",
        memory_mb=1024,
        time_limit_min=60,
        state=SessionState.RUNNING,
    )


def with_session_job(slurm_json, session: Session) -> dict:
    """The recorded 22.05 queue with alice's running job 2 made the session's: the recorded job's id,
    the spawner's comment, node3 (where bob's "t4-eval" runs too)."""
    squeue = copy.deepcopy(slurm_json("22.05", "squeue"))
    job = next(j for j in squeue["jobs"] if j["job_id"] == 2)
    job.update(job_id=JOB_ID, comment=f"portal:{session.key}", nodes="node3")
    return squeue


def test_a_running_session_s_bundle_has_slurm_s_view_and_its_log_without_tokens(
    client, people, slurm_json, clean_cache, monkeypatch
):
    session = running_session(people["alice"])
    snapshot_store(
        snapshot_take(SlurmGateway(cluster_transport(slurm_json, squeue=with_session_job(slurm_json, session))), now=1000.0)
    )
    log = f"[I ServerApp] Jupyter Server is running at http://node3:8888/user/alice/lab-x/?token={HUB_TOKEN}\nkernel started\n"
    fake = FakeTransport()
    fake.expect([*SUDO, "scontrol", "show", "job", str(JOB_ID)], stdout=(RECORDED / "scontrol_show_job_running.txt").read_bytes())
    fake.expect(
        [*SUDO, "tail", "-c", str(BUNDLE_LOG_BYTES + 1), "--", f"/home/alice/bundle-rec/slurm-{JOB_ID}.out"], stdout=log.encode()
    )
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    client.force_login(people["alice"])
    response = client.get(f"/sessions/{session.key}/support-bundle/")
    assert response.status_code == HTTPStatus.OK
    assert response["Content-Disposition"] == f'attachment; filename="support-cluster1-session-{JOB_ID}.zip"'
    members = opened(response.content)
    assert set(members) == {
        "README.txt",
        "settings.json",
        "history.jsonl",
        "slurm/scontrol-show-job.txt",
        "logs/stdout.txt",
        "nodes.txt",
        "versions.txt",
    }
    readme = members["README.txt"]
    assert (
        "script.sh (the batch script): the session's batch script is JupyterHub's; the hub writes the session's API token into it"
        in readme
    )
    assert f"JobId={JOB_ID} JobName=bundle-rec" in members["slurm/scontrol-show-job.txt"]
    assert (
        members["logs/stdout.txt"]
        == "[I ServerApp] Jupyter Server is running at http://node3:8888/user/alice/lab-x/?token=[left out]\nkernel started\n"
    )
    assert json.loads(members["settings.json"])["slurm_job_id"] == JOB_ID
    assert members["nodes.txt"].startswith("NodeName=node3 ")
    everything = "\n".join(members.values())
    for absent in (HUB_TOKEN, "JUPYTERHUB_API_TOKEN", "t4-eval", "bob"):
        assert absent not in everything, absent
    assert not fake.script


def test_an_ended_session_s_job_is_found_in_accounting_and_read_there(client, people, slurm_json, clean_cache, monkeypatch):
    session = running_session(people["alice"])
    Session.objects.filter(pk=session.pk).update(state=SessionState.STOPPED)
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=1000.0))  # no job of it queued
    sacct = copy.deepcopy(slurm_json("22.05", "sacct"))
    ended = next(j for j in sacct["jobs"] if j["job_id"] == 2)
    ended.update(job_id=JOB_ID, comment={**ended["comment"], "job": f"portal:{session.key}"})
    fake = FakeTransport()
    fake.expect(["sacct", "--json", "-D", "-u", "alice", "-S", ANY], stdout=json.dumps(sacct))
    fake.expect(
        [*SUDO, "scontrol", "show", "job", str(JOB_ID)],
        stderr=(RECORDED / "scontrol_show_job_gone.stderr.txt").read_bytes(),
        returncode=1,
    )
    fake.expect([*SUDO, "sacct", "-j", str(JOB_ID), "--parsable2", ANY], stdout=(RECORDED / "sacct.txt").read_bytes())
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    client.force_login(people["alice"])
    members = opened(client.get(f"/sessions/{session.key}/support-bundle/").content)
    assert f"\n{JOB_ID}|bundle-rec|alice|vision|small|COMPLETED|" in members["slurm/sacct.txt"]
    readme = members["README.txt"]
    assert "the job is no longer in Slurm's memory" in readme and "logs/stdout.txt (the stdout log): no path is known" in readme
    assert members["nodes.txt"].startswith("NodeName=node3 ") and not fake.script


def test_an_ended_session_past_a_cut_in_22_05_accounting_gets_a_bundle_saying_why_its_job_is_unknown(
    client, people, slurm_json, clean_cache, monkeypatch
):
    """22.05's sacct stops at a job whose QOS was deleted (here 19, before the session's 20): the
    bundle comes, and says why it has no job, rather than that Slurm has none."""
    session = running_session(people["alice"])
    Session.objects.filter(pk=session.pk).update(state=SessionState.STOPPED)
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=1000.0))
    sacct = copy.deepcopy(slurm_json("22.05", "sacct_outcomes"))
    at = next(i for i, raw in enumerate(sacct["jobs"]) if raw["job_id"] == 19)
    fields = list(sacct["jobs"][at])
    cut = {name: sacct["jobs"][at][name] for name in fields[: fields.index("qos")]} | {"qos": None}
    sacct["jobs"] = [*sacct["jobs"][:at], cut]  # job 20, the session's, is left out
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-u", "alice", "-S", ANY], stdout=json.dumps(sacct))
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    client.force_login(people["alice"])
    response = client.get(f"/sessions/{session.key}/support-bundle/")
    assert response.status_code == HTTPStatus.OK
    readme = opened(response.content)["README.txt"]
    assert (
        "Slurm's view: Slurm's accounting answered, but cannot tell which job is the session's: accounting's JSON "
        "(sacct --json) was cut short at job 19, a job whose QOS was deleted" in " ".join(readme.split())
    )
    assert "Slurm has no job of this session" not in readme and not fake.script


def test_token_values_are_replaced_in_any_case():
    assert (
        redact_tokens("a Token: xyz b\n?token=q1&x=2 TOKEN=z") == "a Token: [left out] b\n?token=[left out]&x=2 TOKEN=[left out]"
    )


@pytest.mark.parametrize(("who", "status"), [("alice", 200), ("lead", 200), ("dora", 200), ("carol", 404)])
def test_owner_team_lead_and_admin_download_it_another_researcher_cannot(client, people, clean_cache, monkeypatch, who, status):
    session = running_session(people["alice"])
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(Unreachable())))
    client.force_login(people[who])
    response = client.get(f"/sessions/{session.key}/support-bundle/")
    assert response.status_code == status
    if status == 200:  # Slurm unreachable: what the portal has, and why the rest is missing
        readme = opened(response.content)["README.txt"]
        assert "Slurm's view: Slurm could not be asked for the session's job: ssh: connect to host" in readme
    else:
        assert b"No such session, or it is not yours." in response.content


def test_anonymous_is_sent_to_sign_in(client, people):
    session = running_session(people["alice"])
    response = client.get(f"/sessions/{session.key}/support-bundle/")
    assert response.status_code == HTTPStatus.FOUND and "login" in response["Location"]


def test_the_session_card_links_to_its_bundle(client, people, clean_cache, monkeypatch):
    session = running_session(people["alice"])
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(Unreachable())))
    client.force_login(people["alice"])
    page = client.get("/sessions/cards/").content.decode()
    assert f'href="/sessions/{session.key}/support-bundle/"' in page and "Download support bundle" in page


def test_a_session_the_portal_sent_is_read_on_its_own_cluster_by_its_job_id(client, people, clean_cache, monkeypatch):
    """The portal keeps the job id and cluster of a session it sent (interactive/job/send.py): the
    bundle asks that cluster for that job, with no look-up by comment."""
    session = running_session(people["alice"])
    Session.objects.filter(pk=session.pk).update(cluster="cluster2", slurm_job_id=JOB_ID, state=SessionState.STOPPED)
    fake = FakeTransport()
    fake.expect(
        [*SUDO, "scontrol", "show", "job", str(JOB_ID)],
        stderr=(RECORDED / "scontrol_show_job_gone.stderr.txt").read_bytes(),
        returncode=1,
    )
    fake.expect([*SUDO, "sacct", "-j", str(JOB_ID), "--parsable2", ANY], stdout=(RECORDED / "sacct.txt").read_bytes())
    gateways = {"cluster2": SlurmGateway(fake)}
    monkeypatch.setattr("slurm.gateway._gateways", gateways)
    client.force_login(people["alice"])
    response = client.get(f"/sessions/{session.key}/support-bundle/")
    assert response["Content-Disposition"] == f'attachment; filename="support-cluster2-session-{JOB_ID}.zip"'
    assert f"\n{JOB_ID}|bundle-rec|alice|" in opened(response.content)["slurm/sacct.txt"] and not fake.script
