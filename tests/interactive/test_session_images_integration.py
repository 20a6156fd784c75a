"""A JupyterLab session from the demo image on the real hub and the real cluster:
the session's job (sent by the portal) runs the image's /opt/jupyter single-user server inside it (Charliecloud), and it
answers through the proxy for alice's own token; the log says which image. And the identity rule on
the real hub: the user is the hub's verified one (issuer + sub); a start with alice's own hub token
naming another user, or another user's image directory, is refused before any job is made."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
import requests

from interactive.models import Session
from interactive.services import session_start, session_stop
from tests.waiting import log_tail, wait_for

from .conftest import squeue_session_jobs
from .test_hub_integration import alice, wait_ready  # noqa: F401  (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.timeout(600)]

DEMO_JSON = Path("/srv/gpuportal/images/debian12-sklearn.json")


@pytest.fixture
def demo_image(hub_portal):
    """The demo image registered from its JSON (as make dev does), looked at on the sessions
    cluster through the gateway as the service user (the availability task's probe)."""
    if not DEMO_JSON.exists():
        pytest.skip(f"no demo image ({DEMO_JSON}): scripts/build_image.sh builds it")
    from images.availability import image_probe
    from images.services import image_register
    from slurm.clusters import default_sessions_cluster

    image, _ = image_register(doc=json.loads(DEMO_JSON.read_text()))
    state = image_probe(image, default_sessions_cluster().name)
    assert state.available, state.reason
    return image


def test_a_jupyterlab_session_from_the_image_answers_through_the_proxy(alice, hub_portal, demo_image):  # noqa: F811
    hub = hub_portal
    started = time.monotonic()
    session = session_start(
        user=alice,
        raw_options={
            "ide": "lab",
            "partition": "interactive",
            "cpus": 1,
            "memory_mb": 2048,
            "hours": 1,
            "image": demo_image.name,
        },
    )
    server = wait_ready(hub, "alice", session.server_name, timeout=180)
    print(f"spawn to ready in the image: {time.monotonic() - started:.1f} s")
    token = hub.user_token("alice")
    r = requests.get(f"{hub.url}{server['url']}api/status", headers={"Authorization": f"token {token}"}, timeout=30)
    assert r.status_code == 200, r.text
    # The server is the image's: its log (the job's output, in alice's home) says so first.
    log = Path("/home/alice/.gpuportal/sessions") / f"{session.key}.log"
    text = log.read_text()
    assert f"session in image debian12-sklearn ({demo_image.digest}), runtime charliecloud" in text, text
    # JupyterLab is the image's (/opt/jupyter), not the node's Jupyter venv.
    assert "JupyterLab extension loaded from /opt/jupyter/lib/python3.11/site-packages/jupyterlab" in text, text
    assert "Serving notebooks from local directory: /home/alice" in text, text  # the home is bound in
    # The portal's session extension is in the image too: the activity the idle limit reads.
    r = requests.get(f"{hub.url}{server['url']}api/gpuportal/activity", headers={"Authorization": f"token {token}"}, timeout=30)
    assert r.status_code == 200 and "last_input" in r.json(), r.text
    session.refresh_from_db()
    session_stop(session=session, by=alice)
    wait_for(
        "alice's session job to end",
        lambda: not [j for j in squeue_session_jobs("alice") if j["JobState"] not in ("COMPLETING", "CANCELLED")],
        timeout=30,
        every=0.5,
        seen=lambda: squeue_session_jobs("alice"),
    )


@pytest.mark.parametrize(
    "options, message",
    [
        ({"image": "/home/bob/private-image"}, "There is no image called '/home/bob/private-image'"),
        ({"image": "debian12-sklearn", "user": "bob"}, "Unknown session option(s): user"),
        ({"image": "debian12-sklearn", "username": "bob"}, "Unknown session option(s): username"),
    ],
)
def test_own_hub_token_cannot_name_another_users_image_or_identity(alice, hub_portal, demo_image, options, message):  # noqa: F811
    token = hub_portal.user_token("alice")
    r = hub_portal.api("POST", "/users/alice/servers/sneaky", token=token, json={"user_options": options})
    assert r.status_code == 400, r.text
    assert message in r.json()["message"]
    assert squeue_session_jobs("alice") == [] and not Session.objects.filter(server_name="sneaky").exists()
    # Nor can alice's token start a server for bob: the hub answers for her own name only.
    r = hub_portal.api("POST", "/users/bob/servers/sneaky", token=token, json={"user_options": {"image": "debian12-sklearn"}})
    assert r.status_code in (403, 404), r.text
    assert squeue_session_jobs("bob") == []


def test_an_image_gone_after_the_check_fails_the_session_with_its_sentence(alice, hub_portal, demo_image, tmp_path):  # noqa: F811
    """The portal's availability check saw the image; it is removed before the session's job starts:
    the job fails at once with the sentence naming the image (not ch-run's errors), and the card says it."""
    from images.availability import image_probe
    from images.models import Image
    from interactive.models import SessionState
    from slurm.clusters import default_sessions_cluster

    doomed = Path("/srv/gpuportal/images") / f"gone-{tmp_path.name[-8:]}"
    doomed.mkdir(mode=0o755)
    gone = Image.objects.create(
        name="gone-lab", runtime="charliecloud", path=str(doomed), digest=demo_image.digest, offers=["jupyterlab"]
    )
    try:
        assert image_probe(gone, default_sessions_cluster().name).available  # the check saw it
    finally:
        doomed.rmdir()  # and then it went away
    session = session_start(
        user=alice,
        raw_options={"ide": "lab", "partition": "interactive", "cpus": 1, "memory_mb": 1024, "hours": 1, "image": "gone-lab"},
    )
    wait_for(
        "the session to fail",
        lambda: session.refresh_from_db() or session.state == SessionState.FAILED,
        timeout=60,
        every=0.5,
        seen=lambda: (session.state, session.message, log_tail(hub_portal.log_file)),
    )
    assert session.state == SessionState.FAILED, session.message
    assert (
        f"The image gone-lab ({doomed}) is no longer on the cluster: ask your admins or choose another image" in session.message
    )
    assert "exit code 2" in session.message, session.message
