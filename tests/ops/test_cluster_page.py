"""The cluster page on recorded Slurm outputs: every node with its state and flags
as Slurm wrote them, the reason with who and when, GPUs, CPUs, memory and its jobs (linked when the
portal has the row), partitions with limits, reservations; no Slurm call per view. Drain, resume and
maintenance reservations through a scripted gateway: the exact argv (a reason with shell
metacharacters verbatim, one argv element), the audit rows, and every refusal with a sentence and no
Slurm call (or Slurm's own words when it refuses). Researchers and leads get 403 everywhere."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from http import HTTPStatus

import msgspec
import pytest
from bs4 import BeautifulSoup
from django.core.cache import cache
from django.db import connection
from django.middleware.csrf import CSRF_TOKEN_LENGTH
from django.test.utils import CaptureQueriesContext

from audit.models import AuditEvent
from jobs.models import Job
from ops.cluster_cache import CSRF_MARK, page_key
from slurm import SlurmGateway
from slurm.snapshot import snapshot_store, snapshot_take
from teams.models import Membership, Role, Team
from tests.slurm.recorded import poll_transport

pytestmark = pytest.mark.django_db


@pytest.fixture
def people(django_user_model, clean_cache):
    """alice (researcher), carol (lead of vision), dana (admin)."""
    users = {n: django_user_model.objects.create(username=n, slurm_accounts=["vision"]) for n in ("alice", "carol", "dana")}
    users["dana"].is_staff = True
    users["dana"].save()
    Membership.objects.create(user=users["carol"], team=Team.objects.create(name="vision"), role=Role.LEAD)
    return users


def _as(client, user):
    client.force_login(user)
    return client


def _soup(response):
    return BeautifulSoup(response.content, "html.parser")


def test_the_page_shows_every_node_as_slurm_wrote_it_without_calling_slurm(client, people, snapshot, slurm):
    job = Job.objects.create(
        user=people["alice"],
        account="vision",
        name="train",
        partition="train",
        memory_mb=1,
        time_limit_min=10,
        script="true",
        state="RUNNING",
        slurm_job_id=2,
        slurm_cluster="cluster1",
    )
    response = _as(client, people["dana"]).get("/ops/cluster/cluster1/")
    assert response.status_code == HTTPStatus.OK and slurm.calls == []
    page = _soup(response)
    rows = {tr["data-node"]: tr for tr in page.select("[data-testid=node-table] tbody tr")}
    assert set(rows) == {"node1", "node2", "node3"}
    node3 = rows["node3"]
    assert node3.select_one("[data-testid=node-state]").text == "IDLE+DRAIN"
    assert "unavailable" in node3.text and "drain requested" in node3.text  # in words, not colour alone
    assert node3.select_one("[data-testid=node-reason]").text == "disk swap"
    assert "by root" in node3.text and "2026-" in node3.text  # who and when (reason_changed_at)
    assert "t4 0 / 2" in node3.text  # GPUs by type, allocated / total
    assert node3.select_one("[data-testid=resume-node3]") is not None
    assert rows["node1"].select_one("[data-testid=node-state]").text.startswith(snapshot.nodes[0].state.upper())
    link = rows["node1"].select_one(f"a[href='/jobs/{job.key}/']")
    assert link is not None and link.text == "2"  # the portal's row is linked; others are plain ids
    assert "3" in rows["node2"].text and rows["node2"].select_one("a[href^='/jobs/']") is None
    partitions = {tr["data-partition"]: tr.text for tr in page.select("[data-testid=partition-table] tbody tr")}
    assert set(partitions) == {"interactive", "train", "small"}
    assert "2 days" in partitions["train"] and "node[1-3]" in partitions["train"] and "(default)" in partitions["train"]
    reservations = {tr["data-reservation"]: tr.text for tr in page.select("[data-testid=reservation-table] tbody tr")}
    assert set(reservations) == {"fx_maint", "fx_team"}
    assert "MAINT,IGNORE_JOBS,SPEC_NODES" in reservations["fx_maint"] and "(maintenance)" in reservations["fx_maint"]
    assert "accounts nlp" in reservations["fx_team"]


def test_the_body_is_built_once_per_snapshot_and_then_read_back(client, people, snapshot, slurm):
    """A snapshot stored without the poller's rows (``snapshot_store`` alone): the first view builds
    them (one query for the jobs' links, one for the drained nodes' audit rows) and keeps them; later views of the same snapshot make neither query
    and show the same rows with their own CSRF token; a newer poll's snapshot is built again."""
    _as(client, people["dana"])
    client.get("/ops/cluster/cluster1/body/")  # session and user loaded once
    cache.delete(page_key("cluster1"))  # as if this snapshot had not been viewed yet

    def body():
        with CaptureQueriesContext(connection) as queries:
            response = client.get("/ops/cluster/cluster1/body/")
        assert response.status_code == HTTPStatus.OK and slurm.calls == []
        own = [q["sql"] for q in queries.captured_queries if "jobs_job" in q["sql"] or "jobs_auditevent" in q["sql"]]
        return _soup(response), own

    first, own = body()
    assert len(own) == 2, own  # the jobs' rows (links) and the drained nodes' audit rows
    again, own = body()
    assert own == []  # read back: no query of its own
    assert [tr["data-state"] for tr in again.select("tr[data-node]")] == [
        tr["data-state"] for tr in first.select("tr[data-node]")
    ]
    token = again.select_one("form[action$='/nodes/node3/resume/'] input[name=csrfmiddlewaretoken]")["value"]
    assert CSRF_MARK not in str(again) and len(token) == CSRF_TOKEN_LENGTH  # the request's own (masked) token

    node3 = next(n for n in snapshot.nodes if n.name == "node3")
    newer = replace(
        snapshot,
        taken_at=snapshot.taken_at + 5,
        nodes=[msgspec.structs.replace(node3, state="idle", flags=(), reason="")]
        + [n for n in snapshot.nodes if n.name != "node3"],
    )
    snapshot_store(newer)
    fresh, own = body()
    assert len(own) == 1, own  # no drained node now: only the jobs' links
    assert fresh.select_one("tr[data-node=node3]")["data-state"] == "IDLE"


