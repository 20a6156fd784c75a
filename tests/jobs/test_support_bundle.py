"""A job's support bundle (jobs/support/, jobs/web/bundle_views.py): built for a finished job from
Slurm 22.05's recorded outputs (tests/fixtures/slurm/22.05/bundle/), opened as a zip, every member
checked, and what never goes in checked absent; who may download it; a cluster that cannot be
reached still gives a bundle."""

from __future__ import annotations

import io
import json
import zipfile
from http import HTTPStatus

import pytest

from api.tokens import token_create
from audit.services import audit
from jobs.models import Job
from jobs.support.bundle import BUNDLE_LOG_BYTES
from jobs.support.gather import job_gathered
from slurm import SlurmGateway, SlurmUnreachable
from slurm.job_view import SACCT_FIELDS
from slurm.snapshot import snapshot_store, snapshot_take
from slurm.states import JobState
from teams.models import Membership, Role, Team
from tests.conftest import FIXTURES
from tests.fakes import EveryCluster, FakeTransport, cluster_transport

pytestmark = pytest.mark.django_db

RECORDED = FIXTURES / "slurm" / "22.05" / "bundle"
JOB_ID = json.loads((RECORDED / "manifest.json").read_text())["job_id"]
SUDO = ["sudo", "-n", "-u", "alice", "--"]
OUT = f"/home/alice/bundle-rec/slurm-{JOB_ID}.out"
ERR = f"/home/alice/bundle-rec/slurm-{JOB_ID}.err"
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ-planted\n-----END OPENSSH PRIVATE KEY-----\n"
)
OIDC_SECRET = "oidc-client-secret-planted-7f3a"


@pytest.fixture
def people(django_user_model):
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    lead = django_user_model.objects.create(username="lena", slurm_accounts=["vision"])
    carol = django_user_model.objects.create(username="carol", slurm_accounts=["nlp"])
    dora = django_user_model.objects.create(username="dora", is_staff=True)
    vision, nlp = Team.objects.create(name="vision"), Team.objects.create(name="nlp")
    Membership.objects.create(team=vision, user=alice, role=Role.MEMBER)
    Membership.objects.create(team=vision, user=lead, role=Role.LEAD)
    Membership.objects.create(team=nlp, user=carol, role=Role.LEAD)  # a lead, but of another team
    return {"alice": alice, "lead": lead, "carol": carol, "dora": dora}


@pytest.fixture
def cluster(slurm_json, clean_cache, settings):
    """cluster1's snapshot from the recorded 22.05 poll: bob's job "t4-eval" runs on node3."""
    settings.PORTAL_PARTITIONS = []
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=1000.0))


@pytest.fixture
def secrets(settings, tmp_path, people):
    """Secrets the portal holds, planted where it keeps them: the OIDC client secret, the SSH key
    the gateway uses, and an API token of alice's."""
    settings.PORTAL_OIDC = {**settings.PORTAL_OIDC, "client_secret": OIDC_SECRET}
    key = tmp_path / "portal_ed25519"
    key.write_text(PRIVATE_KEY)
    settings.PORTAL_SLURM_GATEWAY = {**settings.PORTAL_SLURM_GATEWAY, "ssh_key_file": str(key)}
    _row, token = token_create(user=people["alice"], name="ci", scopes=["read"], days=30)
    return [OIDC_SECRET, PRIVATE_KEY.splitlines()[1], token, settings.SECRET_KEY]


def finished_job(alice) -> Job:
    job = Job.objects.create(
        user=alice,
        account="vision",
        name="bundle-rec",
        partition="small",
        gpu_type="t4",
        gpu_count=1,
        memory_mb=100,
        time_limit_min=5,
        script="echo hello from bundle-rec; sleep 8; echo done\n",
        workdir="/home/alice/bundle-rec",
        output_path="/home/alice/bundle-rec/slurm-%j.out",
        error_path="/home/alice/bundle-rec/slurm-%j.err",
        slurm_job_id=JOB_ID,
        state=JobState.COMPLETED,
        exit_code=0,
        nodes="node3",
    )
    return job


