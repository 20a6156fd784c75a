"""Memory on the job pages: the New job form reads it with the one reader
(portal.units.memory_mib) and refuses with the sentence that says which units are accepted; the job
page shows the memory Slurm holds for the job in Slurm's terms (per node or per CPU, with units) next
to what was asked, read by the poller's sync from every release's recorded squeue (``memory_per_node``
/ ``memory_per_cpu``) or, for a job it never saw queued, sacct's ``required``."""

from __future__ import annotations

import json
import uuid
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from jobs.models import Job, MemoryPer
from jobs.worker.sync import jobs_sync
from portal.units import ACCEPTED
from slurm import SlurmGateway
from slurm.snapshot import ClusterSnapshot
from tests.fakes import ANY, FakeTransport
from tests.jobs.test_job_pages import FORM, alice, cluster, no_slurm  # noqa: F401  (fixtures)
from tests.slurm.recorded import ALL, recording

pytestmark = pytest.mark.django_db


# --- the form -------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "typed, mib",
    [
        ("4000M", 4000),  # was 3993 MiB: the form rounded to 0.1 GB
        ("4G", 4096),
        ("4 GB", 4096),
        ("512MiB", 512),
        (" 4 g ", 4096),
        ("4", 4096),  # a bare number means GB
        ("2.5", 2560),
        ("0.1G", 103),  # rounded up to the MiB, never below what was asked (was 102)
    ],
)
def test_job_form_memory_as_typed(client, alice, cluster, no_slurm, django_capture_on_commit_callbacks, typed, mib):  # noqa: F811
    client.force_login(alice)
    with django_capture_on_commit_callbacks():
        resp = client.post("/jobs/new/", {**FORM, "memory_gb": typed})
    assert resp.status_code == HTTPStatus.FOUND, resp.content.decode()[:2000]
    assert Job.objects.get().memory_mb == mib


@pytest.mark.parametrize(
    "typed, sentence",
    [
        ("4GBs", "'4GBs' is not an amount of memory."),
        ("4.5.6", "'4.5.6' is not an amount of memory."),
        ("1e3", "'1e3' is not an amount of memory."),
        ("0", "Memory must be more than 0 ('0' is not)."),
        ("-1", "Memory must be more than 0 ('-1' is not)."),
        (
            "4000",
            "4000 with no unit would be 4000 GB: write 4000M for MiB (what Slurm's --mem means by a bare number) or 4000G for GB.",
        ),
    ],
)
def test_job_form_memory_refused_with_the_units_accepted(client, alice, cluster, no_slurm, typed, sentence):  # noqa: F811
    client.force_login(alice)
    resp = client.post("/jobs/new/", {**FORM, "memory_gb": typed})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    assert resp.context["form"].errors["memory_gb"] == [f"{sentence} {ACCEPTED}"]
    assert not Job.objects.exists()


@pytest.mark.parametrize("typed", ["1000T", "9" * 40])
def test_job_form_memory_beyond_any_node_is_refused_with_the_partitions_own_maximum(client, alice, cluster, no_slurm, typed):  # noqa: F811
    """As 100G is (the policy's check), not with the 64T cap every amount has (portal.units)."""
    client.force_login(alice)
    resp = client.post("/jobs/new/", {**FORM, "memory_gb": typed})
    assert resp.status_code == HTTPStatus.BAD_REQUEST
    assert resp.context["form"].errors["memory_gb"] == [
        f"Memory must be at most 15.6 GB (16000 MiB, the largest suitable node in train). {ACCEPTED}"
    ]
    hundred = client.post("/jobs/new/", {**FORM, "memory_gb": "100G"}).context["form"].errors["memory_gb"]
    assert hundred[0].startswith("Memory must be at most 15.6 GB (16000 MiB, the largest suitable node in train).")
    assert not Job.objects.exists()


def test_job_form_says_what_a_bare_number_means(client, alice, cluster, no_slurm):  # noqa: F811
    client.force_login(alice)
    field = BeautifulSoup(client.get("/jobs/new/").content, "html.parser").find("input", attrs={"name": "memory_gb"})
    assert field["value"] == "4G"
    assert "4G, 4000M or 1.5T (a bare number means GB)" in client.get("/jobs/new/").content.decode()


# --- the job page: what Slurm holds ------------------------------------------------------------------
#: What each release's recorded "running" job holds: 22.05's job 2 got DefMemPerCPU=1000 on 2 CPUs
#: (squeue memory_per_cpu 1000); cluster2's fx-running asked --mem=2000M (memory_per_node 2000).
HELD = {
    "22.05": (1000, MemoryPer.CPU, "Slurm: 1000M per CPU (1 GB) · asked for 2000M"),
    "23.11": (2000, MemoryPer.NODE, "Slurm: 2000M per node (2 GB) · asked for 2000M"),
    "24.05": (2000, MemoryPer.NODE, "Slurm: 2000M per node (2 GB) · asked for 2000M"),
    "24.11": (2000, MemoryPer.NODE, "Slurm: 2000M per node (2 GB) · asked for 2000M"),
}


