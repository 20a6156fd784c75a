"""Every adapter on its own release's recorded outputs, role by role (tests/slurm/recorded.py): the same
records with the same meanings from 22.05's v0.0.38 and from the v0.0.40, v0.0.41 and v0.0.42 documents
recorded from cluster2 (Slurm 24.11). Expectations that differ by recording (job ids, GPU types, node
names) come from each directory's manifest.json; those that differ by Slurm are said per release."""

from __future__ import annotations

import json

import pytest

from slurm import SlurmError, SlurmGateway
from slurm.adapters import ADAPTERS, adapter_for, data_parser
from slurm.states import JobState
from slurm.values import parse_array_tasks
from tests.fakes import FakeTransport
from tests.slurm.recorded import ALL, DATA_PARSER, SLURM, manifest, recording


@pytest.fixture(params=ALL)
def rec(request):
    return recording(request.param)


@pytest.fixture(params=DATA_PARSER)
def dp(request):
    """A recording of data_parser JSON (the roles 22.05's recording has no job for)."""
    return recording(request.param)


def queue_job(rec, role: str, *, task: int | None = None):
    r = rec.role(role)
    jobs = rec.adapter.parse_jobs(rec.doc(r.queue))
    if task is not None:
        return next(j for j in jobs if j.array_job_id == r.id and j.array_task_id == task)
    return next(j for j in jobs if j.job_id == r.id)


def sacct_jobs(rec, role: str):
    r = rec.role(role)
    return [f for f in rec.adapter.parse_sacct_jobs(rec.doc(r.sacct)) if f.job_id == r.id]


# --- which adapter -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "release, name",
    [(release, path.stem) for release in ALL for path in sorted((SLURM / release).glob("*.json")) if path.stem != "manifest"],
)
def test_every_recorded_document_gets_its_versions_adapter(release, name):
    expected = recording(release).version
    if release != "22.05":  # the recording says which data_parser wrote it
        assert manifest(release)["emitted_as"] == f"data_parser/{expected}"
    assert adapter_for(recording(release).doc(name)).VERSION == expected


def test_the_adapters_are_registered_by_version_and_release():
    assert {v: m.VERSION for v, m in ADAPTERS.items()} == {v: v for v in ("v0.0.38", "v0.0.40", "v0.0.41", "v0.0.42")}
    assert [recording(r).adapter.VERSION for r in ALL] == ["v0.0.38", "v0.0.40", "v0.0.41", "v0.0.42"]
    for module in ADAPTERS.values():  # the interface every caller uses
        for name in (
            "poll",
            "parse_nodes",
            "parse_partitions",
            "parse_jobs",
            "parse_sacct_jobs",
            "queue_job_by_comment",
            "sacct_job_by_comment",
            "failure_errors",
            "EMPTY_RESULT_ERRORS",
        ):
            assert hasattr(module, name), (module.__name__, name)


# --- nodes -------------------------------------------------------------------------------------------


def test_nodes_and_their_gpus_by_type(rec):
    nodes = {n.name: n for n in rec.adapter.parse_nodes(rec.doc("nodes"))}
    assert {name: (n.gpus, n.gpus_used, n.partitions) for name, n in nodes.items()} == rec.nodes
    assert all(n.state == "mixed" and n.available for n in nodes.values())
    assert all(n.cpus > 0 and n.real_memory > 0 and 0 < n.alloc_cpus <= n.cpus for n in nodes.values())


def test_a_node_planned_by_backfill_keeps_the_flag_and_stays_available(dp):
    """24.11: g1's four h100 taken and backfill planning job pending_resources there: MIXED+PLANNED."""
    g1 = next(n for n in dp.adapter.parse_nodes(dp.doc("nodes")) if n.name == "g1")
    assert (g1.state, g1.flags, g1.state_text, g1.available) == ("mixed", ("PLANNED",), "MIXED+PLANNED", True)
    assert (g1.cpus, g1.alloc_cpus, g1.real_memory, g1.alloc_memory) == (8, 2, 16000, 2000)


