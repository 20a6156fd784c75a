"""Sessions on the real hub and the real cluster: spawn, reach the server through the proxy, stop;
what a user's own hub token may not do; the controller down for a minute; a job failing at start-up;
idle culling."""

from __future__ import annotations

import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
import requests
from django.utils import timezone as djtz

from accounts.models import User
from audit.models import AuditEvent
from interactive import hub as hub_client
from interactive.hub_check import sessions_hub_check
from interactive.idle import sessions_cull_idle
from interactive.models import Session, SessionState
from interactive.services import session_cards, session_start, session_stop
from portal.refusals import Refused
from slurm.clusters import default_sessions_cluster
from slurm.snapshot import snapshot_load
from tests.waiting import log_tail, pause, scontrol_show_job, wait_for

from .conftest import squeue_session_jobs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def alice(hub_portal):
    user, _ = User.objects.get_or_create(username="alice", defaults={"oidc_issuer": "test", "oidc_sub": "alice-hub-test"})
    user.slurm_accounts = ["vision"]  # as sacctmgr tells the portal at her sign-in (cluster/up.sh)
    user.save(update_fields=["slurm_accounts"])
    yield user
    # leave no server or job behind
    for s in Session.objects.filter(user=user, state__in=[SessionState.REQUESTED, SessionState.STARTING, SessionState.RUNNING]):
        try:
            hub_client.stop_server(user.username, s.server_name)
        except hub_client.HubError:
            pass
    hub_portal.cancel_jobs()  # this hub's jobs only: another test run may have sessions of alice


def wait_ready(hub, user: str, server: str, timeout: float = 120) -> dict:
    """The hub's model of ``user``'s ``server`` once the hub says it is ready; fails at once when the
    hub no longer lists it (after the first 5 s, while the spawn may not be listed yet)."""
    began = time.monotonic()

    def ready() -> dict | None:
        s = hub.api("GET", f"/users/{user}").json()["servers"].get(server)
        if s is None and time.monotonic() > began + 5:
            pytest.fail(f"server {server} vanished before it was ready:\n{hub.log()[-3000:]}")
        return s if s and s["ready"] else None

    return wait_for(
        f"{user}'s server {server} to be ready", ready, timeout=timeout, every=0.5, seen=lambda: log_tail(hub.log_file)
    )


def test_spawn_reach_through_proxy_and_stop(alice, hub_portal):
    hub = hub_portal
    started = time.monotonic()
    from slurm import gateway

    slurm_calls = []  # the gateway's record of its Slurm commands (what feeds portal_slurm_command_seconds)
    record = lambda cluster, command, seconds, ok: slurm_calls.append((cluster, command, ok))  # noqa: E731
    gateway.command_observers.append(record)
    session = session_start(
        user=alice,
        raw_options={
            "ide": "lab",
            "partition": "interactive",
            "gpu_type": "a100",
            "gpu_count": 1,
            "cpus": 2,
            "memory_mb": 2048,
            "hours": 1,
        },
    )
    server = wait_ready(hub, "alice", session.server_name)
    print(f"spawn to ready: {time.monotonic() - started:.1f} s")

    # The Slurm job carries what the portal validated, and the portal's key.
    jobs = squeue_session_jobs("alice")
    assert len(jobs) == 1
    job = jobs[0]
    assert job["Comment"] == f"portal:{session.key}"
    assert job["Account"] == "vision" == session.account  # her team's, which the portal chose and sbatch was given
    assert job["Partition"] == "interactive"
    assert "gres/gpu:a100=1" in job["TRES"] or "gres/gpu=1" in job["TRES"]
    assert job["TimeLimit"] == "01:00:00"
    # Sent by the portal through its gateway, as alice, on the session's cluster; not by the hub.
    session.refresh_from_db()
    assert session.slurm_job_id == int(job["JobId"]) and (session.cluster, "sbatch", True) in slurm_calls
    assert job["UserId"].startswith("alice(")

    # The single-user server answers through the proxy, for alice's own token.
    token = hub.user_token("alice")
    r = requests.get(f"{hub.url}{server['url']}api/status", headers={"Authorization": f"token {token}"}, timeout=30)
    assert r.status_code == 200, r.text
    assert "last_activity" in r.json()
    # The portal's service token has no access:servers scope: it cannot use alice's JupyterLab.
    r = requests.get(
        f"{hub.url}{server['url']}api/status",
        headers={"Authorization": f"token {hub.env['PORTAL_HUB_TOKEN']}"},
        timeout=30,
        allow_redirects=False,
    )
    assert r.status_code in (302, 403), r.status_code

    # The page's card says running, with the time left and an Open link to JupyterLab (once the
    # periodic check has seen the server ready: run here rather than waited for).
    sessions_hub_check()
    cards, warning = session_cards(user=alice)
    assert warning == ""
    card = next(c for c in cards if c.session.pk == session.pk)
    assert card.phase == "running"
    assert card.open_url == f"{hub.url}/user/alice/{session.server_name}/lab"
    assert card.time_left_s is not None and 3000 < card.time_left_s <= 3600

    session.refresh_from_db()
    session_stop(session=session, by=alice)

    # Gone from the queue, not only COMPLETING: the next test starts with alice's queue empty.
    wait_for(
        "alice's session job to leave the queue and the hub to forget the server",
        lambda: not squeue_session_jobs("alice") and session.server_name not in hub.api("GET", "/users/alice").json()["servers"],
        timeout=60,
        every=0.5,
        seen=lambda: (squeue_session_jobs("alice"), log_tail(hub.log_file)),
    )
    remaining = [j for j in squeue_session_jobs("alice") if j["JobState"] not in ("COMPLETING", "CANCELLED")]
    assert remaining == []
    assert session.server_name not in hub.api("GET", "/users/alice").json()["servers"]
    session.refresh_from_db()
    assert session.state == SessionState.STOPPED and session.message == "Stopped by you."
    gateway.command_observers.remove(record)
    assert (session.cluster, "scancel", True) in slurm_calls  # the stop went through the portal's gateway too


