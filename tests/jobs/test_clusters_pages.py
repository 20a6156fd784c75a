"""Two clusters in one portal (one cluster unreachable, and an unknown Slurm version), on recorded outputs: the
22.05 recording as cluster1 and the 24.11 one (cluster2's own, read by the v0.0.42 adapter) as
cluster2, exactly as cluster/clusters.toml configures them. The job form, the pages and the API take
and show a cluster; a partition of the other cluster or an unknown cluster is refused naming what
exists."""

from __future__ import annotations

import json
import time
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from jobs.models import Job
from slurm import SlurmGateway, SlurmUnreachable
from slurm.snapshot import snapshot_failed, snapshot_load, snapshot_store, snapshot_take
from tests.slurm.recorded import poll_transport

pytestmark = pytest.mark.django_db

FORM = dict(
    name="h100-run",
    account="vision",
    gpu_type="h100",
    gpu_count="1",
    cpus="2",
    memory_gb="4",
    time_limit="01:00:00",
    requeue="on",
    workdir="",
    script="#!/bin/bash\npython train.py\n",
)


@pytest.fixture
def two_clusters(clean_cache, settings):
    settings.PORTAL_PARTITIONS = []
    now = time.time()
    snapshot_store(snapshot_take(SlurmGateway(poll_transport("22.05")), now=now, cluster="cluster1"))
    snapshot_store(snapshot_take(SlurmGateway(poll_transport("24.11")), now=now, cluster="cluster2"))


@pytest.fixture
def alice(client, django_user_model, monkeypatch, captured_sends):
    user = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    client.force_login(user)
    return user


@pytest.fixture
def captured_sends(monkeypatch):
    """The submit task is not run (no Slurm here): the ids it would have been sent with."""
    sent: list[int] = []
    monkeypatch.setattr("jobs.submit.submit.job_submit_now", lambda job_id, **_kw: sent.append(job_id))
    return sent


def test_the_form_offers_both_clusters_and_shows_the_chosen_ones_partitions(client, alice, two_clusters):
    page = BeautifulSoup(client.get("/jobs/new/").content.decode(), "html.parser")
    assert [o["value"] for o in page.select("#id_cluster option")] == ["cluster1", "cluster2"]
    assert [o["value"] for o in page.select("#id_partition option")] == ["interactive", "small", "train"]
    # Slurm's default partition is the one chosen (Default=YES: train), not the first by name
    assert page.select_one("#id_partition option[selected]")["value"] == "train"
    # the cluster select reloads the form with the other cluster's partitions, keeping what was typed
    page = BeautifulSoup(client.get("/jobs/new/", {"cluster": "cluster2", "name": "kept"}).content.decode(), "html.parser")
    assert [o["value"] for o in page.select("#id_partition option")] == ["gpu", "small"]
    assert {o["value"] for o in page.select("#id_gpu_type option")} == {"", "h100", "l40s"}
    assert page.select_one("#id_name")["value"] == "kept"
    assert page.select_one("#id_cluster option[selected]")["value"] == "cluster2"


def test_the_cluster_select_reloads_the_form_by_post_keeping_a_long_script_out_of_the_url(
    client, alice, two_clusters, captured_sends
):
    """The select POSTs what was typed with form_reload=cluster (jobs.web.forms.offer_clusters): an 8 KB
    script, which a GET got "414 URI Too Long" for, comes back in the form; nothing is submitted, and only
    the cluster goes to the address bar."""
    select = BeautifulSoup(client.get("/jobs/new/").content.decode(), "html.parser").select_one("#id_cluster")
    assert (select["hx-post"], json.loads(select["hx-vals"])) == ("/jobs/new/", {"form_reload": "cluster"})
    assert not select.has_attr("hx-get") and not select.has_attr("hx-push-url")
    script = "#!/bin/bash\n" + "".join(f"echo line {i} of a long script\n" for i in range(300))
    assert len(script) > 8000
    resp = client.post(
        "/jobs/new/", {**FORM, "script": script, "cluster": "cluster2", "partition": "train", "form_reload": "cluster"}
    )
    assert resp.status_code == HTTPStatus.OK  # htmx swaps no 4xx
    assert resp["HX-Push-Url"] == "/jobs/new/?cluster=cluster2"
    page = BeautifulSoup(resp.content.decode(), "html.parser")
    assert page.select_one("#id_cluster option[selected]")["value"] == "cluster2"
    assert [o["value"] for o in page.select("#id_partition option")] == ["gpu", "small"]
    assert page.select_one("#id_partition option[selected]")["value"] == "gpu"  # cluster2's default, not train's leftover
    assert page.select_one("#id_script").get_text().strip() == script.strip()
    assert page.select_one("#id_name")["value"] == "h100-run"
    assert page.select("[data-testid^=error-]") == [] and page.select("[data-testid=form-errors]") == []  # unbound
    assert Job.objects.count() == 0 and captured_sends == []
    # a plain GET (a bookmark, the pushed URL) still shows that cluster's form
    assert "HX-Push-Url" not in client.get("/jobs/new/", {"cluster": "cluster2"})


