"""Memory per GPU (``--mem-per-gpu``): read from Slurm's job record on every supported version and
shown in Slurm's terms, "3G per GPU", like ``--mem`` and ``--mem-per-cpu``. Recorded on both lab
clusters by ``cluster/record_memory_per_gpu.py`` (``tests/fixtures/slurm/<release>/memory_per_gpu/``:
an outside job of two GPUs with ``#SBATCH --mem-per-gpu=3G``): 22.05's ``squeue --json`` writes
``memory_per_tres`` ``gres:gpu:3072``, 24.11's ``gres/gpu:3072``."""

from __future__ import annotations

import json

import pytest
from bs4 import BeautifulSoup

from jobs.models import Job, JobOrigin, MemoryPer, memory_asked_mb, slurm_memory_fields
from jobs.worker.sync import jobs_sync
from slurm import SlurmGateway
from slurm.adapters import adapter_for
from slurm.adapters.queue_decode import decode_squeue
from slurm.snapshot import ClusterSnapshot
from slurm.tres import parse_memory_per_gpu
from tests.conftest import FIXTURES
from tests.fakes import ANY, FakeTransport
from tests.jobs.test_job_pages import alice, cluster, no_slurm  # noqa: F401  (fixtures)

RELEASES = ["22.05", "24.11"]


def recorded(release: str, name: str) -> dict:
    return json.loads((FIXTURES / "slurm" / release / "memory_per_gpu" / f"{name}.json").read_text())


@pytest.mark.parametrize(
    "text, mib",
    [
        ("gres:gpu:3072", 3072),  # 22.05
        ("gres/gpu:3072", 3072),  # 24.11
        ("gres/gpu:8192,gres/shard:1", 8192),
        ("", None),
        (None, None),
        ("gres/shard:100", None),
        ("gres/gpu:lots", None),
    ],
)
def test_parse_memory_per_gpu(text, mib):
    assert parse_memory_per_gpu(text) == mib


@pytest.mark.parametrize("release", RELEASES)
@pytest.mark.parametrize("decoded", [False, True], ids=["json.loads", "queue_decode"])
def test_the_recorded_queue_reads_3072_mib_per_gpu(release, decoded):
    doc = recorded(release, "squeue")
    text = json.dumps(doc)
    adapter = adapter_for(doc)
    (q,) = adapter.parse_jobs(decode_squeue(text.encode()) if decoded else json.loads(text))
    assert q.memory_per_gpu == 3072 and sum(q.gpus.values()) == 2
    assert slurm_memory_fields(q) == {"slurm_memory_mb": 3072, "slurm_memory_per": MemoryPer.GPU}
    assert memory_asked_mb(q) == 6144


def memory_line(client, job: Job) -> str:
    page = BeautifulSoup(client.get(f"/jobs/{job.key}/").content, "html.parser")
    return page.find(attrs={"data-testid": "job-memory"}).get_text(" ", strip=True)


@pytest.mark.django_db
@pytest.mark.parametrize("release", RELEASES)
def test_an_outside_job_with_memory_per_gpu_shows_it_per_gpu(client, alice, cluster, no_slurm, release):  # noqa: F811
    doc = recorded(release, "squeue")
    jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=adapter_for(doc).parse_jobs(doc)), SlurmGateway(FakeTransport()))
    job = Job.objects.get(origin=JobOrigin.OUTSIDE)
    assert (job.slurm_memory_mb, job.slurm_memory_per, job.memory_mb, job.gpu_count) == (3072, MemoryPer.GPU, 6144, 2)
    client.force_login(alice)
    assert memory_line(client, job) == "Slurm: 3G per GPU (3 GB) · asked for 6G"


@pytest.mark.django_db
def test_the_memory_line_per_gpu(client, alice, cluster, no_slurm):  # noqa: F811
    job = Job.objects.create(
        user=alice, name="x", partition="train", memory_mb=16384, time_limit_min=5, script="true",
        slurm_memory_mb=8192, slurm_memory_per=MemoryPer.GPU,
    )  # fmt: skip
    client.force_login(alice)
    assert memory_line(client, job) == "Slurm: 8G per GPU (8 GB) · asked for 16G"


@pytest.mark.parametrize("release", RELEASES)
def test_accounting_keeps_no_per_gpu_figure_so_the_memory_slurm_counted_on_the_node_is_read(release):
    """sacct writes ``required`` memory 0 per node for a ``--mem-per-gpu`` job (24.11's
    ``memory_per_node`` 0 read as ``--mem=0`` before: "all of each node's memory") and
    ``tres.requested`` ``mem`` 6144: 6G on its one node."""
    doc = recorded(release, "sacct")
    (f,) = adapter_for(doc).parse_sacct_jobs(doc)
    assert (f.memory_per_node, f.memory_per_cpu) == (6144, None)
    assert slurm_memory_fields(f) == {"slurm_memory_mb": 6144, "slurm_memory_per": MemoryPer.NODE}
    assert memory_asked_mb(f) == 6144


@pytest.mark.django_db
@pytest.mark.parametrize("release", RELEASES)
def test_what_the_queue_showed_per_gpu_stays_when_accounting_ends_the_job(client, alice, cluster, no_slurm, release):  # noqa: F811
    queue, sacct = recorded(release, "squeue"), recorded(release, "sacct")
    jobs_sync(ClusterSnapshot(taken_at=1.0, jobs=adapter_for(queue).parse_jobs(queue)), SlurmGateway(FakeTransport()))
    fake = FakeTransport().expect(["sacct", "--json", "-D", "-S", ANY, "-j", ANY], stdout=json.dumps(sacct))
    jobs_sync(ClusterSnapshot(taken_at=2.0, jobs=[]), SlurmGateway(fake))
    job = Job.objects.get(origin=JobOrigin.OUTSIDE)
    assert (job.state, job.slurm_memory_mb, job.slurm_memory_per) == ("COMPLETED", 3072, MemoryPer.GPU)
    client.force_login(alice)
    assert memory_line(client, job) == "Slurm: 3G per GPU (3 GB) · asked for 6G"
