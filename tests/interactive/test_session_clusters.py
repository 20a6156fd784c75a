"""Sessions on the cluster their owner chooses, among those with ``sessions = true``: the form and the
API offer and check the cluster (with that cluster's partitions, GPU types and policy), a session is
sent, cancelled and polled through its own cluster's gateway and snapshot (a scripted transport per
cluster: the argv each gateway was sent), and keeps its cluster when the default changes. The hub
never chooses: the spawn check and the submit take the cluster from the portal's Session row.

The clusters are the recorded ones, as cluster/clusters.toml has them: the 22.05 recording as
cluster1 (partitions interactive, small, train) and the 24.11 one as cluster2 (gpu, small)."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup
from msgspec.structs import replace as job_replace

from interactive import hub
from interactive.models import Session, SessionState
from interactive.presets import last_session_preset
from slurm import SlurmGateway
from slurm.snapshot import snapshot_load, snapshot_store, snapshot_take
from tests.fakes import FakeTransport
from tests.slurm.recorded import poll_transport

from .conftest import TEST_HUB_PART
from .test_options_and_internal import TOKEN, post

pytestmark = pytest.mark.django_db

HELPER = "/usr/local/libexec/gpuportal/gpuportal-sbatch"  # settings.PORTAL_SBATCH_HELPER's default
PASSWD = "alice:x:1001:1001::/home/alice:/bin/bash\n"
ON_CLUSTER2 = dict(cluster="cluster2", ide="lab", partition="small", gpu_count="0", cpus="1", memory_gb="2", hours="1")


def clusters_file(tmp_path, *sessions: str, name: str = "clusters.toml") -> str:
    """A clusters file with cluster1 (the default) and cluster2, ``sessions = true`` on ``sessions``."""
    path = tmp_path / name
    path.write_text(
        "".join(
            f'[[clusters]]\nname = "{c}"\nsessions = {"true" if c in sessions else "false"}\n' for c in ("cluster1", "cluster2")
        )
    )
    return str(path)


@pytest.fixture
def world(settings, tmp_path, clean_cache, django_user_model, monkeypatch):
    """Both clusters run sessions; both polled now; one scripted gateway per cluster; a hub that
    accepts every start (``world["sent"]``: what it was sent). alice (team vision) signed in."""
    settings.PORTAL_CLUSTERS_FILE = clusters_file(tmp_path, "cluster1", "cluster2")
    settings.PORTAL_PARTITIONS = []
    settings.PORTAL_SESSION_PARTITIONS = ["interactive", "small"]
    settings.PORTAL_SESSION_MAX_GPUS = 2
    settings.PORTAL_HUB_TOKEN = TOKEN
    settings.PORTAL_HOME_CACHE_SECONDS = 0
    now = time.time()
    snapshot_store(snapshot_take(SlurmGateway(poll_transport("22.05")), now=now, cluster="cluster1"))
    snapshot_store(snapshot_take(SlurmGateway(poll_transport("24.11")), now=now, cluster="cluster2"))
    fakes = {"cluster1": FakeTransport(), "cluster2": FakeTransport()}
    monkeypatch.setattr("slurm.gateway._gateways", {name: SlurmGateway(fake, cluster=name) for name, fake in fakes.items()})
    sent: list[dict] = []
    monkeypatch.setattr(hub, "ensure_user", lambda username: None)
    monkeypatch.setattr(hub, "remove_stopped_servers", lambda username: 0)
    monkeypatch.setattr(hub, "start_server", lambda username, server, options: sent.append(options) or False)
    monkeypatch.setattr(hub, "servers", lambda username: {})
    alice = django_user_model.objects.create(username="alice", oidc_issuer="t", oidc_sub="a", slurm_accounts=["vision"])
    return {"fakes": fakes, "sent": sent, "alice": alice}


def page(client, **query) -> BeautifulSoup:
    return BeautifulSoup(client.get("/sessions/", query).content.decode(), "html.parser")


def start_on_cluster2(client, world) -> Session:
    """alice starts a session on cluster2 from the form, and the hub's spawner checks it."""
    client.force_login(world["alice"])
    resp = client.post("/sessions/", ON_CLUSTER2)
    assert resp.status_code == HTTPStatus.FOUND, resp.content.decode()[-3000:]
    session = Session.objects.get()
    r = post(
        client, "/hub-internal/spawn-check", {"user": "alice", "server_name": session.server_name, "options": world["sent"][-1]}
    )
    assert r.status_code == 200, r.content
    session.refresh_from_db()
    return session


