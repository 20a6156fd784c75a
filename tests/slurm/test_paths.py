"""A batch job's stdout/stderr file from Slurm's job record (slurm/paths.py): 22.05 writes the pattern as
given (or ""), 24.11 fills it in; the expansion is checked against 24.11's own (sacct keeps both the
pattern, ``stdout``, and what Slurm made of it, ``stdout_expanded``)."""

from __future__ import annotations

import pytest

from slurm.paths import NO_VAL, expand_pattern, output_path
from tests.slurm.outside_recorded import OUTSIDE, outside


def test_placeholders_are_filled_in_as_slurmstepd_does():
    common = dict(job_id=125, array_job_id=120, array_task_id=7, user="alice", name="train", node="g1")
    assert expand_pattern("/o/%x-%u-%A_%a-%j-%N-%%-%b.out", **common) == "/o/train-alice-120_7-125-g1-%-7.out"
    assert expand_pattern("/o/%3a-%5j", **common) == "/o/007-00125"
    assert expand_pattern("/o/%A_%a", job_id=9) == f"/o/9_{NO_VAL}"  # not an array: %A is the job id
    assert expand_pattern("/o/\\\\%j", job_id=9) == "/o/%j"  # "\\" stops the expansion
    assert expand_pattern("/o/%q-%j", job_id=9) == "/o/%q-9"  # unknown letters stay


def test_default_and_relative_paths():
    assert output_path("", cwd="/home/alice", job_id=5) == "/home/alice/slurm-5.out"
    assert output_path("", cwd="/home/alice", job_id=8, array_job_id=5, array_task_id=3) == "/home/alice/slurm-5_3.out"
    assert output_path("out/%j.log", cwd="/w/", job_id=5) == "/w/out/5.log"
    assert output_path("", cwd="/w", job_id=5, fallback="/w/slurm-5.out") == "/w/slurm-5.out"
    assert output_path("x.log", cwd="", job_id=5) == ""
    # 24.11's own join for a job submitted from "/" (an outside job): one slash, as Linux reads it.
    assert output_path("//slurm-130.out", cwd="/", job_id=130) == "/slurm-130.out"
    assert output_path("", cwd="/", job_id=130) == "/slurm-130.out"
    assert output_path("/w//out///%j.log", cwd="/", job_id=5) == "/w/out/5.log"


def test_expansion_matches_what_slurm_2411_itself_made_of_the_patterns():
    """24.11's sacct keeps the pattern (``stdout``: ``/home/alice/outside-%A_%a.out``, ``%x-%u-%j``,
    ``""`` for the default) and its own expansion (``stdout_expanded``) of every recorded job."""
    rec = outside("24.11")
    raw = {j["job_id"]: j for j in rec.doc("sacct_ended")["jobs"]}
    checked = 0
    for f in rec.sacct():
        job = raw[f.job_id]
        if not job.get("stdout_expanded"):
            continue
        made = output_path(
            job["stdout"],
            cwd=f.cwd,
            job_id=f.job_id,
            array_job_id=f.array_job_id,
            array_task_id=f.array_task_id,
            user=f.user,
            name=f.name,
        )
        assert made == job["stdout_expanded"], (f.job_id, job["stdout"])
        checked += 1
    assert checked >= 9  # plain, long, five array tasks, two het components


@pytest.mark.parametrize("release", OUTSIDE)
def test_both_releases_give_the_same_file_for_the_same_job(release):
    """The held job ``long`` (``--output=/home/alice/outside-%x-%u-%j.out``): 22.05's squeue writes the
    pattern, 24.11's the path; both read as the file Slurm writes."""
    rec = outside(release)
    q = next(q for q in rec.queue() if q.job_id == rec.ids["long"])
    made = output_path(q.stdout, cwd=q.cwd, job_id=q.job_id, user=q.user, name=q.name)
    assert made == f"/home/alice/outside-{'n' * 300}-alice-{rec.ids['long']}.out"
    plain = next(q for q in rec.queue() if q.job_id == rec.ids["plain"])
    assert output_path(plain.stdout, cwd=plain.cwd, job_id=plain.job_id) == f"/home/alice/slurm-{rec.ids['plain']}.out"