def row(user, rec, role: str, **kw) -> Job:
    r = rec.role(role)
    fields = dict(
        user=user,
        name=f"{role}-{r.id}",
        partition="small",
        memory_mb=2000,
        time_limit_min=5,
        script="true",
        slurm_job_id=r.id,
        state="RUNNING",
        key=uuid.UUID(r.comment.removeprefix("portal:")) if r.comment else uuid.uuid4(),
        submitted_at="2026-11-29T10:00:00Z",
    )
    return Job.objects.create(**{**fields, **kw})


def memory_line(client, job: Job) -> str:
    page = BeautifulSoup(client.get(f"/jobs/{job.key}/").content, "html.parser")
    return page.find(attrs={"data-testid": "job-memory"}).get_text(" ", strip=True)


@pytest.mark.parametrize("release", ALL)
def test_job_page_shows_the_memory_slurm_holds_from_the_queue(client, alice, cluster, no_slurm, release):  # noqa: F811
    rec = recording(release)
    job = row(alice, rec, "running")
    client.force_login(alice)
    assert memory_line(client, job) == "asked for 2000M"  # before the poller has read Slurm's figure
    doc = rec.doc(rec.role("running").queue)
    jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=rec.adapter.parse_jobs(doc)), SlurmGateway(FakeTransport()))
    job.refresh_from_db()
    mib, per, line = HELD[release]
    assert (job.slurm_memory_mb, job.slurm_memory_per) == (mib, per)
    assert memory_line(client, job) == line


def test_job_page_per_node_on_2205(client, alice, cluster, no_slurm):  # noqa: F811
    """22.05's job 3 asked --mem=4000 (squeue memory_per_node 4000, memory_per_cpu null)."""
    rec = recording("22.05")
    job = Job.objects.create(
        user=alice,
        name="bert",
        partition="train",
        memory_mb=4000,
        time_limit_min=5,
        script="true",
        slurm_job_id=3,
        state="RUNNING",
    )
    jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=rec.adapter.parse_jobs(rec.doc("squeue"))), SlurmGateway(FakeTransport()))
    client.force_login(alice)
    assert memory_line(client, job) == "Slurm: 4000M per node (3.9 GB) · asked for 4000M"


@pytest.mark.parametrize("release", ALL)
def test_a_job_never_seen_queued_takes_saccts_required_memory(client, alice, cluster, no_slurm, release):  # noqa: F811
    """22.05's sacct writes one required.memory (1000 for job 2) and tres.requested mem 2000 on 2
    CPUs: per CPU; 23.11+ write required.memory_per_node / memory_per_cpu."""
    rec = recording(release)
    job = row(alice, rec, "running")
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(rec.doc("sacct")))
    result = jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=[]), SlurmGateway(fake))
    assert result.finished == 1
    job.refresh_from_db()
    mib, per, line = HELD[release]
    assert (job.slurm_memory_mb, job.slurm_memory_per) == (mib, per)
    client.force_login(alice)
    assert memory_line(client, job) == line


def test_what_the_queue_showed_is_kept_when_accounting_finishes_the_job(client, alice, cluster, no_slurm):  # noqa: F811
    rec = recording("24.11")
    job = row(alice, rec, "running", slurm_memory_mb=3000, slurm_memory_per=MemoryPer.NODE)
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(rec.doc("sacct")))
    jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=[]), SlurmGateway(fake))
    job.refresh_from_db()
    assert (job.state, job.slurm_memory_mb) == ("COMPLETED", 3000)


@pytest.mark.parametrize(
    "mib, per, asked, line",
    [
        (0, MemoryPer.NODE, 4096, "Slurm: all of each node's memory (--mem=0) · asked for 4G"),
        (1536, MemoryPer.CPU, 3072, "Slurm: 1536M per CPU (1.5 GB) · asked for 3G"),
        (None, "", 1572864, "asked for 1536G"),
    ],
)
def test_the_memory_line(client, alice, cluster, no_slurm, mib, per, asked, line):  # noqa: F811
    job = Job.objects.create(
        user=alice,
        name="x",
        partition="train",
        memory_mb=asked,
        time_limit_min=5,
        script="true",
        slurm_memory_mb=mib,
        slurm_memory_per=per,
    )
    client.force_login(alice)
    assert memory_line(client, job) == line