def test_the_session_job_is_billed_to_the_team_the_portal_chose(alice, hub_portal):
    """sbatch gets the portal's choice, not the user's default account: asked for a team whose
    association Slurm does not have for alice (the portal's record says nlp too; cluster/up.sh gives
    her vision only), Slurm itself refuses it and the session fails with Slurm's words."""
    alice.slurm_accounts = ["vision", "nlp"]
    alice.save(update_fields=["slurm_accounts"])
    log_mark = len(hub_portal.log())
    session = session_start(user=alice, raw_options={"hours": 1, "cpus": 1, "memory_mb": 1024, "account": "nlp"})
    wait_for(
        "the session billed to nlp to fail at sbatch",
        lambda: session.refresh_from_db() or session.state == SessionState.FAILED,
        timeout=60,
        every=0.5,
        seen=lambda: (session.state, session.message, log_tail(hub_portal.log_file)),
    )
    assert session.account == "nlp" and squeue_session_jobs("alice") == []
    assert session.message == (
        "Slurm refused the session's job, billed to the team nlp: sbatch: error: Batch job submission failed: "
        "Invalid account or account/partition combination specified. If your teams changed, sign out of the portal "
        "and in again (it reads them from Slurm then), else ask your team lead."
    )
    assert "Unhandled error" not in hub_portal.log()[log_mark:]  # a refusal, not a 500


@pytest.mark.parametrize(
    "options, message",
    [
        ({"gres": "gpu:4"}, "Unknown session option(s): gres"),
        ({"options": "--comment=x --gres=gpu:8"}, "Unknown session option(s): options"),
        ({"ide": "lab", "prologue": "rm -rf ~"}, "Unknown session option(s): prologue"),
        ({"gpu_count": 4, "gpu_type": "a100"}, "Sessions may have at most 2 GPUs"),
        ({"partition": "train"}, "Sessions run in the interactive partition(s) only"),
        ({"hours": 100}, "A session lasts 1 to 8 hours"),
        ({"cpus": "4; touch /tmp/pwned"}, "CPUs must be a whole number"),
        ({"gpu_type": "h100", "gpu_count": 1}, "has no 'h100' GPUs"),
    ],
)
def test_own_hub_token_cannot_inject_or_exceed_policy(alice, hub_portal, options, message):
    hub = hub_portal
    token = hub.user_token("alice")
    r = hub.api("POST", "/users/alice/servers/sneaky", token=token, json={"user_options": options})
    assert r.status_code == 400, r.text
    assert message in r.json()["message"]
    assert squeue_session_jobs("alice") == []
    assert not Path("/tmp/pwned").exists()


