"""The batch-job parsers (slurm/values.py) on outputs recorded from Slurm 22.05.8
(tests/fixtures/slurm/22.05/, see its README) plus the odd inputs and the newer JSON shapes."""

import pytest

from slurm.adapters.v0_0_38 import parse_jobs, parse_sacct_jobs
from slurm.states import JobState, is_failure
from slurm.times import parse_limit_minutes, parse_timestamp, time_left_seconds
from slurm.tres import parse_gpus, parse_tres, parse_tres_count
from slurm.values import ArrayTasks, classify_state, expand_nodes, parse_array_tasks, parse_exit, queue_exit

UNSET = {"set": False, "infinite": False, "number": 0}
INFINITE = {"set": True, "infinite": True, "number": 0}


def num(n):
    """A number as Slurm 23.11+ writes it."""
    return {"set": True, "infinite": False, "number": n}


# --- array task strings ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, expected",
    [
        ("123456_[9201-10000%500]", ArrayTasks("9201-10000", 800, 500, 123456)),
        ("777_[60-89,91-94,96-98]", ArrayTasks("60-89,91-94,96-98", 37, None, 777)),
        ("56502501_[1%1]", ArrayTasks("1", 1, 1, 56502501)),
        ("1-10:2", ArrayTasks("1-10:2", 5, None)),
        ("1-10%2", ArrayTasks("1-10", 10, 2)),  # squeue array_task_string, recorded (job 21)
        ("1,4,7,10%2", ArrayTasks("1,4,7,10", 4, 2)),  # how Slurm rewrites --array=1-10:3%2, recorded
        ("1-3%0", ArrayTasks("1-3", 3, None)),  # %0: Slurm sets no limit (recorded: it prints 1-3)
        ("44_[5]", ArrayTasks("5", 1, None, 44)),  # squeue's name for --array=5, recorded
        ("123_7", ArrayTasks("7", 1, None, 123)),
        ("[0-3]", ArrayTasks("0-3", 4, None)),
        (" 60-89,91-94,96-98 ", ArrayTasks("60-89,91-94,96-98", 37, None)),
        ("1-5,3-7", ArrayTasks("1-5,3-7", 7, None)),  # overlapping parts count once
        ("0-4000000%64", ArrayTasks("0-4000000", 4000001, 64)),
    ],
)
def test_parse_array_tasks(text, expected):
    assert parse_array_tasks(text) == expected


@pytest.mark.parametrize(
    "text",
    [
        "",
        "abc",
        "22_[60-89,91-94,96",  # squeue's text column cut it off (recorded)
        "123_[1-3",
        "[1-3]]",
        "1-10%",
        "1-10%x",
        "1-10%2%3",
        "5-1",
        "1-10:0",
        "1--3",
        "1-3,",
        "x_[1-3]",
        "１-３",  # full-width digits
        "0x7FE",  # sacct's array.task bitmap is not task text (recorded)
        None,
        42,
    ],
)
def test_parse_array_tasks_refuses_garbage_with_the_text_in_the_message(text):
    with pytest.raises(ValueError, match="Not a Slurm array task string") as caught:
        parse_array_tasks(text)
    assert repr(text) in str(caught.value)


def test_recorded_array_task_strings(slurm_json):
    jobs = {j.job_id: j for j in parse_jobs(slurm_json("22.05", "squeue_arrays"))}
    throttled, gaps, running = (parse_array_tasks(jobs[i].array_task_string) for i in (21, 22, 23))
    assert (throttled.count, throttled.throttle) == (10, 2)
    assert (gaps.count, gaps.throttle, gaps.ranges) == (37, None, "60-89,91-94,96-98")
    assert (running.count, running.throttle) == (2, 1)  # tasks 2-3 still pending behind %1


def test_recorded_array_tasks_are_read(slurm_json):
    jobs = [j for j in parse_jobs(slurm_json("22.05", "squeue_gpu_requests")) if j.array_job_id == 23]
    assert sorted(j.array_task_id for j in jobs) == [0, 1, 2, 3]


# --- limits, timestamps, time left ----------------------------------------------------------------