def test_an_unknown_cluster_is_404(client, people, snapshot):
    assert _as(client, people["dana"]).get("/ops/cluster/nope/").status_code == HTTPStatus.NOT_FOUND


def test_drain_runs_scontrol_with_the_reason_verbatim_and_audits(client, people, snapshot, slurm):
    reason = "disk swap; rm -rf / $(reboot) `id` | tee x && echo 'q\"s'"
    slurm.expect(["scontrol", "update", "NodeName=node1", "State=DRAIN", f"Reason={reason}"])
    response = _as(client, people["dana"]).post("/ops/cluster/cluster1/drain/", {"node": "node1", "reason": reason})
    assert response.status_code == HTTPStatus.FOUND and not slurm.script
    assert slurm.calls[0][0] == ["scontrol", "update", "NodeName=node1", "State=DRAIN", f"Reason={reason}"]
    event = AuditEvent.objects.get(action="node.drain")
    assert event.actor == people["dana"] and event.target == "node:cluster1/node1"
    assert event.old["reason"] == "" and event.old["state"] == snapshot.nodes[0].state_text
    assert event.new == {"state": "DRAIN", "reason": reason}


@pytest.mark.parametrize(
    ("form", "words"),
    [
        ({"node": "node9", "reason": "disk"}, "There is no node 'node9' in cluster1"),
        ({"node": "node1", "reason": "  "}, "Give a reason for the drain"),
        ({"node": "node1", "reason": "disk\nswap"}, "line break or another control character"),
        ({"node": "node1", "reason": "disk\x1b[31m"}, "line break or another control character"),
        ({"node": "node1", "reason": "x" * 201}, "keep it to 200"),
    ],
)
def test_bad_drains_are_refused_with_a_sentence_and_no_slurm_call(client, people, snapshot, slurm, form, words):
    response = _as(client, people["dana"]).post("/ops/cluster/cluster1/drain/", form)
    assert response.status_code == HTTPStatus.BAD_REQUEST and slurm.calls == []
    assert words in _soup(response).text
    assert not AuditEvent.objects.filter(action="node.drain").exists()


def test_a_reason_over_the_limit_is_refused_once_in_the_service_s_words(client, people, snapshot, slurm):
    """The form's limit is the service's (200): 2,500 characters get that one sentence, not a false
    "Give a reason" beside a length error of the form's own."""
    for length in (2500, 201):
        response = _as(client, people["dana"]).post("/ops/cluster/cluster1/drain/", {"node": "node1", "reason": "x" * length})
        assert response.status_code == HTTPStatus.BAD_REQUEST and slurm.calls == []
        errors = [" ".join(e.text.split()) for e in _soup(response).select(".error")]
        assert errors == [f"The reason for the drain has {length} characters; keep it to 200."], errors
        assert _soup(response).select_one("#id_reason")["maxlength"] == "200"
    assert not AuditEvent.objects.filter(action="node.drain").exists()


