"""A hub restart with a session open: configurable-http-proxy runs on its own
(scripts/hub.sh), so stopping and starting JupyterHub leaves the connections through it up. A
session is used as an open notebook uses it (HTTP requests and a kernel over one websocket, through
the proxy, tests/interactive/session_stream.py) while the hub stops and starts again."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest
import requests

from interactive.hub_check import sessions_hub_check
from interactive.services import session_cards, session_start, session_stop
from tests.waiting import log_tail, wait_for

from .conftest import JUPYTER_VENV
from .test_hub_integration import alice, wait_ready  # noqa: F401 (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]


def hub_answers(hub) -> bool:
    try:
        return requests.get(hub.api_url + "/", timeout=2).status_code == 200
    except requests.RequestException:
        return False


def answered_since(progress: Path, since: float) -> int:
    """How many rounds of the stream (tests/interactive/session_stream.py's progress file) began
    after ``since`` (Unix seconds) and had both their HTTP request and their kernel answer: the
    fewer of the two counts."""
    counts = {"http": 0, "ws": 0}
    for line in progress.read_text().splitlines():
        kind, _, rest = line.partition(" ")
        if kind in counts and float(rest) > since:
            counts[kind] += 1
    return min(counts.values())


def test_a_hub_restart_leaves_open_sessions_connected(alice, hub_portal, tmp_path):  # noqa: F811
    hub = hub_portal
    progress = tmp_path / "stream-progress"
    progress.touch()
    session = session_start(user=alice, raw_options={"hours": 1, "cpus": 1, "memory_mb": 1024})
    server = wait_ready(hub, "alice", session.server_name)
    token = hub.user_token("alice")
    stream = subprocess.Popen(
        [
            str(JUPYTER_VENV / "bin" / "python"),
            str(Path(__file__).with_name("session_stream.py")),
            hub.url + server["url"],
            token,
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "SESSION_STREAM_PROGRESS": str(progress)},
    )

    def stream_seen() -> str:
        return log_tail(progress)

    try:
        assert stream.stdout.readline().strip() == "ready", stream.stderr.read()
        wait_for("a first request and kernel answer through the proxy", lambda: answered_since(progress, 0), seen=stream_seen)
        down_from = time.time()
        hub.stop()
        assert not hub_answers(hub)  # the hub is really down
        down_for_sure = time.time()  # rounds begun from here on run while the hub is down from start to end
        try:
            wait_for(
                "5 requests and 5 kernel answers through the proxy while the hub is down",
                lambda: answered_since(progress, down_for_sure) >= 5,
                timeout=60,
                seen=stream_seen,
            )
        finally:
            hub.start()  # also after a failed wait: the other tests use this hub
        up_again = time.time()
        wait_for(
            "5 requests and 5 kernel answers through the proxy since the hub is back",
            lambda: answered_since(progress, up_again) >= 5,
            timeout=60,
            seen=stream_seen,
        )
        out, err = stream.communicate(timeout=60)  # closes its stdin: it stops and reports
    finally:
        if stream.poll() is None:
            stream.kill()
    result = json.loads(out.strip().splitlines()[-1])
    assert result["failures"] == [], (result["failures"], err[-2000:])
    while_down = [t for t in result["http_ok"] if down_from < t < up_again]
    assert len(while_down) >= 5, (while_down, result)  # requests went through while the hub was down
    assert sum(down_from < t < up_again for t in result["ws_ok"]) >= 5  # and the kernel kept answering
    assert result["ws_ok"][-1] > up_again and result["http_ok"][-1] > up_again
    # The restarted hub still has the server, and the portal's card says running.
    assert hub.api("GET", "/users/alice").json()["servers"][session.server_name]["ready"]
    sessions_hub_check()  # the periodic check, run now rather than waited for
    cards, warning = session_cards(user=alice)
    assert warning == "" and next(c for c in cards if c.session.pk == session.pk).phase == "running"
    session.refresh_from_db()
    session_stop(session=session, by=alice)