def test_a_drained_node_is_unavailable(rec):
    node = next(n for n in rec.adapter.parse_nodes(rec.doc("nodes_drained")) if n.name == rec.drained)
    assert (node.state, node.flags, node.state_text, node.reason) == ("idle", ("DRAIN",), "IDLE+DRAIN", "disk swap")
    assert not node.available
    others = [n for n in rec.adapter.parse_nodes(rec.doc("nodes_drained")) if n.name != rec.drained]
    assert others and all(n.available for n in others)


def test_a_node_not_responding_is_down_star_and_unavailable(dp):
    """Recorded with g2's slurmd stopped until slurmctld marked it (SlurmdTimeout 30 s): ``DOWN*``."""
    node = next(n for n in dp.adapter.parse_nodes(dp.doc("nodes_down")) if n.name == dp.down)
    assert (node.state, node.flags, node.state_text) == ("down", ("NOT_RESPONDING",), "DOWN+NOT_RESPONDING")
    assert node.reason == "Not responding" and not node.available
    assert node.gpus == {"l40s": 2} and node.gpus_used == {"l40s": 0}


def test_sinfo_of_data_parser_is_refused_as_a_node_list(dp):
    """sinfo --json of 23.11+ is per partition x node group: reading it as nodes would be a cluster
    without nodes, so it is an error, never an empty list."""
    with pytest.raises(ValueError, match="scontrol show node --json"):
        dp.adapter.parse_nodes(dp.doc("sinfo"))


# --- partitions ----------------------------------------------------------------------------------------


def test_partitions_from_the_oneliner_text_recorded_on_24_11():
    gpu, small = data_parser.parse_partitions(recording("24.11").text("scontrol_show_partition_oneliner.txt"))
    assert (gpu.name, gpu.state, gpu.nodes, gpu.max_time, gpu.default_time, gpu.is_default) == (
        "gpu",
        "UP",
        ("g1", "g2"),
        2 * 86400,
        3600,
        True,
    )
    assert (small.name, small.nodes, small.max_time, small.default_time, small.is_default) == ("small", ("g2",), 3600, 600, False)


@pytest.mark.parametrize("release", DATA_PARSER)
def test_the_partition_json_has_no_default_flag_so_the_text_is_read(release):
    """Why the v0.0.40-42 adapters read ``--oneliner``: the JSON says nothing of ``Default=YES``."""
    doc = recording(release).doc("scontrol_show_partition")
    gpu = next(p for p in doc["partitions"] if p["name"] == "gpu")
    assert "DEFAULT" not in json.dumps(gpu).upper().replace('"DEFAULTS"', "")
    assert gpu["nodes"]["configured"] == "g[1-2]" and gpu["maximums"]["time"]["number"] == 2880


# --- the queue -------------------------------------------------------------------------------------------


def test_a_running_job(rec):
    job = queue_job(rec, "running")
    assert (job.state, job.reason, job.user, job.gpus) == ("RUNNING", "None", "alice", rec.role("running").gpus)
    assert job.nodes and job.start_time >= job.submit_time > 0 and job.time_limit and job.exit_code == 0


def test_a_job_waiting_for_resources_has_the_backfill_estimate(rec):
    job = queue_job(rec, "pending_resources")
    assert (job.state, job.reason, job.nodes, job.gpus) == ("PENDING", "Resources", "", rec.role("pending_resources").gpus)
    assert job.start_time > job.submit_time and job.priority > 0


def test_a_job_behind_a_higher_priority_one_and_one_held_by_its_quota(dp):
    first, behind = queue_job(dp, "pending_resources"), queue_job(dp, "pending_priority")
    assert (behind.state, behind.reason, behind.user) == ("PENDING", "Priority", "bob")
    assert behind.priority < first.priority
    quota = queue_job(dp, "pending_quota")
    assert (quota.state, quota.reason, quota.account, quota.gpus) == ("PENDING", "AssocGrpGRESMinutes", "fx_quota", {"l40s": 1})


def test_exit_3_and_a_signal_in_the_queue(rec):
    """22.05 writes the wait status (768, 9), 23.11+ the status object: the same (exit code, signal)."""
    exit3, signal = queue_job(rec, "exit3"), queue_job(rec, "signal")
    assert (exit3.state, exit3.exit_code, exit3.signal, exit3.reason) == ("FAILED", 3, 0, "NonZeroExitCode")
    assert (signal.state, signal.exit_code, signal.signal) == ("FAILED", 0, 9)
    assert exit3.comment == rec.role("exit3").comment and exit3.end_time >= exit3.start_time > 0