def test_batchspawner_callback_accepts_only_a_port(alice, hub_portal):
    """batchspawner's stock handler sets any spawner attribute it is sent; ours takes the port only."""
    hub = hub_portal
    session = session_start(user=alice, raw_options={"hours": 1, "cpus": 1, "memory_mb": 1024})
    wait_ready(hub, "alice", session.server_name)
    # The portal's launcher (gpuportal-singleuser), or batchspawner's wrapper in a site image.
    pid = subprocess.run(
        ["pgrep", "-u", "alice", "-f", "(gpuportal|jupyterhub)-singleuser"], capture_output=True, text=True
    ).stdout.split()[0]
    environ = dict(line.split("=", 1) for line in Path(f"/proc/{pid}/environ").read_text().split("\0") if "=" in line)
    server_token = environ["JUPYTERHUB_API_TOKEN"]
    hub_api = environ["JUPYTERHUB_API_URL"]
    for body in ({"exec_prefix": "touch /tmp/pwned;"}, {"port": 1234, "batch_script": "x"}, {"port": "80"}):
        r = requests.post(f"{hub_api}/batchspawner", headers={"Authorization": f"token {server_token}"}, json=body, timeout=10)
        assert r.status_code == 400, (body, r.text)
    # A user token (not the server's) may not post here at all.
    r = requests.post(
        f"{hub_api}/batchspawner", headers={"Authorization": f"token {hub.user_token('alice')}"}, json={"port": 1234}, timeout=10
    )
    assert r.status_code == 403
    assert not Path("/tmp/pwned").exists()
    # The server still works.
    r = requests.get(
        f"{hub.url}/user/alice/{session.server_name}/api/status",
        headers={"Authorization": f"token {hub.user_token('alice')}"},
        timeout=30,
    )
    assert r.status_code == 200


def _slurmctld(action: str) -> None:
    if action == "stop":
        pid = Path("/run/slurmctld.pid").read_text().strip()
        subprocess.run(["kill", "-TERM", pid], check=True)
        wait_for(
            f"slurmctld (pid {pid}) to stop",
            lambda: subprocess.run(["kill", "-0", pid], capture_output=True).returncode != 0,
            timeout=10,
            every=0.1,
            seen=lambda: subprocess.run(["ps", "-o", "pid,stat,etime,args", "-p", pid], capture_output=True, text=True).stdout,
        )
        return
    subprocess.run(["bash", str(REPO / "cluster" / "up.sh")], check=True, capture_output=True, timeout=120)


def test_running_session_survives_the_controller_down_for_a_minute(alice, hub_portal, settings):
    hub = hub_portal
    settings.PORTAL_SNAPSHOT_MAX_AGE = 15  # so the spawner's status reads turn UNKNOWN during the outage
    session = session_start(user=alice, raw_options={"hours": 1, "cpus": 1, "memory_mb": 1024})
    server = wait_ready(hub, "alice", session.server_name)
    token = hub.user_token("alice")
    log_mark = len(hub.log())
    _slurmctld("stop")
    try:
        end = time.monotonic() + 60
        while time.monotonic() < end:
            assert hub.api("GET", "/users/alice").json()["servers"][session.server_name]["ready"]
            r = requests.get(f"{hub.url}{server['url']}api/status", headers={"Authorization": f"token {token}"}, timeout=30)
            assert r.status_code == 200
            pause(5, "the controller stays down for a minute; the session is checked every 5 s meanwhile")
        # the hub did poll during the outage, and was told "unknown", not "ended"
        assert "unknown (portal" in hub.log()[log_mark:] or "keeping the session" in hub.log()[log_mark:]
        cards, _ = session_cards(user=alice)
        assert next(c for c in cards if c.session.pk == session.pk).phase == "running"
    finally:
        _slurmctld("start")
    # A poll after the controller is back: a good snapshot taken since it came back, then the hub's
    # next poll (its status read from that snapshot, then the activity report that follows it).
    back_at, cluster = time.time(), default_sessions_cluster().name

    def fresh_snapshot() -> float | None:
        snapshot = snapshot_load(with_jobs=True, cluster=cluster)
        return time.time() if snapshot and snapshot.taken_at > back_at else None

    fresh_at = wait_for(
        "a good snapshot of the sessions cluster taken after the controller came back",
        fresh_snapshot,
        timeout=60,
        every=0.5,
        seen=lambda: _snapshot_times(cluster),
    )

    def polled_since() -> bool:
        session.refresh_from_db()
        if session.state != SessionState.RUNNING:
            return True  # ended: the assertions below say so
        reported = session.activity_reported_at
        # 1 s after the fresh snapshot was seen: the poll behind the report read it, not an older one
        return reported is not None and reported.timestamp() > fresh_at + 1

    wait_for(
        "the hub's first poll after the fresh snapshot (its activity report)",
        polled_since,
        timeout=60,
        every=0.5,
        seen=lambda: (session.state, session.activity_reported_at, log_tail(hub.log_file)),
    )
    assert hub.api("GET", "/users/alice").json()["servers"][session.server_name]["ready"]
    session.refresh_from_db()
    assert session.state == SessionState.RUNNING