@pytest.mark.parametrize(
    "value, minutes",
    [
        (60, 60),
        (30.0, 30),
        ("120", 120),
        (" 15 ", 15),
        (num(30), 30),
        (INFINITE, None),
        (UNSET, None),
        ("UNLIMITED", None),
        ("unlimited", None),
        ("INFINITE", None),
        ("Partition_Limit", None),
        ("NOT_SET", None),
        ("None", None),
        ("Unknown", None),
        ("INVALID", None),
        ("", None),
        (None, None),
        (0, None),  # sbatch --time=0 means no limit
        (4294967295, None),  # uint32 INFINITE as a plain number
        (4294967294, None),  # uint32 NO_VAL
    ],
)
def test_parse_limit_minutes(value, minutes):
    assert parse_limit_minutes(value) == minutes


@pytest.mark.parametrize("value", ["abc", "1:00:00", "1-00:00:00", True, [5], float("nan"), "12.5"])
def test_parse_limit_minutes_refuses_garbage(value):
    with pytest.raises(ValueError, match="Not a Slurm time limit"):
        parse_limit_minutes(value)


@pytest.mark.parametrize(
    "value, seconds",
    [
        (1795971535, 1795971535),
        ("1795971535", 1795971535),
        (num(1795971535), 1795971535),
        (1795971535.9, 1795971535),
        (0, None),
        (-5, None),
        ("0", None),
        (UNSET, None),
        ("Unknown", None),
        ("None", None),
        ("", None),
        (None, None),
        (4294967294, None),  # NO_VAL: 24.11 sacct's start of a job that never started
        (4294967295, None),  # INFINITE
    ],
)
def test_parse_timestamp(value, seconds):
    assert parse_timestamp(value) == seconds


@pytest.mark.parametrize("value", ["2026-11-29T16:58:55", "soon", False])
def test_parse_timestamp_refuses_garbage(value):
    with pytest.raises(ValueError, match="Not a Slurm timestamp"):
        parse_timestamp(value)


@pytest.mark.parametrize(
    "start, limit, now, left",
    [
        (1000, 1, 1030.0, 30),
        (1000, 1, 1030.5, 29),
        (1000, 60, 1000.0, 3600),
        (1000, 1, 1060.0, 0),
        (1000, 1, 5000.0, 0),  # past its limit (Slurm kills after KillWait): never negative
        (None, 60, 1000.0, None),
        (0, 60, 1000.0, None),
        (1000, None, 1030.0, None),
    ],
)
def test_time_left_seconds(start, limit, now, left):
    assert time_left_seconds(start=start, limit_minutes=limit, now=now) == left


def test_recorded_timeout_job_limits(slurm_json):
    raw = next(j for j in slurm_json("22.05", "squeue_arrays")["jobs"] if j["job_id"] == 17)
    start, limit = parse_timestamp(raw["start_time"]), parse_limit_minutes(raw["time_limit"])
    assert (start, limit) == (1795971535, 1)
    assert time_left_seconds(start=start, limit_minutes=limit, now=start + 20) == 40


