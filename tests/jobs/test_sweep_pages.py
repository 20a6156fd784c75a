"""A sweep of many array tasks costs My jobs what one entry costs: the poller stores one row per
array with its task counts (``Job.array_counts``), the page reads the counts and never the task
ranges, and the ended jobs it reads stop at its cap. Sizes and row counts, never times."""

from __future__ import annotations

import json
import re
from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.models import Job, JobKind, JobOrigin
from jobs.reads.selectors import MY_JOBS_ENDED_CAP, my_jobs
from jobs.web.fragment_etags import job_table_version
from jobs.worker.sync import jobs_sync
from slurm import SlurmGateway
from slurm.records import QueueJob
from slurm.snapshot import ClusterSnapshot
from slurm.states import JobState
from tests.fakes import FakeTransport

pytestmark = pytest.mark.django_db

ARRAY_ID = 7000


@pytest.fixture
def dana(django_user_model, clean_cache):
    return django_user_model.objects.create(username="dana", slurm_accounts=["vision"])


def sweep(tasks: int, *, scattered: bool = False) -> list[QueueJob]:
    """squeue's records of one array of ``tasks`` tasks of dana's: each task its own record (as once
    Slurm split them), pending; ``scattered``: the first fifth ended, alternately COMPLETED and FAILED
    (still listed, within MinJobAge), so their ids make one range each."""
    now = int(timezone.now().timestamp())
    common = dict(array_job_id=ARRAY_ID, array_task_string="", name="sweep", user="dana", account="vision")
    common |= dict(partition="train", reason="JobHeldUser", priority=0, submit_time=now - 60, start_time=0)
    common |= dict(end_time=0, time_limit=1, gpus={}, comment="", nodes="", cpus=1)
    ended = tasks // 5 if scattered else 0
    return [
        QueueJob(
            job_id=ARRAY_ID if i == 0 else ARRAY_ID + 1 + i,
            array_task_id=i,
            state=("COMPLETED" if i % 2 else "FAILED") if i < ended else "PENDING",
            **{**common, "end_time": now - 30 if i < ended else 0},
        )
        for i in range(tasks)
    ]


def poll(tasks: int, **kw) -> Job:
    jobs_sync(ClusterSnapshot(taken_at=1.0, cluster="cluster1", jobs=sweep(tasks, **kw)), SlurmGateway(FakeTransport()))
    return Job.objects.get(origin=JobOrigin.OUTSIDE, slurm_job_id=ARRAY_ID)