#: Per release: (array task string of the pending rest, its throttle, the tasks seen started).
ARRAYS = {"22.05": ("2-3%1", 1, {0, 1})} | {release: ("3-5%2", 2, {1, 2}) for release in DATA_PARSER}


def test_an_array_job_its_tasks_and_the_pending_rest(rec):
    r = rec.role("array")
    jobs = [j for j in rec.adapter.parse_jobs(rec.doc(r.queue)) if j.array_job_id == r.id]
    rest = next(j for j in jobs if j.job_id == r.id)
    text, throttle, started = ARRAYS[rec.release]
    assert (rest.state, rest.reason, rest.array_task_string, rest.array_task_id) == ("PENDING", "JobArrayTaskLimit", text, None)
    assert parse_array_tasks(rest.array_task_string).throttle == throttle
    tasks = {j.array_task_id: j for j in jobs if j.job_id != r.id}
    assert set(tasks) == started and all(t.array_task_string == "" for t in tasks.values())
    assert all(t.comment == rest.comment for t in tasks.values())


def test_a_requeued_job_waits_with_its_restart_count(rec):
    job = queue_job(rec, "requeue")
    assert (job.state, job.reason, job.restart_count, job.comment) == ("PENDING", "BeginTime", 1, rec.role("requeue").comment)


#: What squeue says of a job whose only nodes are drained: reason -> start of its description. Slurm
#: gives either from one scheduler pass to the next (24.11: the recorder saw ReqNodeNotAvail, the
#: document a moment later says Resources; an earlier recording had ReqNodeNotAvail in the document).
DRAINED_WAIT = {
    "Resources": "Nodes required for job are DOWN, DRAINED or reserved",
    "ReqNodeNotAvail": "ReqNodeNotAvail, May be reserved for other job",
}


def test_a_job_waiting_on_a_drained_node_has_slurms_reason_and_description(rec):
    job = queue_job(rec, "drained_wait")
    assert job.state == "PENDING" and job.reason in DRAINED_WAIT
    assert job.reason_description.startswith(DRAINED_WAIT[job.reason])


def test_the_poll_queue_lists_ended_jobs_too(rec):
    """22.05's plain ``squeue --json`` and 23.11+'s ``-t all``: jobs that ended stay for MinJobAge."""
    states = {j.state for j in rec.adapter.parse_jobs(rec.doc("poll_queue"))}
    assert "RUNNING" in states and "PENDING" in states and states & {"COMPLETED", "FAILED"}


# --- accounting ---------------------------------------------------------------------------------------


def test_a_failed_job_with_exit_3(rec):
    """23.11+ write ``exit 3`` as ``["ERROR"]``/3; 22.05's JSON writes SUCCESS/0 for it, read as
    "not reported" (``None``) so that the sync asks sacct's text (``3:0``)."""
    (f,) = sacct_jobs(rec, "exit3")
    assert (f.state, f.signal, f.comment) == (JobState.FAILED, 0, rec.role("exit3").comment)
    assert f.exit_code == (None if rec.release == "22.05" else 3)


def test_a_job_killed_by_a_signal(rec):
    (f,) = sacct_jobs(rec, "signal")
    assert (f.state, f.exit_code, f.signal) == (JobState.FAILED, None, 9)


def test_a_completed_gpu_job_with_its_times_and_gpus(rec):
    (f,) = sacct_jobs(rec, "running")
    assert (f.state, f.state_raw.upper(), f.exit_code, f.signal) == (JobState.COMPLETED, "COMPLETED", 0, 0)
    assert f.gpus == rec.role("running").gpus and f.nodes
    assert f.submit <= f.start < f.end and f.elapsed == f.end - f.start and f.time_limit
    assert f.gpu_hours == pytest.approx(sum(f.gpus.values()) * f.elapsed / 3600)


def test_a_job_cancelled_before_it_started(rec):
    """24.11 writes its start as NO_VAL (4294967294), 22.05 as null: both "never started"."""
    (f, *_) = sacct_jobs(rec, "cancelled_pending")
    assert (f.state, f.start, f.elapsed, f.nodes, f.cancelled_by) == (JobState.CANCELLED, None, 0, "", "alice")
    assert f.end and f.submit and f.end >= f.submit