def test_the_form_offers_the_cluster_only_with_two_session_clusters(client, world, settings, tmp_path):
    client.force_login(world["alice"])
    settings.PORTAL_CLUSTERS_FILE = clusters_file(tmp_path, "cluster1", name="one.toml")
    assert page(client).select("#id_cluster") == []  # one cluster runs sessions: no new field
    settings.PORTAL_CLUSTERS_FILE = clusters_file(tmp_path, "cluster1", "cluster2", name="two.toml")
    html = page(client)
    assert [o["value"] for o in html.select("#id_cluster option")] == ["cluster1", "cluster2"]
    assert html.select_one("#id_cluster option[selected]")["value"] == "cluster1"  # the default session cluster
    assert [o["value"] for o in html.select("#id_partition option")] == ["interactive", "small"]
    # Choosing cluster2 reloads the form with its session partitions and GPU types, keeping what was typed.
    html = page(client, cluster="cluster2", cpus="3")
    assert html.select_one("#id_cluster option[selected]")["value"] == "cluster2"
    assert [o["value"] for o in html.select("#id_partition option")] == ["small"]
    types = {o["value"] for o in html.select("#id_gpu_type option")}
    assert "l40s" in types and "a100" not in types
    assert html.select_one("#id_cpus")["value"] == "3"


def test_the_cluster_select_reloads_the_session_form_by_post_and_starts_nothing(client, world, settings, tmp_path):
    client.force_login(world["alice"])
    settings.PORTAL_CLUSTERS_FILE = clusters_file(tmp_path, "cluster1", "cluster2", name="two.toml")
    select = page(client).select_one("#id_cluster")
    assert (select["hx-post"], json.loads(select["hx-vals"])) == ("/sessions/", {"form_reload": "cluster"})
    resp = client.post("/sessions/", {"cluster": "cluster2", "cpus": "3", "form_reload": "cluster"})
    assert resp.status_code == 200 and resp["HX-Push-Url"] == "/sessions/?cluster=cluster2"
    html = BeautifulSoup(resp.content.decode(), "html.parser")
    assert [o["value"] for o in html.select("#id_partition option")] == ["small"]
    assert html.select_one("#id_cpus")["value"] == "3"
    assert Session.objects.count() == 0 and world["sent"] == []


def test_a_session_on_cluster2_is_sent_cancelled_and_polled_on_cluster2(client, world):
    session = start_on_cluster2(client, world)
    assert (session.cluster, session.partition) == ("cluster2", "small")
    assert "cluster" not in world["sent"][-1]  # the hub is not told: the portal's row says where
    fake1, fake2 = world["fakes"]["cluster1"], world["fakes"]["cluster2"]
    fake2.expect(["getent", "passwd", "alice"], stdout=PASSWD)
    fake2.expect(
        ["sudo", "-n", "-u", "alice", "--", HELPER, "/home/alice/.gpuportal/sessions", "--", "--parsable"], stdout="4343\n"
    )
    r = post(client, "/hub-internal/session-submit", {"user": "alice", "key": str(session.key), **TEST_HUB_PART})
    assert r.status_code == 200, r.content
    assert (r.json()["job_id"], r.json()["cluster"]) == (4343, "cluster2")
    assert '#SBATCH --partition="small"' in fake2.calls[-1][1].decode()
    # Its state comes from cluster2's snapshot: the job is there (running), not in cluster1's.
    snapshot = snapshot_load(with_jobs=True, cluster="cluster2")
    job = job_replace(snapshot.jobs[0], job_id=4343, state="RUNNING", comment=f"portal:{session.key}")
    snapshot_store(replace(snapshot, jobs=[job]))
    status = client.get(f"/hub-internal/session-status?user=alice&key={session.key}", HTTP_AUTHORIZATION=f"Bearer {TOKEN}")
    assert (status.json()["state"], status.json()["node"]) == ("RUNNING", job.nodes)
    fake2.expect(["sudo", "-n", "-u", "alice", "--", "scancel", "4343"])
    r = post(client, "/hub-internal/session-cancel", {"user": "alice", "key": str(session.key)})
    assert r.status_code == 200 and r.json() == {"cancelled": True}
    assert fake1.calls == [] and fake2.script == []  # nothing went to cluster1