# --- exit codes ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "value, expected",
    [
        ("0:9", (0, 9)),
        ("1:0", (1, 0)),
        ("3:0", (3, 0)),
        (" 0:15 ", (0, 15)),
        ("0:0", (0, 0)),
        # squeue 22.05 exit_code: the raw wait status (recorded for exit 3, kill -9, scancel)
        (768, (3, 0)),
        (9, (0, 9)),
        (15, (0, 15)),
        (0, (0, 0)),
        (4294967294, (None, None)),  # NO_VAL
        (num(768), (3, 0)),
        (UNSET, (None, None)),
        (None, (None, None)),
        ("", (None, None)),
        # sacct 22.05 (dbv0.0.38)
        ({"status": "SUCCESS", "return_code": 0}, (0, 0)),
        ({"status": "SIGNALED", "return_code": None, "signal": {"signal_id": 9, "name": "Killed"}}, (None, 9)),
        ({"status": "SIGNALED", "signal": {"signal_id": 9, "name": "KILL"}}, (None, 9)),
        ({"status": "ERROR", "return_code": 3}, (3, 0)),
        ({"status": "PENDING", "return_code": None}, (None, None)),
        ({"status": "CORE_DUMPED", "return_code": None}, (None, None)),
        # newer Slurm: status a list, numbers as objects, signal.id
        ({"status": ["ERROR"], "return_code": num(3), "signal": {"id": UNSET, "name": ""}}, (3, 0)),
        ({"status": ["SUCCESS"], "return_code": num(0), "signal": {"id": UNSET, "name": ""}}, (0, 0)),
        ({"status": ["SIGNALED"], "return_code": UNSET, "signal": {"id": num(9), "name": "KILL"}}, (None, 9)),
        ({"status": ["SIGNALED", "CORE_DUMPED"], "return_code": num(0), "signal": {"id": num(11), "name": "SEGV"}}, (0, 11)),
        ({"status": ["PENDING"], "return_code": UNSET, "signal": {"id": UNSET, "name": ""}}, (None, None)),
        ({"status": ["INVALID"]}, (None, None)),
    ],
)
def test_parse_exit(value, expected):
    assert parse_exit(value) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        (768, (3, 0)),  # 22.05's wait status: unchanged
        (9, (0, 9)),
        (4294967294, (None, None)),
        ("garbage", (None, None)),
        ({"status": ["ERROR"], "return_code": num(3), "signal": {"id": UNSET, "name": ""}}, (3, 0)),
        # 23.11+: a signalled job's return code is unset; the queue reads 0, as 22.05's wait status 9 did
        ({"status": ["SIGNALED"], "return_code": UNSET, "signal": {"id": num(9), "name": "KILL"}}, (0, 9)),
        ({"status": ["PENDING"], "return_code": UNSET, "signal": {"id": UNSET, "name": ""}}, (None, None)),
        ({"status": ["SUCCESS"], "return_code": num(0), "signal": {"id": UNSET, "name": ""}}, (0, 0)),
    ],
)
def test_queue_exit_reads_every_form_as_22_05s_wait_status(value, expected):
    assert queue_exit(value) == expected


@pytest.mark.parametrize("value", ["abc", "3", "1:", ":9", "1:2:3", True, -1, [0], 1.5])
def test_parse_exit_refuses_garbage(value):
    with pytest.raises(ValueError, match="Not a Slurm exit code"):
        parse_exit(value)


def test_recorded_squeue_exit_codes(slurm_json):
    raw = {j["job_id"]: j for j in slurm_json("22.05", "squeue_arrays")["jobs"]}
    assert parse_exit(raw[18]["exit_code"]) == (3, 0)  # exit 3
    assert parse_exit(raw[19]["exit_code"]) == (0, 9)  # kill -9 $$
    assert parse_exit(raw[20]["exit_code"]) == (0, 15)  # scancel while running
    assert parse_exit(raw[21]["exit_code"]) == (0, 0)  # held, never ran


def test_recorded_sacct_exit_codes(slurm_json):
    raw = {j["job_id"]: j for j in slurm_json("22.05", "sacct_outcomes")["jobs"]}
    assert parse_exit(raw[19]["exit_code"]) == (None, 9)
    assert parse_exit(raw[19]["steps"][0]["exit_code"]) == (None, 9)
    assert parse_exit(raw[20]["steps"][0]["exit_code"]) == (None, 15)
    # Slurm 22.05's JSON writes `exit 3` as SUCCESS/0 (sacct -o ExitCode says 3:0): recorded as is.
    assert parse_exit(raw[18]["exit_code"]) == (0, 0)