def _snapshot_times(cluster: str) -> str:
    """When the cluster's stored snapshot was taken and last tried, and its error (for ``seen=``)."""
    s = snapshot_load(with_jobs=False, cluster=cluster, memo=False)
    return f"taken_at={s.taken_at} attempted_at={s.attempted_at} error={s.error!r} now={time.time()}" if s else "no snapshot"


def test_job_failing_at_start_up_is_reported_at_once_and_a_new_start_works(alice, hub_portal, client):
    hub = hub_portal
    config_dir = Path("/home/alice/.jupyter")
    bad = config_dir / "jupyter_server_config.py"
    subprocess.run(["runuser", "-u", "alice", "--", "mkdir", "-p", str(config_dir)], check=True)
    subprocess.run(
        ["runuser", "-u", "alice", "--", "sh", "-c", f"echo 'raise SystemExit(\"broken config: {bad}\")' > {bad}"], check=True
    )
    try:
        # The hub's API answers the start with why it failed, not a 500.
        log_mark = len(hub.log())
        hub_client.ensure_user("alice")
        r = hub.api(
            "POST", "/users/alice/servers/broken", token=hub.user_token("alice"), json={"user_options": {"hours": 1, "cpus": 1}}
        )
        assert r.status_code == 422, (r.status_code, r.text)
        assert "exit code 1:0" in r.json()["message"] and "broken config" in r.json()["message"]
        assert "500 POST" not in hub.log()[log_mark:] and "Traceback" not in hub.log()[log_mark:]

        # The Sessions page: no "is starting" above a failed card; the failure, its exit code and log.
        client.force_login(alice)
        started = time.monotonic()
        form = {"ide": "lab", "partition": "interactive", "gpu_count": "0", "cpus": "1", "memory_gb": "1", "hours": "1"}
        page = client.post("/sessions/", form, follow=True).content.decode()
        session = Session.objects.filter(user=alice).exclude(server_name="broken").latest("created_at")
        if session.state != SessionState.FAILED:  # the job took longer than the hub's first 10 s: the card follows
            wait_for(
                "the session to fail",
                lambda: session.refresh_from_db() or session.state == SessionState.FAILED,
                timeout=60,
                every=0.5,
                seen=lambda: (session.state, session.message, log_tail(hub.log_file)),
            )
            page = client.get("/sessions/").content.decode()
        else:
            assert "session did not start" in page and "exit code 1:0" in page.split("session-card")[0], page
        elapsed = time.monotonic() - started
        assert session.state == SessionState.FAILED, hub.log()[-3000:]
        assert elapsed < 30, f"failure took {elapsed:.0f} s to be reported"
        assert "session is starting" not in page
        assert "before JupyterLab answered" in session.message
        assert "exit code" in session.message
        assert "broken config" in session.message  # the log's last lines
        assert 'data-phase="ended"' in page and "broken config" in page  # the card shows them too
        assert session.server_name not in hub.api("GET", "/users/alice").json()["servers"]
    finally:
        bad.unlink()
    again = session_start(user=alice, raw_options={"hours": 1, "cpus": 1, "memory_mb": 1024})
    wait_ready(hub, "alice", again.server_name)
    session_stop(session=again, by=alice)