def recorded_slurm(monkeypatch, *, log: bytes = b"hello from bundle-rec\ndone\n") -> FakeTransport:
    """The cluster as it answered for the recorded job once slurmctld had forgotten it."""
    fake = FakeTransport()
    fake.expect(
        [*SUDO, "scontrol", "show", "job", str(JOB_ID)],
        stderr=(RECORDED / "scontrol_show_job_gone.stderr.txt").read_bytes(),
        returncode=1,
    )
    fake.expect(
        [*SUDO, "sacct", "-j", str(JOB_ID), "--parsable2", "--format=" + ",".join(SACCT_FIELDS)],
        stdout=(RECORDED / "sacct.txt").read_bytes(),
    )
    fake.expect([*SUDO, "tail", "-c", str(BUNDLE_LOG_BYTES + 1), "--", OUT], stdout=log)
    fake.expect(
        [*SUDO, "tail", "-c", str(BUNDLE_LOG_BYTES + 1), "--", ERR],
        stderr=f"tail: cannot open '{ERR}' for reading: No such file or directory\n",
        returncode=1,
    )
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    return fake


class Unreachable:
    """A transport whose every command fails as an unreachable cluster does."""

    def execute(self, argv, *, stdin, timeout):
        raise SlurmUnreachable(list(argv), None, message="ssh: connect to host 127.0.0.1 port 2222: Connection refused")

    def close(self):
        pass


def opened(data: bytes) -> dict[str, str]:
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        return {name: archive.read(name).decode() for name in archive.namelist()}


def test_the_bundle_of_a_finished_job_holds_each_part_and_no_secret(client, people, cluster, secrets, monkeypatch):
    alice = people["alice"]
    job = finished_job(alice)
    audit(actor=alice, action="job.created", job=job, new={"state": "SUBMITTING"})
    audit(actor=None, action="job.state", job=job, old={"state": "RUNNING"}, new={"state": "COMPLETED"})
    audit(actor=people["dora"], action="job.note", job=job, new={"by": "staff"})
    fake = recorded_slurm(monkeypatch)
    client.force_login(alice)
    response = client.get(f"/jobs/{job.key}/support-bundle/")
    assert response.status_code == HTTPStatus.OK and response["Content-Type"] == "application/zip"
    assert response["Content-Disposition"] == f'attachment; filename="support-cluster1-{JOB_ID}.zip"'
    members = opened(response.content)
    assert set(members) == {
        "README.txt", "settings.json", "script.sh", "sbatch.txt", "history.jsonl", "slurm/sacct.txt",
        "logs/stdout.txt", "nodes.txt", "versions.txt",
    }  # fmt: skip
    readme = members["README.txt"]
    assert f"Support bundle of job {JOB_ID} “bundle-rec” on cluster1" in readme
    assert "slurm/scontrol-show-job.txt (scontrol show job 20): the job is no longer in Slurm's memory" in readme.replace(
        str(JOB_ID), "20"
    )
    assert f"logs/stderr.txt (the stderr log): there is no file {ERR}" in readme and "logs/stdout.txt: the stdout log" in readme
    settings_json = json.loads(members["settings.json"])
    assert (settings_json["slurm_job_id"], settings_json["state"], settings_json["owner"], settings_json["gpu_type"]) == (
        JOB_ID, "COMPLETED", "alice", "t4"
    )  # fmt: skip
    script = members["script.sh"]
    assert script.startswith('#!/bin/bash\n#SBATCH --job-name="bundle-rec"\n') and '#SBATCH --comment="portal:' in script
    assert script.endswith("echo hello from bundle-rec; sleep 8; echo done\n")
    assert members["sbatch.txt"] == "/usr/local/libexec/gpuportal/gpuportal-sbatch /home/alice/bundle-rec -- --parsable\n"
    history = [json.loads(line) for line in members["history.jsonl"].splitlines()]
    assert [(h["actor"], h["action"]) for h in history] == [
        ("alice", "job.created"),
        ("portal", "job.state"),
        ("another person", "job.note"),
    ]
    sacct = members["slurm/sacct.txt"]
    assert (
        sacct.startswith(f"$ sacct -j {JOB_ID} --parsable2 --format=JobID,")
        and f"\n{JOB_ID}|bundle-rec|alice|vision|small|COMPLETED|0:0|" in sacct
    )
    assert members["logs/stdout.txt"] == "hello from bundle-rec\ndone\n"
    assert members["nodes.txt"].startswith("NodeName=node3 State=") and "node1" not in members["nodes.txt"]
    assert members["versions.txt"].startswith("portal 0.1.0\nslurm 22.05")
    everything = "\n".join(members.values())
    for secret in [*secrets, "t4-eval", "bob", "dora", "bert-finetune"]:  # bob's job runs on node3 too
        assert secret not in everything, secret
    assert not fake.script and all("-d" not in argv and "--details" not in argv for argv, *_ in fake.calls)


