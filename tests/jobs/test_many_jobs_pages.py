"""Thousands of separate jobs (a shell loop of ``sbatch``, read by the poller as outside jobs) cost My
jobs what ``MY_JOBS_ACTIVE_CAP`` of them cost: the page lists the newest that have not ended, says
how many more there are and where to see them, and its ETag follows what it lists and that count.
Sizes, rows and queries, never times."""

from __future__ import annotations

from datetime import timedelta

import pytest
from bs4 import BeautifulSoup
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from jobs.models import Job, JobOrigin
from jobs.reads.selectors import MY_JOBS_ACTIVE_CAP, my_jobs
from jobs.web.fragment_etags import job_table_version
from jobs.worker.sync import jobs_sync
from slurm import SlurmGateway
from slurm.records import QueueJob
from slurm.snapshot import ClusterSnapshot
from tests.fakes import FakeTransport

pytestmark = pytest.mark.django_db

FIRST_ID = 9000


@pytest.fixture
def erin(django_user_model, clean_cache):
    return django_user_model.objects.create(username="erin", slurm_accounts=["vision"])


def loop_of_jobs(n: int) -> list[QueueJob]:
    """squeue's records of ``n`` separate pending jobs of erin's, job ``FIRST_ID + i`` sent ``n - i``
    seconds ago (the last one is the newest)."""
    now = int(timezone.now().timestamp())
    return [
        QueueJob(
            job_id=FIRST_ID + i,
            array_job_id=0,
            array_task_id=None,
            array_task_string="",
            name=f"step-{i}",
            user="erin",
            account="vision",
            partition="train",
            state="PENDING",
            reason="Priority",
            priority=1,
            submit_time=now - n + i,
            start_time=0,
            end_time=0,
            time_limit=10,
            gpus={},
            comment="",
            nodes="",
            cpus=1,
        )  # fmt: skip
        for i in range(n)
    ]


def poll(records: list[QueueJob]) -> None:
    jobs_sync(ClusterSnapshot(taken_at=1.0, cluster="cluster1", jobs=records), SlurmGateway(FakeTransport()))


def test_my_jobs_lists_the_newest_not_ended_up_to_its_cap_and_says_how_many_more(client, erin):
    extra = 30
    poll(loop_of_jobs(MY_JOBS_ACTIVE_CAP + extra))
    assert Job.objects.filter(user=erin, origin=JobOrigin.OUTSIDE).count() == MY_JOBS_ACTIVE_CAP + extra  # no row dropped
    listed = my_jobs(user=erin)
    assert len(listed.active) == MY_JOBS_ACTIVE_CAP and listed.active_more == extra
    client.force_login(erin)
    for url in ("/jobs/", "/jobs/table/"):
        page = BeautifulSoup(client.get(url).content.decode(), "html.parser")
        ids = [int(tr["data-slurm-id"]) for tr in page.select("[data-testid=job-table] tbody tr")]
        newest = FIRST_ID + MY_JOBS_ACTIVE_CAP + extra - 1
        assert len(ids) == MY_JOBS_ACTIVE_CAP and ids[0] == newest and ids[-1] == newest - MY_JOBS_ACTIVE_CAP + 1, url
        note = page.select_one("[data-testid=active-more]").get_text(" ", strip=True)
        assert f"The {MY_JOBS_ACTIVE_CAP} newest" in note and f"{extra} more have not ended" in note, note
        assert "gpuportal ls" in note and page.select_one("[data-testid=active-more] a")["href"] == "/account/tokens/"


def test_under_the_cap_there_is_no_note_and_no_more_queries(client, erin):
    poll(loop_of_jobs(3))
    client.force_login(erin)
    page = BeautifulSoup(client.get("/jobs/table/").content.decode(), "html.parser")
    assert len(page.select("[data-testid=job-table] tbody tr")) == 3 and not page.select("[data-testid=active-more]")
    with CaptureQueriesContext(connection) as queries:
        job_table_version(user=erin)
    assert len(queries) == 1, [q["sql"][:80] for q in queries.captured_queries]  # the digest with the ended count


def test_the_tables_tag_follows_the_listed_jobs_and_the_count_of_the_rest(erin):
    records = loop_of_jobs(MY_JOBS_ACTIVE_CAP + 30)
    poll(records)
    with CaptureQueriesContext(connection) as queries:
        before = job_table_version(user=erin)
    assert len(queries) == 2  # past the cap, one more count
    # a job past the cap is not on the page: a change to it leaves the tag alone
    # (the 201st newest, FIRST_ID + 29, is read to know there are more; the 202nd is not)
    assert Job.objects.filter(user=erin, slurm_job_id=FIRST_ID + 28).update(name="renamed past the cap") == 1
    assert job_table_version(user=erin) == before
    # one that is listed changes it, and so does one more job past the cap (the "N more" line)
    assert Job.objects.filter(user=erin, slurm_job_id=FIRST_ID + len(records) - 1).update(name="renamed on the page") == 1
    changed = job_table_version(user=erin)
    assert changed != before
    oldest = Job.objects.filter(user=erin).order_by("created_at").first().created_at
    older = Job.objects.create(user=erin, name="older", partition="train", memory_mb=1, time_limit_min=1, script="")
    Job.objects.filter(pk=older.pk).update(created_at=oldest - timedelta(seconds=1))  # listed last, past the cap
    assert job_table_version(user=erin) != changed


def test_the_home_page_counts_the_jobs_not_ended_without_promising_my_jobs_lists_them_all(client, erin):
    """The home page lists a few jobs and counts the rest that have not ended; past My jobs' cap it
    must not say they are all "in My jobs" (My jobs names where to see those past its cap)."""
    extra = 30
    poll(loop_of_jobs(MY_JOBS_ACTIVE_CAP + extra))
    client.force_login(erin)
    page = BeautifulSoup(client.get("/").content.decode(), "html.parser")
    shown = len(page.select("[data-testid=home-job]"))
    more = page.select_one("[data-testid=home-jobs-more]")
    assert shown > 0 and more is not None
    assert more.get_text(" ", strip=True) == f"{MY_JOBS_ACTIVE_CAP + extra - shown} more jobs not ended: see My jobs"
    assert more.a["href"] == "/jobs/"
