"""The site policy where people choose resources: the job form, the session form and
the profile editor say the caps and the small-job pool in the site's figures; the job form's fragment
warns before sending when the person is already at a cap (from the stored jobs, no Slurm call); a
request too big for the pool is refused at the form in the pool's figures."""

from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from jobs.models import Job
from slurm import SlurmGateway
from slurm.snapshot import snapshot_store, snapshot_take
from slurm.states import JobState
from tests.conftest import free_port
from tests.fakes import EveryCluster, FakeTransport, cluster_transport

pytestmark = pytest.mark.django_db

LINES = (
    "At most 4 GPUs at once per person. At most 20 pending or running jobs per person (each array task counts). "
    "Jobs of at most 1 h and 1 GPU may use the small-job pool (partition small: node3 on cluster1), held back from big jobs."
)


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


@pytest.fixture
def site(settings, slurm_json, clean_cache, monkeypatch, client, alice):
    """The recorded cluster, no Slurm call allowed, the policy of docs/policy.md's example, alice signed in."""
    settings.PORTAL_PARTITIONS = []
    settings.PORTAL_HUB_API_URL, settings.PORTAL_HUB_TOKEN = f"http://127.0.0.1:{free_port()}/hub/api", "t"
    settings.PORTAL_USER_MAX_GPUS, settings.PORTAL_USER_MAX_SUBMIT_JOBS, settings.PORTAL_SMALL_POOL_PARTITION = "4", "20", "small"
    snapshot_store(snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=1000.0))
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(FakeTransport())))
    client.force_login(alice)
    return client


def policy_text(client, url: str) -> str:
    resp = client.get(url)
    assert resp.status_code == HTTPStatus.OK, url
    line = BeautifulSoup(resp.content, "html.parser").select_one("[data-testid=site-policy]")
    assert line is not None, url
    return " ".join(line.get_text().split())


@pytest.mark.parametrize("url", ["/jobs/new/", "/profiles/new/"])
def test_the_forms_say_the_caps_and_the_pool(site, url):
    assert policy_text(site, url) == LINES


def test_the_session_form_names_the_pool_only_on_a_cluster_whose_sessions_may_use_it(site):
    """Sessions run in the selected cluster's ``session_partitions``: cluster1's (the default) are its
    interactive partition, so its pool is not theirs; cluster2's include small (no snapshot stored
    here: no nodes named), said of sessions."""
    caps = LINES.split(" Jobs of at most")[0]
    assert policy_text(site, "/sessions/") == caps
    assert policy_text(site, "/sessions/?cluster=cluster1") == caps
    assert policy_text(site, "/sessions/?cluster=cluster2") == (
        f"{caps} Sessions of at most 1 h and 1 GPU may use the small-job pool (partition small), held back from big jobs."
    )
    resp = site.post("/sessions/", {"cluster": "cluster2", "form_reload": "cluster"})  # the cluster select's reload
    assert "Sessions of at most 1 h" in BeautifulSoup(resp.content, "html.parser").select_one("[data-testid=site-policy]").text
    assert policy_text(site, "/jobs/new/") == LINES  # the job form still says "Jobs", with the pool's nodes


def test_the_session_form_leaves_the_pool_out_when_no_session_may_use_it(site, settings):
    """A site of cluster1 alone: sessions use its interactive partition, never the pool's."""
    settings.PORTAL_CLUSTERS_FILE = ""
    assert policy_text(site, "/sessions/") == LINES.split(" Jobs of at most")[0]
    assert "(partition small: node3), held back" in policy_text(site, "/jobs/new/")  # the job form still says it


def test_a_site_of_one_cluster_names_only_the_pools_nodes(site, settings):
    """A site of one cluster names no cluster (two clusters: "node3 on cluster1", above)."""
    settings.PORTAL_CLUSTERS_FILE = ""  # one cluster: cluster1 alone
    assert "(partition small: node3), held back" in policy_text(site, "/jobs/new/")


def test_nothing_is_said_when_the_site_manages_nothing(site, settings):
    settings.PORTAL_USER_MAX_GPUS = settings.PORTAL_USER_MAX_SUBMIT_JOBS = settings.PORTAL_SMALL_POOL_PARTITION = ""
    assert b"site-policy" not in site.get("/jobs/new/").content