def test_slurms_refusal_is_shown_in_its_words(client, people, snapshot, slurm):
    slurm.expect(
        ["scontrol", "update", "NodeName=node1", "State=RESUME"],
        stderr="slurm_update error: Invalid node state specified\n",
        returncode=1,
    )
    response = _as(client, people["dana"]).post("/ops/cluster/cluster1/nodes/node1/resume/")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    error = _soup(response).select_one("[data-testid=action-error]").text
    assert "Slurm refused: slurm_update error: Invalid node state specified" in error
    assert "only a drained, draining or down node can be resumed" in error
    assert not AuditEvent.objects.filter(action="node.resume").exists()


def test_resume_audits_the_state_before(client, people, snapshot, slurm):
    slurm.expect(["scontrol", "update", "NodeName=node3", "State=RESUME"])
    assert _as(client, people["dana"]).post("/ops/cluster/cluster1/nodes/node3/resume/").status_code == HTTPStatus.FOUND
    event = AuditEvent.objects.get(action="node.resume")
    assert event.old["state"] == "IDLE+DRAIN" and event.old["reason"] == "disk swap" and event.old["reason_set_by"] == "root"
    assert event.new == {"state": "RESUME"}


def _window(start_min: int, end_min: int) -> tuple[datetime, datetime, dict]:
    now = datetime.now(UTC).replace(second=0, microsecond=0)
    start, end = now + timedelta(minutes=start_min), now + timedelta(minutes=end_min)
    return start, end, {"start": start.strftime("%Y-%m-%dT%H:%M"), "end": end.strftime("%Y-%m-%dT%H:%M")}


def test_a_maintenance_reservation_is_made_in_utc_and_audited(client, people, snapshot, slurm):
    start, end, times = _window(30, 90)
    argv = [
        "env", "TZ=UTC", "scontrol", "create", "reservation", "ReservationName=maint_test",
        f"StartTime={start:%Y-%m-%dT%H:%M:%S}", f"EndTime={end:%Y-%m-%dT%H:%M:%S}",
        "Nodes=node3", "Users=root", "Flags=MAINT,IGNORE_JOBS",
    ]  # fmt: skip
    slurm.expect(argv, stdout="Reservation created: maint_test\n")
    response = _as(client, people["dana"]).post(
        "/ops/cluster/cluster1/reservations/", {"nodes": "node3", "name": "maint_test", "ignore_jobs": "on", **times}
    )
    assert response.status_code == HTTPStatus.FOUND and not slurm.script
    event = AuditEvent.objects.get(action="reservation.create")
    assert event.target == "reservation:cluster1/maint_test" and event.old == {}
    assert event.new["flags"] == "MAINT,IGNORE_JOBS" and event.new["start"] == start.isoformat()
    from django.core.cache import cache

    assert cache.get("cluster:cluster1:reread")  # the next poll reads it back at once


def test_a_duration_gives_the_end_and_an_empty_name_maint_start(client, people, snapshot, slurm):
    start, _, times = _window(30, 0)
    slurm.expect(["env", "TZ=UTC", "scontrol", "create", "reservation", f"ReservationName=maint_{start:%Y%m%d_%H%M}",
                  f"StartTime={start:%Y-%m-%dT%H:%M:%S}", f"EndTime={start + timedelta(minutes=45):%Y-%m-%dT%H:%M:%S}",
                  "Nodes=node1,node2", "Users=root", "Flags=MAINT"])  # fmt: skip
    response = _as(client, people["dana"]).post(
        "/ops/cluster/cluster1/reservations/", {"nodes": "node[1-2]", "start": times["start"], "duration": "45"}
    )
    assert response.status_code == HTTPStatus.FOUND and not slurm.script


@pytest.mark.parametrize(
    ("minutes", "nodes", "words"),
    [
        ((-120, -60), "node3", "has passed"),
        ((60, 30), "node3", "is not after the start"),
        ((30, 60), "node7", "cluster1 (Slurm 22.05: A100, T4) has no node node7"),
        ((30, 60), "node[1-", "is not a Slurm node list"),
        ((30, 60), "", "Name the nodes to reserve"),
    ],
)
def test_bad_windows_are_refused_before_slurm(client, people, snapshot, slurm, minutes, nodes, words):
    *_, times = _window(*minutes)
    response = _as(client, people["dana"]).post("/ops/cluster/cluster1/reservations/", {"nodes": nodes, **times})
    assert response.status_code == HTTPStatus.BAD_REQUEST and slurm.calls == []
    assert words in _soup(response).text
    assert not AuditEvent.objects.filter(action="reservation.create").exists()


