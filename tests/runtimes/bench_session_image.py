"""Benchmark, not a test (its name keeps pytest from collecting it; run it by name): a JupyterLab session's start
in the demo image / on the bare node, through the real hub, portal and cluster1, alternating the two, --runs each
(BENCH_RUNS, default 3). Each start: ``session_start`` (the portal's service, as the Sessions page calls it) until
the server answers ``GET /user/alice/<server>/api/status`` through the proxy with alice's token; the session is then
stopped and its job gone before the next. Goal: median in image / median bare at most 1.2. Uses the
integration fixtures of tests/interactive (its own hub, live portal and IdP)::

    DATABASE_URL=... PORTAL_TEST_REDIS_DB=... .venv/bin/pytest tests/runtimes/bench_session_image.py -s -p no:randomly
"""

from __future__ import annotations

import os
import statistics
import time

import pytest
import requests

from interactive.services import session_start, session_stop
from tests.interactive.conftest import hub_portal, jupyterhub, squeue_session_jobs  # noqa: F401  (fixtures)
from tests.interactive.test_hub_integration import alice, wait_ready  # noqa: F401
from tests.interactive.test_session_images_integration import demo_image  # noqa: F401
from tests.waiting import wait_for

RUNS = int(os.environ.get("BENCH_RUNS", "3"))


@pytest.mark.integration
@pytest.mark.timeout(1200)
def test_bench_session_start_in_image_over_bare(alice, hub_portal, demo_image):  # noqa: F811
    token = None
    times: dict[str, list[float]] = {"bare": [], "image": []}
    for i in range(RUNS):
        for kind in ("bare", "image") if i % 2 == 0 else ("image", "bare"):
            options = {"ide": "lab", "partition": "interactive", "cpus": 1, "memory_mb": 2048, "hours": 1}
            if kind == "image":
                options["image"] = demo_image.name
            t0 = time.monotonic()
            session = session_start(user=alice, raw_options=options)
            server = wait_ready(hub_portal, "alice", session.server_name, timeout=180)
            url = f"{hub_portal.url}{server['url']}api/status"
            token = token or hub_portal.user_token("alice")  # alice is the hub's once a server was asked for

            def status(url=url, token=token) -> int:
                return requests.get(url, headers={"Authorization": f"token {token}"}, timeout=30).status_code

            wait_for(
                f"{url} to answer 200 through the proxy",
                lambda: status() == 200,
                timeout=max(0.0, 180 - (time.monotonic() - t0)),  # 180 s from Start
                every=0.1,
                seen=status,
            )
            times[kind].append(time.monotonic() - t0)
            session.refresh_from_db()
            session_stop(session=session, by=alice)
            wait_for(
                "alice's session job gone from the queue",
                lambda: not [j for j in squeue_session_jobs("alice") if j["JobState"] not in ("CANCELLED",)],
                timeout=60,
                every=0.5,
                seen=lambda: squeue_session_jobs("alice"),
            )
    bare, image = statistics.median(times["bare"]), statistics.median(times["image"])
    print("\n| session start (Start -> api/status 200 through the proxy) | runs | bare | in image | ratio (goal <= 1.2) |")
    print("| --- | --- | --- | --- | --- |")
    print(
        f"| JupyterLab on cluster1 `interactive` | {RUNS} | {', '.join(f'{t:.1f}' for t in times['bare'])} s "
        f"(median {bare:.1f} s) | {', '.join(f'{t:.1f}' for t in times['image'])} s (median {image:.1f} s) "
        f"| **{image / bare:.2f}** ({'met' if image / bare <= 1.2 else 'missed'}) |"
    )
