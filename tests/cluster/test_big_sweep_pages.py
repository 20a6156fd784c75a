"""Pages that stay small: a researcher with a held sweep of 5,000
array tasks in the real queue (``sbatch --array=0-4999 --hold`` as alice from a shell, read by the
portal's poller) and 2,000 ended jobs. My jobs lists the sweep as one entry and at most
``MY_JOBS_ENDED_CAP`` ended jobs; History shows one page of ``HISTORY_PAGE_SIZE``; the API pages too.
Bounds on bytes and rows, never on time."""

from __future__ import annotations

from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from django.utils import timezone

from api.pagination import DEFAULT_LIMIT
from api.tokens import token_create
from jobs.models import Job, JobKind, JobOrigin
from jobs.reads.selectors import HISTORY_PAGE_SIZE, MY_JOBS_ENDED_CAP
from jobs.worker.services import snapshot_refresh
from slurm import get_gateway
from slurm.states import FINAL_STATES, JobState

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(300)]

TASKS, ENDED = 5000, 2000
#: Bytes a page may take, whatever the number of tasks or ended jobs (measured: My jobs about 20 KB,
#: History about 37 KB; before the cap My jobs listed every job ended in the last hour, about 1 MB here).
MY_JOBS_MAX_BYTES = 60_000
HISTORY_MAX_BYTES = 80_000


@pytest.fixture
def sweep(django_user_model, clean_cache):
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    gateway = get_gateway("cluster1")
    out = gateway.run(
        [
            "sbatch",
            "--parsable",
            "--chdir=/tmp",
            "--hold",
            f"--array=0-{TASKS - 1}",
            "-p",
            "train",
            "-t",
            "1",
            "--mem=50M",
            "-J",
            "sweep",
        ],
        as_user="alice",
        stdin="#!/bin/bash\ntrue\n",
    ).out
    job_id = int(out.strip().split(";")[0])
    now = timezone.now()
    Job.objects.bulk_create(
        Job(
            user=alice,
            name=f"ended-{i}",
            partition="train",
            gpu_count=0,
            memory_mb=100,
            time_limit_min=5,
            script="true",
            state=JobState.COMPLETED if i % 3 else JobState.FAILED,
            exit_code=0 if i % 3 else 1,
            slurm_job_id=900000 + i,
            end_at=now - timedelta(seconds=1.5 * i),  # all within the hour My jobs covers
        )
        for i in range(ENDED)
    )
    try:
        yield alice, job_id
    finally:
        gateway.run(["scancel", str(job_id)], as_user="alice", check=False)


def test_my_jobs_history_and_the_api_stay_small_with_a_5000_task_sweep_and_2000_ended_jobs(client, sweep):
    alice, job_id = sweep
    snapshot = snapshot_refresh(cluster="cluster1")
    assert snapshot is not None and not snapshot.error
    entry = Job.objects.get(slurm_job_id=job_id, slurm_cluster="cluster1")
    assert (entry.origin, entry.kind, entry.state) == (JobOrigin.OUTSIDE, JobKind.ARRAY, JobState.PENDING)
    assert entry.array_spec.startswith(f"0-{TASKS - 1}"), entry.array_spec

    client.force_login(alice)
    for url in ("/jobs/", "/jobs/table/"):
        resp = client.get(url, HTTP_HX_REQUEST="true" if "table" in url else "")
        assert resp.status_code == 200
        rows = BeautifulSoup(resp.content, "html.parser").select("tr[data-job]")
        assert len(resp.content) < MY_JOBS_MAX_BYTES, (url, len(resp.content))
        # the sweep is one entry, and the ended jobs of the last hour stop at the cap (alice's own
        # sbatch jobs of the last hour that the poller read from accounting count too)
        hour_ago = timezone.now() - timedelta(hours=1)
        ended_last_hour = Job.objects.filter(user=alice, state__in=FINAL_STATES, end_at__gte=hour_ago).count()
        assert ended_last_hour >= ENDED
        assert len(rows) == 1 + MY_JOBS_ENDED_CAP, (url, len(rows))
        soup = BeautifulSoup(resp.content, "html.parser")
        counts = {c["data-group"]: c["data-count"] for c in soup.select(f"tr[data-slurm-id='{job_id}'] .task-count")}
        assert counts == {"pending": str(TASKS)}, counts
        more = soup.select_one("[data-testid=ended-more]").get_text(" ", strip=True)
        assert f"{ended_last_hour - MY_JOBS_ENDED_CAP} more ended in the last hour" in more, more

    resp = client.get("/jobs/history/")
    assert resp.status_code == 200 and len(resp.content) < HISTORY_MAX_BYTES, len(resp.content)
    assert len(BeautifulSoup(resp.content, "html.parser").select("tr[data-job]")) == HISTORY_PAGE_SIZE
    count = BeautifulSoup(resp.content, "html.parser").select_one("[data-testid=history-count]").get_text(" ", strip=True)
    finished = Job.objects.filter(user=alice, state__in=FINAL_STATES).count()
    assert finished >= ENDED and count.startswith(f"{finished} matching jobs"), count

    _, raw = token_create(user=alice, name="t", scopes=["read"], days=1)
    refs, cursor, pages = [], "", 0
    while True:
        body = client.get(f"/api/v1/jobs?scope=all&cursor={cursor}", HTTP_AUTHORIZATION=f"Bearer {raw}").json()
        assert body["count"] <= DEFAULT_LIMIT
        refs += [j["slurm_ref"] for j in body["items"]]
        pages, cursor = pages + 1, body["next_cursor"]
        if not cursor:
            break
    assert len(refs) == len(set(refs)) == Job.objects.filter(user=alice).count() and pages > 1
    assert [r for r in refs if r.startswith(f"{job_id}_")] == [entry.slurm_ref]  # the sweep: one item