@pytest.mark.parametrize("how", ["link", "reload"])
def test_an_unknown_cluster_in_a_link_or_a_reload_shows_the_default_clusters_form_and_says_why(client, alice, two_clusters, how):
    """A stale page's select or an old bookmark: never a 500 (an unbound form cannot hold an error)."""
    if how == "link":
        resp = client.get("/jobs/new/", {"cluster": "cluster9", "name": "kept"})
    else:
        resp = client.post("/jobs/new/", {**FORM, "name": "kept", "cluster": "cluster9", "form_reload": "cluster"})
        assert resp["HX-Push-Url"] == "/jobs/new/?cluster=cluster1"
    assert resp.status_code == HTTPStatus.OK
    page = BeautifulSoup(resp.content.decode(), "html.parser")
    assert "Cluster 'cluster9' is not served by this portal. Choose one of: cluster1, cluster2." in page.get_text()
    assert page.select_one("#id_cluster option[selected]")["value"] == "cluster1"
    assert page.select_one("#id_name")["value"] == "kept"
    assert Job.objects.count() == 0


def test_a_job_sent_to_cluster2_belongs_to_it(client, alice, two_clusters, captured_sends):
    resp = client.post("/jobs/new/", {**FORM, "cluster": "cluster2", "partition": "gpu"})
    assert resp.status_code == HTTPStatus.FOUND, resp.content.decode()[:3000]
    job = Job.objects.get(name="h100-run")
    assert (job.cluster, job.slurm_cluster, job.gpu_type) == ("cluster2", "cluster2", "h100")
    html = client.get(f"/jobs/{job.key}/").content.decode()
    assert 'data-testid="job-cluster">cluster2<' in html
    assert 'data-cluster="cluster2"' in client.get("/jobs/table/").content.decode()
    api = client.get("/api/v1/jobs").json()["items"]
    assert [j["cluster"] for j in api] == ["cluster2"]


def test_a_partition_of_the_other_cluster_is_refused_naming_the_cluster_that_has_it(client, alice, two_clusters):
    resp = client.post("/jobs/new/", {**FORM, "cluster": "cluster2", "partition": "train", "gpu_type": "a100"})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    error = BeautifulSoup(resp.content.decode(), "html.parser").select_one("[data-testid=error-partition]").get_text()
    assert "Partition 'train' is not offered on cluster2 (cluster1 has it: choose cluster cluster1)" in error
    assert "Choose one of: gpu, small." in error
    assert Job.objects.count() == 0