# --- job states ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw, state, text",
    [
        ("PENDING", JobState.PENDING, "PENDING"),
        ("RUNNING", JobState.RUNNING, "RUNNING"),
        ("COMPLETING", JobState.COMPLETING, "COMPLETING"),
        ("CANCELLED by 54321", JobState.CANCELLED, "CANCELLED by 54321"),
        ("CANCELLED+", JobState.CANCELLED, "CANCELLED+"),
        ("OUT_OF_MEMORY", JobState.OUT_OF_MEMORY, "OUT_OF_MEMORY"),
        ("NODE_FAIL", JobState.NODE_FAIL, "NODE_FAIL"),
        ("PREEMPTED", JobState.PREEMPTED, "PREEMPTED"),
        ("DEADLINE", JobState.DEADLINE, "DEADLINE"),
        ("TIMEOUT", JobState.TIMEOUT, "TIMEOUT"),
        ("BOOT_FAIL", JobState.BOOT_FAIL, "BOOT_FAIL"),
        ("completed", JobState.COMPLETED, "completed"),
        (" FAILED ", JobState.FAILED, "FAILED"),
        ("PD", JobState.PENDING, "PD"),
        ("R", JobState.RUNNING, "R"),
        ("CG", JobState.COMPLETING, "CG"),
        ("OOM", JobState.OUT_OF_MEMORY, "OOM"),
        # 23.11+ lists: the word 22.05's job_state_string() wrote (a flag before the base state)
        (["PENDING", "REQUEUED"], JobState.REQUEUED, "PENDING,REQUEUED"),
        (["RUNNING", "COMPLETING"], JobState.COMPLETING, "RUNNING,COMPLETING"),
        # 24.11's squeue for a script that exited 3 while its node still cleans up (seen in CI)
        (["FAILED", "COMPLETING"], JobState.COMPLETING, "FAILED,COMPLETING"),
        (["PENDING", "REQUEUE_HOLD"], JobState.OTHER, "PENDING,REQUEUE_HOLD"),
        (["COMPLETED", "LAUNCH_FAILED"], JobState.COMPLETED, "COMPLETED,LAUNCH_FAILED"),
        (["CANCELLED"], JobState.CANCELLED, "CANCELLED"),
        ("REQUEUE_HOLD", JobState.OTHER, "REQUEUE_HOLD"),
        ("SPECIAL_EXIT", JobState.OTHER, "SPECIAL_EXIT"),
        ("UNKNOWN", JobState.OTHER, "UNKNOWN"),  # not the portal's UNKNOWN (a failed check)
        ("SUBMITTING", JobState.OTHER, "SUBMITTING"),  # the portal's own state, never Slurm's
        ("", JobState.OTHER, ""),
        (None, JobState.OTHER, ""),
        ([], JobState.OTHER, ""),
        (42, JobState.OTHER, "42"),
        ({"current": "RUNNING"}, JobState.OTHER, "{'current': 'RUNNING'}"),
    ],
)
def test_classify_state(raw, state, text):
    assert classify_state(raw) == (state, text)


def test_recorded_states_are_all_known(slurm_json):
    squeue = [
        j["job_state"] for name in ("squeue", "squeue_arrays", "squeue_gpu_requests") for j in slurm_json("22.05", name)["jobs"]
    ]
    sacct = [j["state"]["current"] for name in ("sacct", "sacct_outcomes") for j in slurm_json("22.05", name)["jobs"]]
    assert {classify_state(s)[0] for s in squeue + sacct} == {
        JobState.PENDING, JobState.RUNNING, JobState.COMPLETED, JobState.FAILED, JobState.CANCELLED, JobState.TIMEOUT,
    }  # fmt: skip


FAILING_STATES = ["FAILED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL", "PREEMPTED", "DEADLINE", "BOOT_FAIL"]


@pytest.mark.parametrize("state", FAILING_STATES)
def test_failing_states_are_failures_even_with_exit_zero(state):
    assert is_failure(JobState(state), 0, 0)


@pytest.mark.parametrize(
    "state, exit_code, signal, failed",
    [
        (JobState.COMPLETED, 0, 0, False),
        (JobState.COMPLETED, None, None, False),
        (JobState.COMPLETED, 1, 0, True),
        (JobState.COMPLETED, 0, 9, True),
        (JobState.CANCELLED, 0, 15, False),  # what Slurm records for scancel (recorded)
        (JobState.CANCELLED, 1, 0, False),
        (JobState.RUNNING, 1, 0, False),  # not ended
        (JobState.PENDING, None, None, False),
        (JobState.UNKNOWN, 1, 0, False),  # a failed status check says nothing
        (JobState.OTHER, 0, 0, False),
        (JobState.OTHER, 2, 0, True),
        (JobState.FAILED, None, None, True),
        ("COMPLETED", 3, 0, True),  # a plain string works like the enum
    ],
)
def test_is_failure(state, exit_code, signal, failed):
    assert is_failure(state, exit_code, signal) is failed


# --- GPUs ------------------------------------------------------------------------------------------