@pytest.mark.parametrize(
    ("form", "field", "words"),
    [
        ({"start": "9999-12-31 23:00", "end": "", "duration": "120"}, "start", "The start (9999-12-31 23:00 UTC) is more than 2"),
        ({"end": "9999-12-31 23:59"}, "end", "The end (9999-12-31 23:59 UTC) is more than 2 years ahead"),
    ],
)
def test_a_window_years_ahead_is_refused_in_words(client, people, snapshot, slurm, form, field, words):
    """A typo's year 9999 once overflowed the end's arithmetic (HTTP 500) or went to scontrol."""
    *_, times = _window(30, 90)
    response = _as(client, people["dana"]).post("/ops/cluster/cluster1/reservations/", {"nodes": "node3", **times, **form})
    assert response.status_code == HTTPStatus.BAD_REQUEST and slurm.calls == []
    error = _soup(response).select_one(f"[data-testid=error-{field}]")
    assert error is not None and words in error.text, _soup(response).text
    assert "years ahead; plan a window that ends by " in error.text
    assert not AuditEvent.objects.filter(action="reservation.create").exists()


def test_busy_nodes_get_slurms_words_and_when_the_jobs_end(client, people, snapshot, slurm):
    """Job 5 runs on node3 until its time limit (squeue end_time 1795970235): the window over it is
    refused by Slurm; the page says to tick the box or start after that time."""
    start, end, times = _window(30, 90)
    slurm.expect(
        ["env", "TZ=UTC", "scontrol", "create", "reservation", f"ReservationName=maint_{start:%Y%m%d_%H%M}",
         f"StartTime={start:%Y-%m-%dT%H:%M:%S}", f"EndTime={end:%Y-%m-%dT%H:%M:%S}", "Nodes=node3", "Users=root", "Flags=MAINT"],
        stdout="Note, unless nodes are directly requested a reservation must exist in a single partition.\n",
        stderr="Error creating the reservation: Requested nodes are busy\n",
        returncode=1,
    )  # fmt: skip
    from slurm.snapshot import snapshot_load

    full = snapshot_load(cluster="cluster1")
    job5 = next(j for j in full.jobs if j.job_id == 5)
    # the recorded job ended long ago; as if it still ran until an hour after the window's start
    until = int(start.timestamp()) + 3600
    snapshot_store(type(full)(**{**full.__dict__, "jobs": [msgspec.structs.replace(job5, end_time=until)]}))
    response = _as(client, people["dana"]).post("/ops/cluster/cluster1/reservations/", {"nodes": "node3", **times})
    assert response.status_code == HTTPStatus.BAD_REQUEST
    text = _soup(response).text
    assert "Slurm refused: Error creating the reservation: Requested nodes are busy" in text
    assert "tick 'ignore running jobs'" in text
    assert f"start after {datetime.fromtimestamp(until, UTC):%Y-%m-%d %H:%M} UTC" in text


def test_delete_a_reservation_audits_what_it_was(client, people, snapshot, slurm):
    slurm.expect(["scontrol", "delete", "ReservationName=fx_team"])
    response = _as(client, people["dana"]).post("/ops/cluster/cluster1/reservations/fx_team/delete/")
    assert response.status_code == HTTPStatus.FOUND and not slurm.script
    event = AuditEvent.objects.get(action="reservation.delete")
    assert event.old["accounts"] == "nlp" and event.old["nodes"] == "node3" and event.new == {}


def test_deleting_what_slurm_does_not_know_shows_its_words(client, people, snapshot, slurm):
    slurm.expect(
        ["scontrol", "delete", "ReservationName=nope"],
        stderr="delete_reservation ReservationName=nope: Requested reservation is invalid\n",
        returncode=1,
    )
    response = _as(client, people["dana"]).post("/ops/cluster/cluster1/reservations/nope/delete/")
    assert response.status_code == HTTPStatus.BAD_REQUEST
    assert "Requested reservation is invalid" in response.content.decode()