def running(alice, n: int, gpus: int, state=JobState.RUNNING):
    for i in range(n):
        Job.objects.create(
            user=alice, name=f"r{i}", partition="train", gpu_type="a100", gpu_count=gpus, memory_mb=100,
            time_limit_min=60, script="x", state=state, slurm_job_id=700 + i,
        )  # fmt: skip


def estimate(client, gpus: int) -> str:
    return client.get(
        "/jobs/new/estimate/", {"partition": "train", "gpu_count": str(gpus), "time_limit": "01:00:00"}
    ).content.decode()


def test_the_form_warns_before_sending_when_the_gpu_cap_is_reached(site):
    """The recorded queue has alice's job 2 running on 4 A100s: with a cap of 4 she is at it."""
    page = BeautifulSoup(estimate(site, 1), "html.parser").select_one("[data-testid=caps-warning]")
    assert (
        page.get_text()
        == "You already use 4 of your 4 GPUs at once on cluster1: this job (1 GPU) will wait until enough of your jobs end."
    )


def test_room_left_is_said(site, settings):
    settings.PORTAL_USER_MAX_GPUS = "6"  # 4 in use (recorded), 2 left
    assert "You already use 4 of your 6 GPUs at once" in estimate(site, 4)
    assert "Ask for at most 2 GPUs to start now." in estimate(site, 4)
    assert "caps-warning" not in estimate(site, 2)  # 4 + 2 fits


def test_the_form_warns_at_the_pending_jobs_cap(site, alice, settings):
    settings.PORTAL_USER_MAX_SUBMIT_JOBS = "3"
    running(alice, 3, 0, state=JobState.PENDING)
    assert "You already have 3 jobs pending or running on cluster1, the most the site allows one person (3;" in estimate(site, 0)


def test_too_big_for_the_pool_is_refused_at_the_form_in_the_pools_figures(site):
    form = dict(
        cluster="cluster1", name="big", partition="small", gpu_type="t4", gpu_count="2", cpus="1", memory_gb="1",
        time_limit="00:30:00", script="#!/bin/bash\ntrue\n",
    )  # fmt: skip
    resp = site.post("/jobs/new/", form)
    assert resp.status_code == HTTPStatus.BAD_REQUEST and not Job.objects.filter(name="big").exists()
    assert (
        "The small-job pool (partition small) takes jobs of at most 1 GPU; this one asks for 2."
        in resp.context["form"].errors["gpu_count"][0]
    )
    assert 'data-testid="error-gpu_count"' in resp.content.decode()


def test_the_api_submit_warns_at_the_gpu_cap_and_still_accepts_the_job(site, alice, django_capture_on_commit_callbacks):
    """POST /api/v1/jobs: accepted (201), with the cap's warning; the job itself is not counted as one before it."""
    import json

    from api.tokens import token_create
    from teams.models import Membership, Role, Team
    from tests.profiles.conftest import EXAMPLE_TEXT

    Membership.objects.create(user=alice, team=Team.objects.create(name="vision"), role=Role.MEMBER)
    _, raw = token_create(user=alice, name="t", scopes=["jobs", "read"], days=1)

    def submit(text):
        with django_capture_on_commit_callbacks():  # the submission task is queued, not run
            return site.post(
                "/api/v1/jobs", data=json.dumps({"profile_yaml": text}), content_type="application/json",
                HTTP_AUTHORIZATION=f"Bearer {raw}",
            )  # fmt: skip

    no_gpu = submit(EXAMPLE_TEXT)  # the example asks for no GPU: under the cap whatever is in use
    assert no_gpu.status_code == HTTPStatus.CREATED, no_gpu.content
    assert no_gpu.json()["warnings"] == []
    one_gpu = submit(EXAMPLE_TEXT.replace("gpus_per_node: 0", "gpus_per_node: 1").replace("partition: small", "partition: train"))
    assert one_gpu.status_code == HTTPStatus.CREATED, one_gpu.content
    assert one_gpu.json()["warnings"] == [
        "You already use 4 of your 4 GPUs at once on cluster1: this job (1 GPU) will wait until enough of your jobs end."
    ]
