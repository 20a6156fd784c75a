"""An array's Slurm ref as squeue writes it (``383_[1-400:3%5]`` for ``sbatch --array=1-400:3%5``, not
every id), found however its ids are written, and shown short in job tables; a het job's one
component (``384+1``) refused with what it names (jobs/arrays.py, jobs/reads/job_refs.py,
templates/jobs/_slurm_ref.html)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest
from bs4 import BeautifulSoup
from msgspec.structs import replace

from jobs.arrays import array_fields, queue_array_fields
from jobs.models import Job, JobKind
from jobs.reads.job_refs import job_for_ref
from portal.refusals import Refused
from slurm.entries import queue_entries
from slurm.states import JobState
from slurm.tasksets import TaskSet
from tests.jobs.test_job_pages import alice, cluster, make, no_slurm  # noqa: F401 (fixtures)
from tests.slurm.recorded import recording

pytestmark = pytest.mark.django_db

#: An irregular array (ids 2 then 3 apart): Slurm writes each id, about 900 characters.
IRREGULAR = {JobState.PENDING: TaskSet.from_ids(1 + 5 * (i // 2) + 2 * (i % 2) for i in range(200))}


def stepped_entry():
    """The recorded pending array of 22.05 (``squeue_arrays.json``, job 22) as squeue lists
    ``sbatch --array=1-400:3%5`` before any task started."""
    rec = recording("22.05")
    records = [
        replace(q, array_task_string="1-400:3%5") if q.array_job_id == 22 and q.array_task_id is None else q
        for q in rec.adapter.parse_jobs(rec.doc("squeue_arrays"))
    ]
    return queue_entries(records)[22]


def test_a_stepped_array_is_named_as_squeue_names_it():
    fields = queue_array_fields(stepped_entry(), {})
    assert fields["array_spec"] == "1-400:3%5" and fields["array_counts"] == {"pending": 134}
    assert TaskSet.parse(fields["array_tasks"]["PENDING"]) == TaskSet.parse("1-400:3")  # stored as before
    assert Job(slurm_job_id=383, kind=JobKind.ARRAY, array_spec=fields["array_spec"]).slurm_ref == "383_[1-400:3%5]"


def test_steps_and_single_ids_mix_and_what_does_not_fit_is_cut():
    mixed = {JobState.PENDING: TaskSet.parse("1-400:3"), JobState.FAILED: TaskSet.parse("1000,1002,1005,2000-2010")}
    assert array_fields(mixed, 5)["array_spec"] == "1-400:3,1000,1002,1005,2000-2010%5"
    cut = array_fields(IRREGULAR, 5)["array_spec"]
    assert len(cut) <= 255 and cut.startswith("1,3,6,8,") and cut.endswith(",...,498%5")


def array(owner, **kw):
    tasks = {JobState.COMPLETED: TaskSet.parse("1-30:3"), JobState.PENDING: TaskSet.parse("31-100:3")}
    return make(owner, slurm_job_id=383, kind=JobKind.ARRAY, **{"state": JobState.PENDING, **array_fields(tasks, 5), **kw})


def refusal(owner, ref) -> str:
    with pytest.raises(Refused) as refused:
        job_for_ref(user=owner, ref=ref)
    return str(refused.value)


def test_the_array_is_found_however_its_ids_are_written(alice):
    job = array(alice)
    every = ",".join(str(i) for i in range(1, 101, 3))
    assert job.slurm_ref == "383_[1-100:3%5]"
    for ref in ("383_[1-100:3%5]", "383_[1-100:3]", f"383_[{every}%5]", f"383_[{every}]", "383_[1-30:3,31-100:3%2]"):
        assert job_for_ref(user=alice, ref=ref) == (job, None), ref


def test_a_row_stored_with_every_id_is_found_by_squeues_name(alice):
    """A row the poller wrote before steps were written keeps ``1,4,7,...`` until written again."""
    every = ",".join(str(i) for i in range(1, 101, 3))
    job = array(alice, array_spec=f"{every}%5")
    assert job_for_ref(user=alice, ref="383_[1-100:3%5]") == (job, None)
    assert job_for_ref(user=alice, ref=job.slurm_ref) == (job, None)
    job.array_tasks = {}  # only the spec says which ids
    job.save()
    assert job_for_ref(user=alice, ref="383_[1-100:3%5]") == (job, None)


def test_some_of_the_tasks_are_refused_saying_which_and_how_to_cancel_one(alice):
    array(alice)
    assert refusal(alice, "383_[1-10:3%5]") == (
        "'383_[1-10:3%5]' names tasks 1-10:3 of array job 383, not all of its tasks (1-100:3), and the portal acts on "
        "whole jobs: use 383 for the whole array, or `gpuportal cancel 383 --task N` for one task."
    )
    assert "names tasks 1-103:3 of array job 383" in refusal(alice, "383_[1-103:3]")  # more than it has


def test_one_het_component_is_refused_saying_what_it_names(alice):
    het = make(alice, slurm_job_id=384, kind=JobKind.HET, het_parts=[{"offset": 0, "job_id": 384}, {"offset": 1, "job_id": 385}])
    assert job_for_ref(user=alice, ref="384+0-1") == (het, None)
    assert refusal(alice, "384+1") == "'384+1' names component 1 of het job 384, and the portal acts on whole jobs: use 384."
    assert "'384+0-2' is not job 384 as Slurm names it (384+0-1)" in refusal(alice, "384+0-2")


@pytest.mark.parametrize("page", ["/jobs/table/", "/jobs/history/"])
def test_a_long_ref_is_shown_short_with_the_whole_ref_in_its_title(client, alice, cluster, no_slurm, page):
    ended = page.endswith("history/")
    state = dict(state=JobState.COMPLETED, end_at=datetime(2026, 11, 1, tzinfo=UTC)) if ended else {}
    stepped = array(alice, name="stepped", **state)
    scattered = make(alice, name="scattered", slurm_job_id=390, kind=JobKind.ARRAY, **{**array_fields(IRREGULAR, 5), **state})
    client.force_login(alice)
    soup = BeautifulSoup(client.get(page).content, "html.parser")
    short = soup.select_one(f'tr[data-job="{stepped.key}"] [data-testid="slurm-ref"]')
    assert short.get_text() == "#383_[1-100:3%5]" and short.get("title") is None
    cell = soup.select_one(f'tr[data-job="{scattered.key}"] [data-testid="slurm-ref"]')
    assert len(scattered.slurm_ref) > 250 and cell["title"] == scattered.slurm_ref
    shown = cell.get_text()
    assert shown == "#" + scattered.slurm_ref[:29] + "…" and shown.startswith("#390_[1,3,6,8,")