def test_the_hub_cannot_choose_the_cluster(client, world):
    """The hub only names the session: a spawn check whose options name another cluster than the
    portal's row recorded, or a submit that names one, is refused; nothing is sent anywhere."""
    client.force_login(world["alice"])
    assert client.post("/sessions/", ON_CLUSTER2).status_code == HTTPStatus.FOUND
    session = Session.objects.get()  # REQUESTED, on cluster2: the hub now asks the spawn check
    options = {**world["sent"][-1], "cluster": "cluster1"}
    r = post(client, "/hub-internal/spawn-check", {"user": "alice", "server_name": session.server_name, "options": options})
    assert r.status_code == 400
    assert r.json()["errors"][0] == {
        "field": "cluster",
        "message": "A session's cluster is chosen on the portal's Sessions page or its API, not here: it was started on "
        "cluster2. Start it from the portal to choose another cluster.",
    }
    assert Session.objects.get(pk=session.pk).cluster == "cluster2"
    r = post(
        client, "/hub-internal/spawn-check", {"user": "alice", "server_name": session.server_name, "options": world["sent"][-1]}
    )
    assert r.status_code == 200, r.content
    body = {"user": "alice", "key": str(session.key), "cluster": "cluster1", **TEST_HUB_PART}
    r = post(client, "/hub-internal/session-submit", body)
    assert r.status_code == 400 and r.json()["errors"][0]["field"] == "cluster"
    assert "the portal sends its job to the cluster chosen when it was started" in r.json()["errors"][0]["message"]
    assert world["fakes"]["cluster1"].calls == world["fakes"]["cluster2"].calls == []
    assert Session.objects.get(pk=session.pk).cluster == "cluster2" and Session.objects.count() == 1


def test_a_start_from_the_portal_keeps_its_cluster_through_the_spawn_check(client, world):
    """The hub's options naming the row's own cluster are accepted; the row's cluster is kept."""
    client.force_login(world["alice"])
    assert client.post("/sessions/", ON_CLUSTER2).status_code == HTTPStatus.FOUND
    session = Session.objects.get()
    options = {**world["sent"][-1], "cluster": "cluster2"}
    r = post(client, "/hub-internal/spawn-check", {"user": "alice", "server_name": session.server_name, "options": options})
    assert r.status_code == 200, r.content
    assert Session.objects.get(pk=session.pk).cluster == "cluster2"


@pytest.mark.parametrize(
    "cluster, words",
    [
        ("nowhere", "There is no cluster called 'nowhere'. Choose one of: cluster1, cluster2 (the default is cluster1)."),
        ("cluster2", "cluster2 cannot be reached now"),
    ],
)
def test_an_unknown_or_down_cluster_is_refused_on_the_form_and_in_the_api(client, world, cluster, words):
    snapshot = snapshot_load(with_jobs=True, cluster="cluster2")  # cluster2's poll fails for an hour
    snapshot_store(
        replace(snapshot, taken_at=time.time() - 3600, error="ssh: connection refused", error_since=time.time() - 3600)
    )
    client.force_login(world["alice"])
    resp = client.post("/sessions/", {**ON_CLUSTER2, "cluster": cluster})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    error = BeautifulSoup(resp.content.decode(), "html.parser").select_one('[data-testid="error-cluster"]')
    assert error is not None and words in error.text, resp.content.decode()[-4000:]
    r = client.post(
        "/api/v1/sessions",
        {"cluster": cluster, "partition": "small", "hours": 1, "cpus": 1, "memory": "2G"},
        content_type="application/json",
    )
    assert r.status_code == HTTPStatus.BAD_REQUEST, r.content
    assert [(e["field"], words in e["message"]) for e in r.json()["errors"]] == [("cluster", True)]
    assert not Session.objects.exists() and world["sent"] == []