RECORDED_REQUESTS = {
    "gpus-2": {"": 2},
    "gpus-a100-2": {"a100": 2},
    "gpus-per-node-a100-2-N2": {"a100": 4},
    "gres-a100-1-N2": {"a100": 2},
    "gres-2": {"": 2},
    "gpus-per-task-1-n3": {"": 3},
    "gpus-per-task-t4-1-n2": {"t4": 2},
    "gpus-per-socket-1": {"": 1},
    "gres-t4-1-small": {"t4": 1},
    "gpus-per-node-2-N2-range": {"": 2},  # -N 1-2: node_count is the minimum while pending
    "gpus-t4-1-a100-1": {"t4": 1, "a100": 1},
    "gpus-3-N2": {"": 3},  # --gpus is for the whole job, not per node
    "cpu-only": {},
}


@pytest.mark.parametrize("name, gpus", RECORDED_REQUESTS.items())
def test_recorded_gpu_requests(slurm_json, name, gpus):
    """Slurm's own whole-job total (tres_req_str, what parse_jobs reads while a job waits) for every
    way of asking for GPUs."""
    (raw,) = [j for j in slurm_json("22.05", "squeue_gpu_requests")["jobs"] if j["name"] == name]
    assert parse_gpus(raw["tres_req_str"]) == gpus


@pytest.mark.parametrize(
    "text, gpus",
    [
        ("cpu=4,mem=32G,gres/gpu=1,gres/gpu:a100=1", {"a100": 1}),  # one GPU of type a100, not two
        ("cpu=2,gres/gpu=2,gres/gpu:a100=1,gres/gpu:t4=1", {"a100": 1, "t4": 1}),
        ("cpu=1,mem=500M,node=1,billing=1,gres/gpu=1,gres/gpu:t4=1", {"t4": 1}),  # recorded (job 17)
        ("gres/gpu=3", {"": 3}),
        ("cpu=1,gres/gpumem=4000", {}),
        ("", {}),
    ],
)
def test_parse_tres_gpus_counts_typed_entries_once(text, gpus):
    assert parse_gpus(text) == gpus


@pytest.mark.parametrize(
    "value, gpus",
    [
        # squeue tres_per_* (GRES items with the gres: or gres/ prefix)
        ("gres:gpu:a100:2", {"a100": 2}),
        ("gres/gpu:2", {"": 2}),
        ("gres:gpu", {"": 1}),
        ("gres:gpu:a100", {"a100": 1}),
        ("gres:gpu:t4:1,gres:gpu:a100:1", {"t4": 1, "a100": 1}),
        ("gres:gpu:a100:1,gres:gpu:a100:2", {"a100": 3}),
        ("gres:shard:2", {}),
        # sinfo gres with the gres/ prefix, and what Slurm does not write
        ("gres/gpu:a100:2(IDX:0,2)", {"a100": 2}),
        ("gpu:a100:x", {}),
        ("gpu:a100:2:3", {}),
        ("gpu:²", {"²": 1}),  # not a count ('²'.isdigit() is True): read as a type name, never int('²')
        ("gres/gpu=²", {}),
        # sacct tres.allocated lists
        ([{"type": "gres", "name": "gpu", "count": 2}, {"type": "gres", "name": "gpu:a100", "count": num(2)}], {"a100": 2}),
        ([{"type": "gres", "name": "gpu", "count": 2}, {"type": "cpu", "name": None, "count": 4}], {"": 2}),
        ([{"type": "gres", "name": "gpumem", "count": 4000}, "junk"], {}),
        ([], {}),
        (None, {}),
        (42, {}),
    ],
)
def test_parse_gpus_reads_every_form(value, gpus):
    """One reader for GRES strings (sinfo, squeue tres_per_*), TRES strings and sacct's lists."""
    assert parse_gpus(value) == gpus


# --- node lists ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text, names",
    [
        ("gpu[001-004],cpu[001-002]", ["gpu001", "gpu002", "gpu003", "gpu004", "cpu001", "cpu002"]),
        ("node[001,003]", ["node001", "node003"]),
        ("c457-[011-012]", ["c457-011", "c457-012"]),
        ("node[1-3]", ["node1", "node2", "node3"]),
        ("node3", ["node3"]),
        ("", []),
        ("  ", []),
        (None, []),
        ("None", []),
        ("(null)", []),
        ("None assigned", []),  # what sacct writes for a job that never ran (recorded)
    ],
)
def test_expand_nodes(text, names):
    assert expand_nodes(text) == names


