"""Jobs a researcher submits with ``sbatch`` in a shell, on both real local clusters:
cluster1 (Slurm 22.05) and cluster2 (Slurm 24.11), each through its own sshd and the sudo rule the
portal uses (``get_gateway(cluster).run(["sbatch", ...], as_user="alice")``), followed by the portal's
own poller service (``snapshot_refresh``) and seen through its pages (Django's test client signed in
as alice): My jobs with the queue position behind a blocker, the log tail, Cancel from the page,
History with the final state; an array of 50 tasks with ``%5`` as one entry whose counts move, one task
cancelled and then the rest; a het job as one entry whose Cancel ends both components; a job that
ended before the poller saw it, from accounting."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from jobs.arrays import load_tasks
from jobs.models import Job, JobKind, JobOrigin
from jobs.worker.outside_import import outside_import
from jobs.worker.services import snapshot_refresh
from slurm import get_gateway
from slurm.states import ACTIVE_STATES, JobState
from slurm.tasksets import TaskSet
from tests.waiting import scontrol_show_job, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(400)]

#: Per cluster: a partition with one 4-CPU node (a blocker fills it) and one with two nodes.
PARTS = {"cluster1": ("small", "train"), "cluster2": ("small", "gpu")}


@pytest.fixture(params=list(PARTS))
def on(request, clean_cache) -> str:
    snapshot = snapshot_refresh(cluster=request.param)
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    return request.param


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


@pytest.fixture
def signed_in(client, alice):
    client.force_login(alice)
    return client


@pytest.fixture
def submitted(on):
    """``sbatch`` as alice from a shell (no portal comment); every job submitted is cancelled after."""
    ids: list[str] = []

    def sbatch(*options: str, script: str = "#!/bin/bash\nsleep 120\n", user: str = "alice") -> int:
        out = get_gateway(on).run(["sbatch", "--parsable", "--chdir=/tmp", *options], as_user=user, stdin=script).out
        ids.append((user, out.strip().split(";")[0]))
        return int(ids[-1][1])

    yield sbatch
    for user, job_id in ids:
        get_gateway(on).run(["scancel", job_id], as_user=user, check=False)


def poll_until(on: str, job_id: int, predicate, timeout: float = 120, what: str = "") -> Job:
    """The job's row once a poll of ``on`` shows it as ``predicate`` wants (``what``)."""
    job = None

    def reached():
        nonlocal job
        snapshot_refresh(cluster=on)
        job = Job.objects.filter(slurm_cluster=on, slurm_job_id=job_id).first()
        return job if job is not None and predicate(job) else None

    return wait_for(
        f"job {job_id} on {on}: {what or 'condition'}",
        reached,
        timeout=timeout,
        every=1,
        seen=lambda: f"portal: {job and job.state} {job and job.array_tasks}\n{scontrol_show_job(job_id, cluster=on)}",
    )


def page(client, url: str) -> BeautifulSoup:
    resp = client.get(url)
    assert resp.status_code == 200, url
    return BeautifulSoup(resp.content, "html.parser")


def cancel(client, job: Job, django_capture_on_commit_callbacks, **data) -> None:
    with django_capture_on_commit_callbacks(execute=True):  # the cancel task runs scancel as alice
        resp = client.post(f"/jobs/{job.key}/cancel/", data)
    assert resp.status_code == 302


def test_a_job_sbatched_in_a_shell_is_in_my_jobs_in_line_with_its_log_cancel_and_history(
    on, signed_in, submitted, django_capture_on_commit_callbacks
):
    small, _ = PARTS[on]
    blocker = submitted("-p", small, "-c", "4", "--mem=100M", "-t", "5", "--job-name=outside-blocker", user="bob")
    job_id = submitted(
        "-p", small, "-c", "1", "--mem=100M", "-t", "5", "--job-name=from a shell $(id)",
        script="#!/bin/bash\necho hello from $(id -un) outside the portal\nsleep 120\n",
    )  # fmt: skip
    job = poll_until(on, job_id, lambda j: j.state == JobState.PENDING, what="pending")
    assert (job.origin, job.user.username, job.name, job.kind) == (JobOrigin.OUTSIDE, "alice", "from a shell $(id)", JobKind.JOB)
    row = page(signed_in, "/jobs/").select_one(f'tr[data-job="{job.key}"]')
    assert row.select_one("[data-testid=outside-mark]").get_text() == "submitted outside the portal"
    assert f"in line in {small}" in row.select_one("[data-testid=queue-line]").get_text()
    get_gateway(on).run(["scancel", str(blocker)], as_user="bob")
    job = poll_until(on, job_id, lambda j: j.state == JobState.RUNNING, what="running")

    def log_with_the_line() -> str:
        text = page(signed_in, f"/jobs/{job.key}/log/out/").get_text()
        return text if "hello from alice outside the portal" in text else ""

    log = wait_for(
        "the job's line on its log page",
        log_with_the_line,
        timeout=40,
        every=1,
        seen=lambda: page(signed_in, f"/jobs/{job.key}/log/out/").get_text()[-2000:],
    )
    assert "hello from alice outside the portal" in log
    cancel(signed_in, job, django_capture_on_commit_callbacks)
    job = poll_until(on, job_id, lambda j: j.is_final and not j.accounting_pending, what="cancelled")
    assert job.state == JobState.CANCELLED and job.elapsed_s is not None and job.start_at and job.end_at
    history = page(signed_in, "/jobs/history/").select_one(f'tr[data-job="{job.key}"]')
    assert history.select_one("[data-testid=job-state]")["data-state"] == "CANCELLED"
    assert history.select_one("[data-testid=outside-mark]") is not None


