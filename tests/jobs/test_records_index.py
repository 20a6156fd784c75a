"""jobs_sync reads each ended job's sacct records out of an index (jobs.worker.identity.records_by_id) instead
of scanning every record once per job: the same records must come out for every kind of job, in every
recorded sacct answer of every Slurm version."""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest

from jobs.models import Job, JobKind, JobOrigin
from jobs.worker.identity import accounting_records, records_by_id, records_of_job
from slurm.adapters import adapter_for
from slurm.entries import entry_id

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slurm"
# the answers that hold records ("nothing found" answers have no job to compare)
SACCT = sorted(p for p in FIXTURES.glob("*/**/sacct*.json") if "nothing_found" not in p.name)


def _records(path: Path) -> list:
    doc = json.loads(path.read_text())
    return adapter_for(doc, argv=["sacct", "--json"]).parse_sacct_jobs(doc)


def _jobs_for(records: list) -> list[Job]:
    """A portal job and an outside job for every id a record answers to, arrays and het jobs included."""
    jobs = []
    for f in records:
        for key in {entry_id(f), f.job_id}:
            kind = JobKind.ARRAY if f.array_job_id == key else JobKind.HET if f.het_job_id == key else JobKind.JOB
            het = [{"job_id": str(g.job_id), "offset": g.het_job_offset} for g in records if g.het_job_id == key]
            submitted = datetime.fromtimestamp((f.submit or 1), tz=UTC)
            common = {"slurm_job_id": key, "kind": kind, "het_parts": het, "submitted_at": submitted}
            key = f.comment.removeprefix("portal:") if (f.comment or "").startswith("portal:") else uuid.uuid4()
            jobs.append(Job(origin=JobOrigin.PORTAL, key=key, **common))
            jobs.append(Job(origin=JobOrigin.OUTSIDE, slurm_submit_at=submitted, **common))
    return jobs


@pytest.mark.parametrize("path", SACCT, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_the_index_gives_every_job_the_records_a_full_scan_gives(path):
    records = _records(path)
    assert records
    index = records_by_id(records)
    jobs = _jobs_for(records)
    assert any(accounting_records(job, records) for job in jobs)  # the comparison is not of empty lists only
    for job in jobs:
        assert accounting_records(job, records_of_job(job, index)) == accounting_records(job, records)


def test_a_job_reads_only_the_records_under_its_own_ids():
    records = _records(FIXTURES / "22.05" / "sacct_outcomes.json")
    assert len({entry_id(f) for f in records}) > 1
    index = records_by_id(records)
    for job in _jobs_for(records):
        own = records_of_job(job, index)
        assert own and len(own) < len(records)
        assert all(entry_id(f) == job.slurm_job_id or f.job_id == job.slurm_job_id for f in own)