def test_a_cluster_that_runs_no_sessions_is_refused_saying_where_they_run(client, world, settings, tmp_path):
    settings.PORTAL_CLUSTERS_FILE = clusters_file(tmp_path, "cluster1", name="one.toml")
    client.force_login(world["alice"])
    r = client.post("/api/v1/sessions", {"cluster": "cluster2", "hours": 1}, content_type="application/json")
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert r.json()["errors"][0]["message"] == (
        "Sessions do not run on cluster2: for cluster2, submit a batch job. Choose one of: cluster1 (the default is cluster1)."
    )
    assert client.get("/api/v1/sessions/kinds", {"cluster": "cluster2"}).status_code == HTTPStatus.BAD_REQUEST


def test_the_api_starts_a_session_on_cluster2(client, world):
    client.force_login(world["alice"])
    r = client.post(
        "/api/v1/sessions",
        {"cluster": "cluster2", "partition": "small", "gpus": 1, "gpu_type": "l40s", "hours": 1, "cpus": 1, "memory": "2G"},
        content_type="application/json",
    )
    assert r.status_code == HTTPStatus.CREATED, r.content
    assert Session.objects.get().cluster == r.json()["cluster"] == "cluster2"
    assert client.get("/api/v1/sessions").json()["items"][0]["cluster"] == "cluster2"
    # cluster1's policy would refuse an L40S: the check was cluster2's
    r = client.post(
        "/api/v1/sessions",
        {"partition": "interactive", "gpus": 1, "gpu_type": "l40s", "hours": 1, "cpus": 1, "memory": "2G"},
        content_type="application/json",
    )
    assert r.status_code == HTTPStatus.BAD_REQUEST and "l40s" in r.content.decode()


def test_a_session_on_cluster1_stays_there_when_the_default_changes(client, world, settings, tmp_path):
    client.force_login(world["alice"])
    ok = client.post("/sessions/", {**ON_CLUSTER2, "cluster": "", "partition": "interactive"})
    assert ok.status_code == HTTPStatus.FOUND, ok.content.decode()[-2000:]
    session = Session.objects.get()
    assert session.cluster == "cluster1"  # the default session cluster, at the start
    Session.objects.filter(pk=session.pk).update(state="STARTING", slurm_job_id=4242)
    settings.PORTAL_CLUSTERS_FILE = clusters_file(tmp_path, "cluster2", name="moved.toml")  # now cluster2 only
    # The card reads cluster1's snapshot for its job.
    snapshot = snapshot_load(with_jobs=True, cluster="cluster1")
    job = job_replace(snapshot.jobs[0], job_id=4242, state="PENDING", comment=f"portal:{session.key}")
    snapshot_store(replace(snapshot, jobs=[job]))
    from interactive.services import session_cards

    cards, _ = session_cards(user=world["alice"])
    assert cards[0].job is not None and cards[0].job.job_id == 4242
    # Cancelled on cluster1, through cluster1's gateway.
    world["fakes"]["cluster1"].expect(["sudo", "-n", "-u", "alice", "--", "scancel", "4242"])
    r = post(client, "/hub-internal/session-cancel", {"user": "alice", "key": str(session.key)})
    assert r.status_code == 200 and world["fakes"]["cluster2"].calls == []
    # "Start the last session again": cluster1 no longer runs sessions, so it starts on the default, saying so.
    last = last_session_preset(user=world["alice"])
    assert "cluster" not in last.options
    assert "cluster1 no longer runs sessions, so it starts on cluster2" in last.details


