"""End to end in headless Chromium with both real clusters polled: a researcher
sees cluster2's H100s in the GPU table, picks cluster2 in the job form (its partitions replace
cluster1's, what was typed stays), sends an H100 job, and follows it on its page to Completed with
its output, and finds it in History under cluster2. And a job sent there that must wait: its page
explains Slurm's priority of it, from cluster2's sprio, and names the team whose job is ahead."""

from __future__ import annotations

import re
import subprocess
import threading

import pytest
from django.db import connection

from jobs.worker.services import snapshot_refresh
from slurm.clusters import cluster_names
from tests.e2e.test_batch_job_browser import shot
from tests.e2e.test_browser_login import browser_page, sign_in  # noqa: F401  (fixture)
from tests.jobs.test_priority_integration import ROOT, as_root, bob_ahead

pytestmark = [pytest.mark.e2e, pytest.mark.integration, pytest.mark.timeout(300)]


@pytest.fixture
def poll_both():
    """The poller's service for every cluster every second, in a thread, after a first poll of each."""
    for name in cluster_names():
        snapshot = snapshot_refresh(cluster=name)
        assert snapshot is not None and not snapshot.error, (name, snapshot and snapshot.error)
    connection.close()
    stop = threading.Event()

    def loop():
        try:
            while not stop.is_set():
                for name in cluster_names():
                    snapshot_refresh(cluster=name)
                stop.wait(1.0)
        finally:
            connection.close()

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    yield
    stop.set()
    thread.join(30)


def choose_cluster2(page) -> None:
    """Pick cluster2 in the job form and wait until HTMX has reloaded it with cluster2's partitions."""
    page.select_option("#id_cluster", "cluster2")
    page.wait_for_function(
        "() => [...document.querySelectorAll('#id_partition option')].map(o => o.value).join() === 'gpu,small'"
    )


def test_a_researcher_runs_an_h100_job_on_cluster2(portal_with_idp, poll_both, browser_page):  # noqa: F811
    page = browser_page
    sign_in(page, portal_with_idp, "alice")
    h100 = page.locator('[data-cluster="cluster2"] tr[data-partition="gpu"][data-gpu-type="h100"]')
    h100.wait_for()
    assert "/ 4" in h100.inner_text()
    assert page.locator('[data-cluster="cluster1"] tr[data-gpu-type="a100"]').count() >= 1
    shot(page, "cluster2-1-home")

    page.get_by_role("link", name="New job").first.click()
    page.wait_for_selector("[data-testid=limits]")
    page.fill("#id_name", "h100 on cluster2")
    long_script = "#!/bin/bash\n" + "".join(f"echo line {i} of a long script\n" for i in range(300))  # > 8 KB
    page.fill("#id_script", long_script)
    choose_cluster2(page)
    assert page.input_value("#id_name") == "h100 on cluster2"  # what was typed stays, a long script too
    assert page.input_value("#id_script") == long_script
    assert page.url.endswith("/jobs/new/?cluster=cluster2")  # only the cluster in the URL (the script is POSTed)
    page.select_option("#id_partition", "gpu")
    # the swapped-in form still offers only what the partition has: gpu (g1) has h100s, no l40s
    assert page.locator('#id_gpu_type option[value="l40s"]').is_disabled()
    page.select_option("#id_gpu_type", "h100")
    assert page.locator('#id_gpu_count option[value="8"]').is_disabled()  # g1 has 4
    page.select_option("#id_gpu_count", "1")
    page.fill("#id_cpus", "1")
    page.fill("#id_memory_gb", "1")
    page.fill("#id_time_limit", "00:05:00")
    page.fill("#id_script", '#!/bin/bash\necho "on $SLURM_CLUSTER_NAME with GPU $CUDA_VISIBLE_DEVICES"\n')
    shot(page, "cluster2-2-form")
    page.get_by_test_id("submit-job").click()

    page.wait_for_selector("[data-testid=job-name]")
    assert page.get_by_test_id("job-cluster").inner_text() == "cluster2"
    page.wait_for_selector('[data-testid=job-state][data-state="COMPLETED"]', timeout=120_000)
    page.wait_for_function(
        "() => (document.querySelector('[data-testid=log-out]') || {}).textContent?.includes('on cluster2 with GPU')",
        timeout=30_000,
    )
    shot(page, "cluster2-3-completed")
    page.get_by_role("link", name="History").first.click()
    row = page.locator("tr", has_text="h100 on cluster2")
    assert "cluster2" in row.inner_text() and "Completed" in row.inner_text()
    connection.close()


def test_a_waiting_job_on_cluster2_explains_its_priority(portal_with_idp, poll_both, browser_page):  # noqa: F811
    """bob's job holds every CPU of g2 (cluster2's partition small); alice sends a job there from the
    form; bob's second job, of team nlp, waits there too with an operator's Nice=-20000. Alice's
    job page says why hers waits, in words, from the poll's one sprio call on cluster2 (Slurm 24.11)."""
    name = "waits on cluster2"
    blocker = as_root(
        "cluster2",
        *("runuser", "-u", "bob", "--", "sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null"),
        *("-p", "small", "-c", "4", "--mem=500", "-t", "5", "--job-name=e2e-c2-blocker", "--wrap", "sleep 300"),
    ).strip()
    ahead = None
    try:
        page = browser_page
        sign_in(page, portal_with_idp, "alice")
        page.get_by_role("link", name="New job").first.click()
        page.wait_for_selector("[data-testid=limits]")
        choose_cluster2(page)
        page.fill("#id_name", name)
        page.select_option("#id_partition", "small")
        page.select_option("#id_gpu_count", "0")
        page.fill("#id_cpus", "1")
        page.fill("#id_memory_gb", "1")
        page.fill("#id_time_limit", "00:05:00")
        page.fill("#id_script", "#!/bin/bash\necho done\n")
        page.get_by_test_id("submit-job").click()
        page.wait_for_selector("[data-testid=job-name]")
        assert page.get_by_test_id("job-cluster").inner_text() == "cluster2"
        ahead = bob_ahead("cluster2")
        # The poller's next sprio on cluster2 lists both; HTMX refreshes the block every 5 s.
        page.wait_for_function(
            "() => /from team nlp/.test((document.querySelector('[data-testid=job-priority]') || {}).textContent || '')",
            timeout=60_000,
        )
        priority = page.get_by_test_id("job-priority").inner_text()
        assert priority.startswith("Your job's priority is ") and "in small" in priority, priority
        assert re.search(r"priority is [\d,]+: [\d,]+ from ", priority), priority
        assert "in line in small" in page.get_by_test_id("queue-line").inner_text()
        shot(page, "cluster2-4-priority")
    finally:
        subprocess.run([*ROOT["cluster2"], "scancel", blocker, *([str(ahead)] if ahead else [])], capture_output=True)
        subprocess.run([*ROOT["cluster2"], "scancel", "-u", "alice", "-n", name], capture_output=True)
        connection.close()