def test_a_log_longer_than_256_kib_keeps_its_end_and_says_so(people, cluster, monkeypatch):
    job = finished_job(people["alice"])
    recorded_slurm(monkeypatch, log=b"a" + b"z" * BUNDLE_LOG_BYTES)
    gathered = job_gathered(job)
    assert gathered.logs[0].tail.truncated and gathered.logs[0].tail.text == "z" * BUNDLE_LOG_BYTES


@pytest.mark.parametrize(("who", "status"), [("alice", 200), ("lead", 200), ("dora", 200), ("carol", 404)])
def test_owner_team_lead_and_admin_download_it_another_researcher_cannot(client, people, cluster, monkeypatch, who, status):
    job = finished_job(people["alice"])
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(Unreachable())))
    client.force_login(people[who])
    response = client.get(f"/jobs/{job.key}/support-bundle/")
    assert response.status_code == status
    if status == 404:
        assert b"No such job, or it is not yours." in response.content and response["Content-Type"] != "application/zip"
        assert client.get(f"/jobs/{job.key}/").status_code == 404  # as the job page answers them


def test_anonymous_is_sent_to_sign_in(client, people, cluster):
    job = finished_job(people["alice"])
    response = client.get(f"/jobs/{job.key}/support-bundle/")
    assert response.status_code == HTTPStatus.FOUND and "login" in response["Location"]


def test_an_unreachable_cluster_gives_a_bundle_that_says_what_is_missing(client, people, cluster, monkeypatch):
    job = finished_job(people["alice"])
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(Unreachable())))
    client.force_login(people["alice"])
    response = client.get(f"/jobs/{job.key}/support-bundle/")
    assert response.status_code == HTTPStatus.OK
    members = opened(response.content)
    assert {"README.txt", "settings.json", "script.sh", "sbatch.txt", "history.jsonl", "nodes.txt", "versions.txt"} <= set(
        members
    )
    assert not any(name.startswith(("slurm/", "logs/")) for name in members)
    readme = members["README.txt"]
    assert "slurm/scontrol-show-job.txt (scontrol show job 20): Slurm could not be asked: ssh: connect to host" in readme.replace(
        str(JOB_ID), "20"
    )
    assert "logs/stdout.txt (the stdout log): The log could not be read right now" in readme


def test_the_job_page_links_to_its_bundle(client, people, cluster, monkeypatch):
    job = finished_job(people["alice"])
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(Unreachable())))
    client.force_login(people["alice"])
    page = client.get(f"/jobs/{job.key}/").content.decode()
    assert f'href="/jobs/{job.key}/support-bundle/"' in page and "Download support bundle" in page