@pytest.mark.parametrize("text", ["node[1-", "node[3-1]"])
def test_expand_nodes_refuses_garbage(text):
    with pytest.raises(ValueError, match="Not a Slurm node list"):
        expand_nodes(text)


# --- sacct -----------------------------------------------------------------------------------------


def test_recorded_sacct_outcomes(slurm_json):
    jobs = {j.job_id: j for j in parse_sacct_jobs(slurm_json("22.05", "sacct_outcomes"))}
    assert sorted(jobs) == [17, 18, 19, 20, 21, 22, 23, 24, 26, 27]  # no steps
    timeout, exit3, killed, cancelled, held = (jobs[i] for i in (17, 18, 19, 20, 21))

    assert (timeout.state, timeout.state_raw, timeout.exit_code, timeout.signal) == (JobState.TIMEOUT, "TIMEOUT", 0, 0)
    assert (timeout.elapsed, timeout.start, timeout.end, timeout.time_limit) == (82, 1795971535, 1795971617, 1)
    assert timeout.gpus == {"t4": 1} and timeout.gpu_hours == pytest.approx(82 / 3600)
    assert (timeout.user, timeout.account, timeout.partition, timeout.nodes) == ("alice", "vision", "small", "node3")

    assert exit3.state == JobState.FAILED and exit3.comment == "portal:05447023-08b2-4399-a449-13a3ff3ded28"
    assert (exit3.exit_code, exit3.signal) == (None, 0)  # 22.05 wrote SUCCESS/0: the code is unknown, not 0
    assert (killed.state, killed.exit_code, killed.signal, killed.gpus) == (JobState.FAILED, None, 9, {})
    assert (cancelled.state, cancelled.cancelled_by, cancelled.comment) == (JobState.CANCELLED, "alice", "")

    assert (held.state, held.start, held.elapsed, held.nodes, held.gpu_hours) == (JobState.CANCELLED, None, 0, "", 0.0)
    assert (held.array_job_id, held.array_task_id, held.end) == (21, None, 1795971659)
    assert (jobs[22].user, jobs[22].account, jobs[22].cancelled_by) == ("bob", "nlp", "bob")
    assert [(jobs[i].array_job_id, jobs[i].array_task_id) for i in (24, 26, 27, 23)] == [(23, 0), (23, 1), (23, 2), (23, 3)]
    assert jobs[17].array_job_id == 0 and jobs[17].array_task_id is None

    failed = {i for i, j in jobs.items() if is_failure(j.state, j.exit_code, j.signal)}
    assert failed == {17, 18, 19}


def test_recorded_sacct_gpu_hours(slurm_json):
    jobs = {j.job_id: j for j in parse_sacct_jobs(slurm_json("22.05", "sacct"))}
    assert jobs[2].gpus == {"a100": 4} and jobs[2].elapsed == 45
    assert jobs[2].gpu_hours == pytest.approx(4 * 45 / 3600)
    assert jobs[5].gpus == {"t4": 1} and jobs[5].comment == ""
    assert all(j.state == JobState.COMPLETED and (j.exit_code, j.signal) == (0, 0) for j in jobs.values())


def newer_job(**overrides):
    """A sacct job entry in the shape of Slurm 23.11+ (lists and number objects)."""
    job = {
        "job_id": 901,
        "name": "train",
        "user": "alice",
        "account": "vision",
        "partition": "train",
        "nodes": "node[1-2]",
        "state": {"current": ["COMPLETED"], "reason": "None"},
        "exit_code": {"status": ["SUCCESS"], "return_code": num(0), "signal": {"id": UNSET, "name": ""}},
        "time": {"elapsed": 1800, "start": 1800000000, "end": 1800001800, "limit": num(60)},
        "comment": {"job": "portal:0b1e", "administrator": "", "system": ""},
        "array": {"job_id": 0, "task_id": UNSET, "task": ""},
        "tres": {
            "allocated": [
                {"type": "cpu", "name": "", "id": 1, "count": 8},
                {"type": "gres", "name": "gpu", "id": 1001, "count": 2},
                {"type": "gres", "name": "gpu:a100", "id": 1002, "count": 1},
                {"type": "gres", "name": "gpu:t4", "id": 1003, "count": 1},
                {"type": "gres", "name": "gpumem", "id": 1004, "count": 4000},
            ]
        },
        "kill_request_user": "",
        "steps": [{"step": {"id": "batch"}, "state": ["COMPLETED"]}],
    }
    job.update(overrides)
    return job