@pytest.mark.parametrize("tasks", [500, 5000])
@pytest.mark.parametrize("scattered", [False, True])
def test_the_poller_stores_one_entry_per_array_with_its_counts_whatever_the_task_count(dana, tasks, scattered):
    entry = poll(tasks, scattered=scattered)
    assert Job.objects.filter(user=dana).count() == 1  # one entry, not one per task
    assert entry.kind == JobKind.ARRAY
    ended = tasks // 5 if scattered else 0
    expected = {"pending": tasks - ended} | ({"completed": ended // 2, "failed": ended - ended // 2} if ended else {})
    assert entry.array_counts == expected
    assert [(c.group, c.count) for c in entry.task_totals] == [(c.group, c.count) for c in entry.task_counts]
    # what My jobs reads of it is a few numbers: the same size for 500 and 5,000 tasks
    assert len(json.dumps(entry.array_counts)) <= 60
    if scattered:  # the ranges it is not read from grow with the task count
        assert len(json.dumps(entry.array_tasks)) > 2 * ended


def _numbers_out(html: str, tasks: int) -> str:
    """The fragment with the sweep's own numbers (task counts, last task id, Slurm ids) as one mark,
    so that 500 and 5,000 tasks compare by everything else."""
    ended = tasks // 5
    numbers = {tasks, tasks - 1, tasks - ended, ended // 2, ended - ended // 2}
    return re.sub(r"\d+", lambda m: "N" if int(m.group()) in numbers else m.group(), html)


def test_my_jobs_html_is_the_same_size_for_500_and_5000_tasks(client, dana):
    sizes, pages = {}, {}
    for tasks in (500, 5000):
        Job.objects.filter(user=dana).delete()
        entry = poll(tasks, scattered=True)
        client.force_login(dana)
        body = client.get("/jobs/table/").content.decode()
        counts = BeautifulSoup(body, "html.parser").select(f"tr[data-job='{entry.key}'] .task-count")
        assert {c["data-group"]: int(c["data-count"]) for c in counts} == entry.array_counts
        pages[tasks] = _numbers_out(body.replace(str(entry.key), "KEY"), tasks)
        sizes[tasks] = len(pages[tasks])
    assert sizes[500] == sizes[5000], sizes
    assert pages[500] == pages[5000]


def test_my_jobs_reads_no_task_ranges(client, dana):
    poll(5000, scattered=True)
    client.force_login(dana)
    with CaptureQueriesContext(connection) as queries:
        for url in ("/jobs/", "/jobs/table/"):
            assert client.get(url).status_code == 200
    job_reads = [q["sql"] for q in queries.captured_queries if 'FROM "jobs_job"' in q["sql"]]
    assert job_reads and not [sql for sql in job_reads if "array_tasks" in sql and "md5" not in sql]


def _ended(user, n: int) -> list[Job]:
    now = timezone.now()
    return Job.objects.bulk_create(
        Job(
            user=user,
            name=f"ended-{i}",
            partition="train",
            memory_mb=100,
            time_limit_min=5,
            script="true\n",
            state=JobState.COMPLETED,
            exit_code=0,
            end_at=now - timedelta(seconds=1 + i),
        )
        for i in range(n)
    )


def test_the_tables_tag_follows_the_listed_rows_and_the_count_of_the_rest(dana):
    rows = _ended(dana, MY_JOBS_ENDED_CAP + 40)
    listed = my_jobs(user=dana)
    assert len(listed.ended) == MY_JOBS_ENDED_CAP and listed.ended_more == 40
    before = job_table_version(user=dana)
    # an ended job past the cap is not on the page: a change to it leaves the tag alone
    Job.objects.filter(pk=rows[-1].pk).update(name="renamed past the cap")
    assert job_table_version(user=dana) == before
    # one that is listed changes it, and so does one more ended job (the "N more" line)
    Job.objects.filter(pk=rows[0].pk).update(name="renamed on the page")
    changed = job_table_version(user=dana)
    assert changed != before
    _ended(dana, 1)
    added = job_table_version(user=dana)
    assert added != changed
    # an ended job past the cap leaving the hour changes the count alone, and so the tag
    left = Job.objects.filter(pk=rows[-1].pk).update(end_at=timezone.now() - timedelta(hours=2))
    assert left == 1 and my_jobs(user=dana).ended_more == 40
    assert job_table_version(user=dana) != added


def test_the_tag_of_a_held_sweep_reads_no_row_whole(dana):
    poll(5000)  # held by the user: its words are its code's, in the row's digest
    with CaptureQueriesContext(connection) as queries:
        job_table_version(user=dana)
    assert len(queries) == 1, [q["sql"][:80] for q in queries.captured_queries]  # the digest with the ended count
    assert not [q for q in queries.captured_queries if q["sql"].startswith('SELECT "jobs_job"."id"')]


def test_the_migration_fills_the_counts_of_arrays_already_stored(dana):
    from importlib import import_module
    from types import SimpleNamespace

    from django.apps import apps

    old = Job.objects.create(
        user=dana, name="old sweep", partition="train", memory_mb=1, time_limit_min=1, script="", state=JobState.RUNNING,
        kind=JobKind.ARRAY, array_tasks={"PENDING": "3-9", "RUNNING": "0-2", "FAILED": "10,12"}, array_counts={},
    )  # fmt: skip
    plain = Job.objects.create(user=dana, name="plain", partition="train", memory_mb=1, time_limit_min=1, script="")
    import_module("jobs.migrations.0016_job_array_counts").fill(apps, SimpleNamespace(connection=connection))
    old.refresh_from_db()
    plain.refresh_from_db()
    assert old.array_counts == {"running": 3, "pending": 7, "failed": 2}
    assert plain.array_counts == {}