@pytest.mark.parametrize("where", ["form", "profile", "api"])
def test_an_unknown_cluster_is_refused_naming_the_clusters(client, alice, two_clusters, where):
    from tests.api.test_api import EXAMPLE_TEXT

    if where == "form":
        resp = client.post("/jobs/new/", {**FORM, "cluster": "cluster9", "partition": "gpu"})
        text = BeautifulSoup(resp.content.decode(), "html.parser").select_one("[data-testid=error-cluster]").get_text()
    else:
        from api.tokens import token_create

        _, token = token_create(user=alice, name="t", scopes=["read", "jobs"], days=1)
        profile = EXAMPLE_TEXT.replace("name: ", "cluster: cluster9\nname: ", 1) if where == "profile" else EXAMPLE_TEXT
        body = {
            "profile_yaml": profile,
            "filename": "train.yaml",
            "overrides": {} if where == "profile" else {"cluster": "cluster9"},
        }
        resp = client.post("/api/v1/jobs", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {token}")
        errors = {e["field"]: e for e in resp.json()["errors"]}
        assert "cluster" in errors, resp.json()
        text = errors["cluster"]["message"]
        if where == "profile":
            assert errors["cluster"]["line"] == 2, errors
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    assert "Cluster 'cluster9' is not served by this portal. Choose one of: cluster1, cluster2." in text
    assert Job.objects.count() == 0


def test_the_gpu_table_has_a_section_per_cluster_with_the_h100_row(client, alice, two_clusters):
    page = BeautifulSoup(client.get("/").content.decode(), "html.parser")
    sections = {s["data-cluster"]: s for s in page.select("[data-testid=cluster-gpus]")}
    assert list(sections) == ["cluster1", "cluster2"]
    assert sections["cluster2"].select_one('tr[data-partition="gpu"][data-gpu-type="h100"]') is not None
    assert sections["cluster1"].select_one('tr[data-partition="train"][data-gpu-type="a100"]') is not None
    assert "Updated" in sections["cluster2"].get_text()


def test_one_cluster_unreachable_leaves_the_other_live_and_says_which(client, alice, two_clusters):
    """cluster2's slurmctld stopped: pages say so by name and go on showing cluster1."""
    down = snapshot_failed(
        snapshot_load(cluster="cluster2"), SlurmUnreachable(["squeue"], None, message="no answer"), now=time.time()
    )
    snapshot_store(down)
    page = BeautifulSoup(client.get("/").content.decode(), "html.parser")
    sections = {s["data-cluster"]: s for s in page.select("[data-testid=cluster-gpus]")}
    assert (
        sections["cluster2"].select_one("[data-reason=cluster-unreachable]").get_text().startswith("cluster2 unreachable since")
    )
    assert sections["cluster1"].select_one("[data-reason]") is None and "Updated" in sections["cluster1"].get_text()
    table = BeautifulSoup(client.get("/jobs/table/").content.decode(), "html.parser")
    assert [t.get_text().startswith("cluster2 unreachable since") for t in table.select("[data-reason]")] == [True]
    clusters = {c["name"]: c for c in client.get("/api/v1/clusters").json()["items"]}
    assert (
        clusters["cluster2"]["freshness"]["reasons"] == ["cluster-unreachable"]
        and clusters["cluster1"]["freshness"]["stale"] is False
    )
    assert clusters["cluster2"]["partitions"] == ["gpu", "small"] and clusters["cluster1"]["sessions"] is True


def test_a_cluster_whose_json_version_is_unknown_says_so_and_never_shows_a_misread_queue(client, alice, two_clusters):
    """Bad input: Slurm upgraded to a version without an adapter: the poll stops with the
    adapter's sentence, and every page says so for that cluster (its last figures stay, marked)."""
    from slurm.adapters import adapter_for
    from slurm.errors import SlurmVersionUnknown

    newer = {
        "meta": {
            "plugin": {"data_parser": "data_parser/v0.0.44"},
            "slurm": {"version": {"major": "26", "minor": "05", "micro": "1"}},
        }
    }
    with pytest.raises(SlurmVersionUnknown) as caught:
        adapter_for(newer, argv=["squeue", "--json", "-t", "all"])
    snapshot_store(snapshot_failed(snapshot_load(cluster="cluster2"), caught.value, now=time.time()))
    table = BeautifulSoup(client.get("/jobs/table/").content.decode(), "html.parser")
    notice = table.select_one("[data-reason=cluster-not-understood]")
    assert notice is not None and notice.get_text().startswith("cluster2: Slurm 26.05 output not understood yet")
    clusters = {c["name"]: c for c in client.get("/api/v1/clusters").json()["items"]}
    assert clusters["cluster2"]["freshness"]["reasons"] == ["cluster-not-understood"]