def test_newer_sacct_shape():
    (job,) = parse_sacct_jobs({"jobs": [newer_job(), {"step": {"id": "901.batch"}, "state": ["COMPLETED"]}]})
    assert (job.job_id, job.state, job.state_raw, job.exit_code, job.signal) == (901, JobState.COMPLETED, "COMPLETED", 0, 0)
    assert (job.time_limit, job.start, job.end, job.comment, job.nodes) == (
        60,
        1800000000,
        1800001800,
        "portal:0b1e",
        "node[1-2]",
    )
    assert (job.array_job_id, job.array_task_id, job.cancelled_by) == (0, None, "")
    assert job.gpus == {"a100": 1, "t4": 1}
    assert job.gpu_hours == pytest.approx(2 * 0.5)


@pytest.mark.parametrize(
    "overrides, field, value",
    [
        ({"exit_code": {"status": ["ERROR"], "return_code": num(3), "signal": {"id": UNSET, "name": ""}}}, "exit_code", 3),
        ({"state": {"current": ["FAILED"]}, "exit_code": {"status": ["ERROR"], "return_code": num(3)}}, "exit_code", 3),
        ({"state": {"current": ["OUT_OF_MEMORY"]}}, "state", JobState.OUT_OF_MEMORY),
        ({"state": {"current": "CANCELLED by 1001"}}, "state_raw", "CANCELLED by 1001"),
        ({"tres": {"allocated": [{"type": "gres", "name": "gpu", "count": 2}]}}, "gpus", {"": 2}),
        ({"tres": {"allocated": []}}, "gpu_hours", 0.0),
        ({"tres": {}}, "gpus", {}),
        ({"time": {"elapsed": 0, "start": 0, "end": 0, "limit": INFINITE}}, "time_limit", None),
        ({"time": {"elapsed": 0, "start": 0, "end": 0, "limit": 5}}, "start", None),
        ({"comment": {"job": None}}, "comment", ""),
        ({"array": {"job_id": 900, "task_id": num(7)}}, "array_task_id", 7),
    ],
)
def test_newer_sacct_variants(overrides, field, value):
    (job,) = parse_sacct_jobs({"jobs": [newer_job(**overrides)]})
    assert getattr(job, field) == value


def test_sacct_without_jobs():
    assert parse_sacct_jobs({"jobs": []}) == [] and parse_sacct_jobs({}) == []


# --- TRES lists (sshare, assoc_mgr, sacctmgr) ------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "parsed"),
    [
        ("", {}),
        ("gres/gpu=6000", {"gres/gpu": 6000}),
        ("cpu=1000,gres/gpu=60", {"cpu": 1000, "gres/gpu": 60}),
        ("gres/gpu=8,gres/gpu:a100=4,gres/gpu:t4=3", {"gres/gpu": 8, "gres/gpu:a100": 4, "gres/gpu:t4": 3}),
        ("cpu=N(3),gres/gpu=6(1)", {"gres/gpu": 6}),  # assoc_mgr: limit(used); N = no limit
        ("gres/gpu=", {}),
    ],
)
def test_parse_tres(raw, parsed):
    assert parse_tres(raw) == parsed


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("", None),
        ("gres/gpu=4", 4),
        ("cpu=10,gres/gpu=4", 4),
        ("gres/gpu:a100=2", None),
        ("gres/gpu:a100=2,gres/gpu=0", 0),
        ("cpu=1000,gres/gpu=60\n", 60),
        # as 22.05 prints memory: with a unit
        ("gres/gpu=2,mem=1G", 2),
        ("billing=5,mem=2000M", None),
    ],
)
def test_gres_gpu_count_in_a_tres_list(text, count):
    assert parse_tres_count(text) == count