def test_the_array_tasks_in_accounting(dp):
    """--array=1-5%2: five records, task ids 1-5, each with the array's id and comment."""
    r = dp.role("array")
    tasks = [f for f in dp.adapter.parse_sacct_jobs(dp.doc("sacct")) if f.array_job_id == r.id]
    assert sorted(f.array_task_id for f in tasks) == [1, 2, 3, 4, 5]
    assert {(f.state, f.comment, f.gpus["l40s"]) for f in tasks} == {(JobState.COMPLETED, r.comment, 1)}


def test_the_runs_of_a_requeued_job_and_the_latest_decides(rec):
    """Two records with the same id and key: the run requeued (22.05 ``REQUEUED``; 24.11
    ``["PENDING", "REQUEUED"]``), then the final one."""
    first, final = sacct_jobs(rec, "requeue")
    assert (first.state, final.state) == (JobState.REQUEUED, JobState.COMPLETED)
    assert first.comment == final.comment == rec.role("requeue").comment
    assert first.end <= final.start and first.elapsed > 0 and final.elapsed > 0
    assert "REQUEUED" in first.state_raw


def test_nothing_found_is_an_empty_answer_not_a_failure(rec):
    doc = rec.doc("nothing_found")
    fake = FakeTransport().expect(["sacct", "--json", "-j", "99999999"], stdout=json.dumps(doc))
    answer = SlurmGateway(fake).run_json(["sacct", "--json", "-j", "99999999"])
    assert rec.adapter.parse_sacct_jobs(answer) == [] and rec.adapter.failure_errors(answer) == []


def test_a_real_error_entry_is_a_failure_in_every_version(rec):
    doc = {**rec.doc("nothing_found"), "errors": [{"error_number": 1007, "description": "Unable to contact slurm controller"}]}
    fake = FakeTransport().expect(["sacct", "--json"], stdout=json.dumps(doc))
    with pytest.raises(SlurmError, match="Unable to contact slurm controller"):
        SlurmGateway(fake).run_json(["sacct", "--json"])


# --- the key look-up -------------------------------------------------------------------------------


@pytest.mark.parametrize("role", ["exit3", "requeue"])
def test_the_key_look_up_finds_a_job_by_its_comment(rec, role):
    r = rec.role(role)
    queue, sacct = rec.doc(r.queue), rec.doc(r.sacct)
    cluster = "portal" if rec.release == "22.05" else "cluster2"
    assert rec.adapter.queue_job_by_comment(queue, r.comment) == (r.id, cluster)
    assert rec.adapter.sacct_job_by_comment(sacct, r.comment) == (r.id, cluster)
    assert rec.adapter.queue_job_by_comment(queue, "portal:00000000-0000-4000-8000-00000000dead") is None
    assert rec.adapter.sacct_job_by_comment(sacct, "portal:00000000-0000-4000-8000-00000000dead") is None


def test_the_key_look_up_of_an_array_gives_the_array_jobs_id(rec):
    """Every task carries the array's comment; the id is the one sbatch printed (the array job's).
    22.05's recorded array (23) was submitted without a comment: this copy gives its records one."""
    r = rec.role("array")
    queue, sacct = rec.doc(r.queue), rec.doc(r.sacct)
    comment = r.comment or "portal:00000000-0000-4000-8000-000000000023"
    if not r.comment:
        for raw in queue["jobs"]:
            if raw["array_job_id"] == r.id:
                raw["comment"] = comment
        for raw in sacct["jobs"]:
            if raw["array"]["job_id"] == r.id:
                raw["comment"]["job"] = comment
    tasks_first = [j for j in queue["jobs"] if j.get("comment") == comment]
    assert tasks_first[0]["job_id"] != r.id  # squeue lists a task before the array job itself
    cluster = "portal" if rec.release == "22.05" else "cluster2"
    assert rec.adapter.queue_job_by_comment(queue, comment) == (r.id, cluster)
    assert rec.adapter.sacct_job_by_comment(sacct, comment) == (r.id, cluster)