#: Every cluster page and action; researchers and leads get 403, an admin passes the check (the
#: POSTs then reach the services, which refuse here for want of a snapshot: 400, no Slurm call).
PAGES = {
    "cluster page": ("get", "/ops/cluster/", 200),
    "named page": ("get", "/ops/cluster/cluster2/", 200),
    "body": ("get", "/ops/cluster/cluster1/body/", 200),
    "drain": ("post", "/ops/cluster/cluster1/drain/", 400),
    "resume": ("post", "/ops/cluster/cluster1/nodes/node3/resume/", 400),
    "create reservation": ("post", "/ops/cluster/cluster1/reservations/", 400),
    "delete reservation": ("post", "/ops/cluster/cluster1/reservations/fx_team/delete/", 400),
}


@pytest.mark.parametrize("what", list(PAGES))
@pytest.mark.parametrize("who", ["alice", "carol", "dana"])
def test_only_admins_reach_the_cluster_page_and_its_actions(client, people, slurm, who, what):
    method, url, admin_status = PAGES[what]
    data = {"node": "node3", "reason": "x", "nodes": "node3"} if method == "post" else None
    response = getattr(_as(client, people[who]), method)(url, data)
    assert response.status_code == (admin_status if who == "dana" else HTTPStatus.FORBIDDEN), f"{who} {what}"
    assert slurm.calls == [] and not AuditEvent.objects.filter(action__startswith="node.").exists()


def test_anonymous_visitors_are_sent_to_sign_in(client, slurm):
    response = client.post("/ops/cluster/cluster1/drain/", {"node": "node3", "reason": "x"})
    assert response.status_code == HTTPStatus.FOUND and "/accounts/login/" in response["Location"] and slurm.calls == []


def test_the_top_bar_links_the_page_for_staff_only(client, people, snapshot):
    assert _soup(_as(client, people["dana"]).get("/")).select_one("[data-testid=cluster-link-top]") is not None
    assert _soup(_as(client, people["alice"]).get("/")).select_one("[data-testid=cluster-link-top]") is None


def test_the_api_gives_admins_the_nodes_and_reservations(client, people, snapshot, slurm):
    _as(client, people["dana"])
    nodes = client.get("/api/v1/cluster/cluster1/nodes").json()
    assert nodes["cluster"] == "cluster1" and nodes["count"] == 3 and slurm.calls == []
    node3 = next(n for n in nodes["items"] if n["name"] == "node3")
    assert (node3["state_text"], node3["reason"], node3["reason_set_by"], node3["available"]) == (
        "IDLE+DRAIN",
        "disk swap",
        "root",
        False,
    )
    assert node3["gpus"] == [{"type": "t4", "allocated": 0, "total": 2}]
    reservations = client.get("/api/v1/cluster/cluster1/reservations").json()
    assert [r["name"] for r in reservations["items"]] == ["fx_maint", "fx_team"] and reservations["items"][0]["maintenance"]
    assert client.get("/api/v1/cluster/nope/nodes").status_code == HTTPStatus.NOT_FOUND
    _as(client, people["carol"])
    response = client.get("/api/v1/cluster/cluster1/nodes")
    assert response.status_code == HTTPStatus.FORBIDDEN and "portal admins" in response.json()["detail"]


def test_a_node_that_does_not_respond_is_down_star_in_words_too(client, people, slurm):
    """cluster2's recording with g2's slurmd stopped (24.11 ``scontrol show node --json``): DOWN with
    NOT_RESPONDING, sinfo's ``down*``, "not responding", and Slurm's own reason and who set it."""
    from tests.slurm.recorded import recording

    fake = poll_transport("24.11")
    nodes_step = next(step for step in fake.script if step.argv[:3] == ["scontrol", "show", "node"])
    nodes_step.stdout = json.dumps(recording("24.11").doc("nodes_down")).encode()
    snapshot_store(snapshot_take(SlurmGateway(fake), cluster="cluster2"))
    row = _soup(_as(client, people["dana"]).get("/ops/cluster/cluster2/")).select_one("tr[data-node=g2]")
    assert row.select_one("[data-testid=node-state]").text == "DOWN+NOT_RESPONDING"
    assert row.select_one("[data-testid=node-short]").text == "(sinfo: down*)"
    assert "not responding" in row.text and "(unavailable)" in row.text
    assert row.select_one("[data-testid=node-reason]").text == "Not responding" and "by slurm" in row.text
    assert row.select_one("[data-testid=resume-g2]") is not None