def counts(job: Job) -> dict:
    return {c.group: c.count for c in job.task_counts}


def test_an_array_of_50_tasks_limited_to_5_is_one_entry_whose_counts_move(
    on, signed_in, submitted, django_capture_on_commit_callbacks
):
    _, wide = PARTS[on]
    job_id = submitted(
        "-p", wide, "--mem=50M", "-t", "5", "--array=1-50%5", "--job-name=outside-array50",
        script="#!/bin/bash\necho task $SLURM_ARRAY_TASK_ID\nsleep 6\n",
    )  # fmt: skip
    job = poll_until(on, job_id, lambda j: j.is_array and counts(j).get("running"), what="tasks running")
    assert counts(job)["running"] <= 5 and sum(counts(job).values()) == 50 and job.array_spec == "1-50%5"
    first = poll_until(on, job_id, lambda j: counts(j).get("completed", 0) >= 5, what="5 tasks completed")
    assert Job.objects.filter(slurm_cluster=on, slurm_job_id=job_id).count() == 1  # one entry, not one per task
    table = page(signed_in, "/jobs/")
    assert len(table.select(f'tr[data-job="{first.key}"]')) == 1
    shown = {s["data-group"]: int(s["data-count"]) for s in table.select(f'tr[data-job="{first.key}"] [data-group]')}
    assert sum(shown.values()) == 50 and shown.get("completed", 0) >= 5
    cancel(signed_in, first, django_capture_on_commit_callbacks, task="50")  # still pending behind the %5 limit
    later = poll_until(
        on,
        job_id,
        lambda j: 50 not in _active(j) and counts(j).get("completed", 0) > counts(first)["completed"],
        what="task 50 gone",
    )
    assert later.is_active, (later.state, later.array_tasks)
    cancel(signed_in, later, django_capture_on_commit_callbacks)  # the rest
    done = poll_until(on, job_id, lambda j: j.is_final and not j.accounting_pending, timeout=150, what="array finished")
    final = counts(done)
    assert done.state == JobState.CANCELLED and sum(final.values()) == 50
    assert final["cancelled"] >= 1 and final.get("completed", 0) >= counts(later).get("completed", 0)
    assert 50 in TaskSet.parse(next(c.ids for c in done.task_counts if c.group == "cancelled"))


def _active(job: Job) -> set[int]:
    """The array's tasks the queue lists pending or running."""
    return {t for state, ids in load_tasks(job.array_tasks).items() if state in ACTIVE_STATES for t in ids}


def test_a_het_job_is_one_entry_and_cancel_ends_both_components(on, signed_in, submitted, django_capture_on_commit_callbacks):
    narrow, wide = PARTS[on]
    # The components get nodes of their own (seen on 24.11: both asking cluster2's one-node `gpu` pend
    # with Resources on an idle node), so the second asks the small-job pool's node, held back from it.
    job_id = submitted("-p", wide, "--mem=50M", "-t", "5", "--job-name=outside-het", ":", "-p", narrow, "--mem=50M", "-t", "5")
    job = poll_until(on, job_id, lambda j: j.state == JobState.RUNNING, what="het running")
    assert job.kind == JobKind.HET and [p["offset"] for p in job.het_parts] == [0, 1]
    parts = [p["job_id"] for p in job.het_parts]
    assert Job.objects.filter(slurm_cluster=on, slurm_job_id__in=parts).count() == 1  # the leader's row only
    assert "2 components" in page(signed_in, f"/jobs/{job.key}/").select_one("[data-testid=het-parts]").get_text()
    cancel(signed_in, job, django_capture_on_commit_callbacks)
    done = poll_until(on, job_id, lambda j: j.is_final and not j.accounting_pending, what="het cancelled")
    assert done.state == JobState.CANCELLED and {p["state"] for p in done.het_parts} == {"CANCELLED"}
    ids = ",".join(map(str, parts))
    states = get_gateway(on).run(["sacct", "-n", "-X", "-P", "-o", "JobIDRaw,State", "-j", ids]).out.splitlines()
    assert {line.split("|")[0] for line in states} == set(map(str, parts))
    assert all(line.split("|")[1].startswith("CANCELLED") for line in states)


def test_a_job_that_ended_before_the_poller_saw_it_comes_from_accounting(on, alice, submitted):
    """Nothing polls while the job runs and ends; the import (at most once a minute in the poller,
    forced here) reads it from accounting, once slurmdbd has its end."""
    small, _ = PARTS[on]
    job_id = submitted("-p", small, "--mem=50M", "-t", "1", "--job-name=outside-quick", script="#!/bin/bash\nexit 3\n")
    gw = get_gateway(on)
    made: list[int] = []  # rows each import made

    def imported():
        made.append(outside_import(gw, cluster=on, force=True) or 0)
        return Job.objects.filter(slurm_cluster=on, slurm_job_id=job_id).first()

    job = wait_for(
        f"job {job_id} imported from accounting", imported, timeout=60, every=1, seen=lambda: f"rows made per import: {made}"
    )
    assert sum(made) >= 1 and (job.origin, job.state, job.user.username) == (JobOrigin.OUTSIDE, JobState.FAILED, "alice")
    assert (job.exit_code, job.signal) == (3, 0)  # 22.05's JSON writes 0: its text says 3:0
    # Never twice: imported again, this job keeps its one row (alice's jobs of other tests running at
    # the same time may be new to the import, so its count is not the check).
    outside_import(gw, cluster=on, force=True)
    assert Job.objects.filter(slurm_cluster=on, slurm_job_id=job_id).count() == 1
