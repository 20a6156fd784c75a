"""Memory per GPU on both real local clusters: cluster1 (Slurm 22.05) and cluster2 (Slurm 24.11).
Alice submits from a terminal (``sbatch`` through the portal's ssh and sudo path) a job of two GPUs
whose script says ``#SBATCH --mem-per-gpu=3G``; Slurm gives it 3072 MiB per GPU (its own
``SLURM_MEM_PER_GPU`` inside the job says so), the portal's poller reads that from the real squeue
(``memory_per_tres``) and the job page says it in Slurm's terms, "3G per GPU", next to the 6G the job
asked for on its node; what the queue showed stays once accounting has finished the job.

The portal's own surfaces (the New job form, profiles, the API and so the CLI) ask for memory per
node only (``--mem``; an ``#SBATCH`` line in a portal job's script comes after the portal's own and is
not read by sbatch), so a job with memory per GPU is one submitted outside the portal."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from jobs.models import MemoryPer
from jobs.reads.logs import job_log_tail
from slurm.states import JobState
from tests.cluster.test_outside_integration import PARTS, alice, on, poll_until, signed_in, submitted  # noqa: F401 (fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(300)]

#: Per cluster: the GPU type of the partition with two nodes (PARTS' second).
GPU = {"cluster1": "a100", "cluster2": "h100"}
SCRIPT = "#!/bin/bash\n#SBATCH --mem-per-gpu=3G\necho mem-per-gpu=$SLURM_MEM_PER_GPU\nsleep 5\n"


def memory_line(client, job) -> str:
    page = BeautifulSoup(client.get(f"/jobs/{job.key}/").content, "html.parser")
    return page.find(attrs={"data-testid": "job-memory"}).get_text(" ", strip=True)


def test_memory_per_gpu_from_sbatch_lines_is_read_from_slurm_and_shown_per_gpu(on, alice, signed_in, submitted):
    partition = PARTS[on][1]
    job_id = submitted("-p", partition, f"--gres=gpu:{GPU[on]}:2", "-t", "2", "-J", "it-mem-per-gpu", script=SCRIPT)
    job = poll_until(on, job_id, lambda j: j.slurm_memory_per == MemoryPer.GPU, what="memory per GPU read from squeue")
    assert (job.slurm_memory_mb, job.memory_mb) == (3072, 6144)
    assert memory_line(signed_in, job) == "Slurm: 3G per GPU (3 GB) · asked for 6G"

    done = poll_until(on, job_id, lambda j: j.state == JobState.COMPLETED and not j.accounting_pending, what="completed")
    assert (done.slurm_memory_mb, done.slurm_memory_per) == (3072, MemoryPer.GPU)
    assert memory_line(signed_in, done) == "Slurm: 3G per GPU (3 GB) · asked for 6G"
    assert job_log_tail(done, "out").text.strip() == "mem-per-gpu=3072"