def test_the_last_sessions_button_keeps_its_cluster(client, world):
    start_on_cluster2(client, world)
    last = last_session_preset(user=world["alice"])
    assert last.options["cluster"] == "cluster2" and "cluster cluster2" in last.details
    from interactive.starts import session_start_preset

    _preset, again = session_start_preset(user=world["alice"], key=last.key)
    assert again.cluster == "cluster2"


def test_the_local_cluster2_offers_its_own_session_partitions(client, world, settings):
    """cluster/clusters.toml: cluster2 has no interactive partition; its sessions use small and gpu."""
    from tests.conftest import REPO

    settings.PORTAL_CLUSTERS_FILE = str(REPO / "cluster" / "clusters.toml")
    settings.PORTAL_SESSION_PARTITIONS = ["interactive"]
    client.force_login(world["alice"])
    assert [o["value"] for o in page(client, cluster="cluster2").select("#id_partition option")] == ["small", "gpu"]
    assert [o["value"] for o in page(client).select("#id_partition option")] == ["interactive"]
    resp = client.post("/sessions/", {**ON_CLUSTER2, "partition": "interactive"})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    assert "Sessions run in the interactive partition(s) only: small, gpu." in resp.content.decode()


def test_each_card_names_its_cluster_when_sessions_run_on_several(client, world, settings, tmp_path):
    alice = world["alice"]
    for name, cluster in (("lab-1", "cluster1"), ("lab-2", "cluster2")):
        Session.objects.create(user=alice, server_name=name, ide="lab", partition="small", memory_mb=1024,
                               time_limit_min=60, state=SessionState.RUNNING, cluster=cluster)  # fmt: skip
    client.force_login(alice)
    for html in (page(client), BeautifulSoup(client.get("/sessions/cards/").content.decode(), "html.parser")):
        named = {
            card["data-session"]: card.select_one("[data-testid=session-cluster]").get_text()
            for card in html.select("[data-testid=session-card]")
        }
        assert sorted(named.values()) == ["cluster1", "cluster2"], named
    settings.PORTAL_CLUSTERS_FILE = clusters_file(tmp_path, "cluster1", name="one.toml")  # one session cluster
    assert page(client).select("[data-testid=session-cluster]") == []


def test_a_start_naming_no_cluster_is_refused_when_the_default_is_down(client, world):
    """The API and the CLI may name no cluster: the default's being down is said at once, with the
    clusters to choose instead, and nothing is started there or moved elsewhere unasked. Listing the
    kinds still answers."""
    snapshot = snapshot_load(with_jobs=True, cluster="cluster1")  # cluster1 (the default)'s poll fails for an hour
    snapshot_store(
        replace(snapshot, taken_at=time.time() - 3600, error="ssh: connection refused", error_since=time.time() - 3600)
    )
    client.force_login(world["alice"])
    r = client.post(
        "/api/v1/sessions", {"partition": "small", "hours": 1, "cpus": 1, "memory": "2G"}, content_type="application/json"
    )
    assert r.status_code == HTTPStatus.BAD_REQUEST, r.content
    [error] = r.json()["errors"]
    assert error["field"] == "cluster"
    assert error["message"].startswith("cluster1, the default cluster for sessions, cannot be reached now (")
    assert error["message"].endswith("; choose cluster2."), error["message"]
    assert not Session.objects.exists() and world["sent"] == []
    assert client.get("/api/v1/sessions/kinds").status_code == HTTPStatus.OK
    # The preset buttons of the default cluster say the same and start nothing.
    from interactive.starts import start_choices

    choices, _ = start_choices(user=world["alice"])
    on_default = [c for c in choices if "cluster" not in c.preset.options]
    assert on_default and all(any("cannot be reached now" in w for w in c.why_not) for c in on_default), choices
    # Named, cluster2 starts as before.
    r = client.post(
        "/api/v1/sessions",
        {"cluster": "cluster2", "partition": "small", "hours": 1, "cpus": 1, "memory": "2G"},
        content_type="application/json",
    )
    assert r.status_code == HTTPStatus.CREATED, r.content
    assert Session.objects.get().cluster == "cluster2"