def test_cancel_while_pending_and_refusals_from_the_portal(alice, hub_portal):
    hub = hub_portal
    # bob's job holds a CPU of node1 (the interactive partition's only node, 8 CPUs): a session
    # asking for all 8 waits in line whatever else runs there.
    blocker = (
        subprocess.run(
            [
                "sudo",
                "-u",
                "bob",
                "sbatch",
                "--parsable",
                "--chdir=/tmp",
                "--partition=interactive",
                "--cpus-per-task=1",
                "--mem=100M",
                "--time=5",
                "--job-name=cancel-blocker",
                "--output=/dev/null",
                "--wrap",
                "sleep 300",
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        .stdout.strip()
        .split(";")[0]
    )
    try:
        wait_for(
            f"bob's blocker job {blocker} to run",
            lambda: sh_state(blocker) == "RUNNING",
            timeout=90,
            every=1,
            seen=lambda: scontrol_show_job(blocker),
        )
        _cancel_while_pending(alice, hub)
    finally:
        subprocess.run(["scancel", blocker], check=False)


def sh_state(job_id: str) -> str:
    return subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True).stdout.strip()


def _cancel_while_pending(alice, hub):
    second = session_start(user=alice, raw_options={"hours": 1, "cpus": 8, "memory_mb": 1024})

    def card_of_second():
        cards, _ = session_cards(user=alice)
        return next(c for c in cards if c.session.pk == second.pk)

    def queued_card():
        card = card_of_second()
        return card if card.phase == "queued" and card.position else None

    card = wait_for(
        "the pending session's card to say queued, with its place in line", queued_card, timeout=30, every=1, seen=card_of_second
    )
    assert card.phase == "queued", card
    assert card.position and card.position >= 1 and card.in_line >= 1
    # start-up progress from the hub's progress events (the spawner's own message)
    wait_for(
        "the hub's progress message to say queued",
        lambda: "queued" in hub_client.progress_message("alice", second.server_name),
        timeout=15,
        every=1,
        seen=lambda: log_tail(hub.log_file),
    )
    assert f"Slurm job {card.job.job_id} queued" in hub_client.progress_message("alice", second.server_name)
    second.refresh_from_db()
    session_stop(session=second, by=alice)
    second.refresh_from_db()
    assert second.state == SessionState.STOPPED and "Cancelled before it started" in second.message
    wait_for(
        "the pending job to be cancelled",
        lambda: (
            not any(j["Comment"] == f"portal:{second.key}" and j["JobState"] == "PENDING" for j in squeue_session_jobs("alice"))
        ),
        timeout=20,
        every=0.5,
        seen=lambda: squeue_session_jobs("alice"),
    )

    with pytest.raises(Refused) as refused:
        session_start(user=alice, raw_options={"gpu_count": 3})
    assert "at most 2 GPUs" in str(refused.value)


def test_idle_session_is_stopped_and_the_user_told_why(alice, hub_portal, settings):
    """The hub's spawner reports the session's activity (its server's gpuportal_session extension);
    with nobody using it, the idle limit stops it, with a message and an audit row. The browser tests
    (test_sessions_idle_browser.py) cover a person at work and an open tab with nobody at it."""
    hub = hub_portal
    settings.PORTAL_SESSION_IDLE_MINUTES = 3
    session = session_start(user=alice, raw_options={"hours": 2, "cpus": 1, "memory_mb": 1024})
    wait_ready(hub, "alice", session.server_name)
    sessions_hub_check()  # the periodic check marks it running
    wait_for(  # the test hub polls every 5 s
        "the hub's first activity report of the session",
        lambda: session.refresh_from_db() or session.activity_reported_at is not None,
        timeout=30,
        every=1,
        seen=lambda: log_tail(hub.log_file),
    )
    assert session.last_input_at is None  # nobody has used it: no kernel, no terminal, no save
    assert sessions_cull_idle(now=djtz.now() + timedelta(minutes=1)) == []  # not idle long enough
    stopped = sessions_cull_idle(now=djtz.now() + timedelta(minutes=4))
    assert [s.pk for s in stopped] == [session.pk]
    session.refresh_from_db()
    assert session.state == SessionState.STOPPED
    assert "without activity" in session.message and "after 3 min" in session.message, session.message
    assert session.server_name not in hub.api("GET", "/users/alice").json()["servers"]
    event = AuditEvent.objects.filter(action="session.culled", target=f"session:{session.key}").get()
    assert event.old == {"state": "RUNNING"} and event.new["state"] == "STOPPED" and event.new["idle_minutes"] >= 3
