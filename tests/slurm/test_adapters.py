"""Slurm JSON adapters on outputs recorded from the local Slurm 22.05, plus the odd inputs."""

import json

import pytest

from slurm import SlurmError, SlurmGateway, SlurmVersionUnknown
from slurm.adapters import adapter_for, v0_0_38
from slurm.adapters.v0_0_38 import parse_jobs, parse_nodes, parse_partitions
from slurm.snapshot import snapshot_take
from slurm.states import JobState
from slurm.times import parse_time_limit
from slurm.tres import parse_gpus
from slurm.values import number, whole_number
from tests.fakes import FakeTransport


def test_recorded_sinfo_nodes(slurm_json):
    nodes = {n.name: n for n in parse_nodes(slurm_json("22.05", "sinfo"))}
    assert sorted(nodes) == ["node1", "node2", "node3"]
    assert nodes["node1"].gpus == {"a100": 4} and nodes["node1"].gpus_used == {"a100": 4}
    assert nodes["node3"].gpus == {"t4": 2} and nodes["node3"].gpus_used == {"t4": 1}
    assert nodes["node1"].partitions == ("interactive", "train")
    assert nodes["node3"].real_memory == 8000
    assert all(n.available for n in nodes.values())


def test_recorded_squeue_jobs(slurm_json):
    jobs = {j.job_id: j for j in parse_jobs(slurm_json("22.05", "squeue"))}
    pending = jobs[4]
    assert (pending.state, pending.reason, pending.user, pending.account) == ("PENDING", "Resources", "alice", "vision")
    assert pending.gpus == {"a100": 4}
    assert pending.start_time > pending.submit_time  # the backfill estimate
    assert jobs[5].gpus == {"t4": 1} and jobs[5].partition == "small"
    assert jobs[1].state == "COMPLETED"


def test_adapter_is_chosen_from_meta(slurm_json):
    assert adapter_for(slurm_json("22.05", "sinfo")).__name__.endswith("v0_0_38")


@pytest.mark.parametrize(
    "text, expected",
    [
        ("gpu:a100:4", {"a100": 4}),
        ("gpu:a100:4(S:0-1)", {"a100": 4}),
        ("gpu:a100:2(IDX:0,2),gpu:t4:1(IDX:3)", {"a100": 2, "t4": 1}),
        ("gpu:2", {"": 2}),
        ("gpu:a100:0(IDX:N/A)", {"a100": 0}),
        ("mps:100,gpu:t4:2", {"t4": 2}),
        ("N/A", {}),
        ("(null)", {}),
        ("", {}),
        (None, {}),
    ],
)
def test_parse_gres(text, expected):
    assert parse_gpus(text) == expected


@pytest.mark.parametrize(
    "text, expected",
    [
        ("cpu=1,mem=1000M,node=1,billing=1,gres/gpu=1,gres/gpu:a100=1", {"a100": 1}),
        ("cpu=4,gres/gpu=2", {"": 2}),
        ("cpu=4,mem=4G", {}),
        (None, {}),
    ],
)
def test_parse_tres_gpus(text, expected):
    assert parse_gpus(text) == expected


@pytest.mark.parametrize(
    "value, expected",
    [
        (5, 5),
        ({"set": True, "infinite": False, "number": 7}, 7),
        ({"set": False, "infinite": False, "number": 0}, None),
        ({"set": True, "infinite": True, "number": 0}, None),
        (None, None),
    ],
)
def test_number_accepts_old_and_new_shapes(value, expected):
    assert number(value) == expected


@pytest.mark.parametrize(
    "value, default, expected",
    [
        (None, 0, 0),
        ("12", 0, 12),
        ("UNLIMITED", 0, None),
        ("soon", 0, 0),
        (True, 0, 0),
        (float("inf"), 0, 0),
        (2.9, None, 2),
        ([5], 0, 0),
    ],
)
def test_number_is_lenient_where_slurm_wrote_nothing_or_no_number(value, default, expected):
    """``number`` reads through ``whole_number``: the default for missing or non-numbers, never an error."""
    assert number(value, default) == expected


@pytest.mark.parametrize("value", ["soon", True, [5], float("nan")])
def test_whole_number_refuses_what_is_not_a_number(value):
    with pytest.raises(ValueError, match="Not a Slurm number"):
        whole_number(value)


def test_newer_shapes_job_state_list_and_number_objects():
    doc = {
        "jobs": [
            {
                "job_id": 9,
                "job_state": ["PENDING", "REQUEUED"],
                "priority": {"set": True, "infinite": False, "number": 4242},
                "time_limit": {"set": True, "infinite": True, "number": 0},
                "start_time": {"set": True, "infinite": False, "number": 1800000000},
                "tres_req_str": "cpu=1,gres/gpu:t4=2,gres/gpu=2",
            }
        ]
    }
    (job,) = parse_jobs(doc)
    assert (job.state, job.priority, job.time_limit, job.start_time, job.gpus) == ("PENDING", 4242, None, 1800000000, {"t4": 2})


def test_newer_node_state_list_keeps_flags():
    (node,) = parse_nodes(
        {"nodes": [{"name": "n1", "state": ["IDLE", "DRAIN"], "gres": "gpu:a100:4", "gres_used": "gpu:a100:0"}]}
    )
    assert node.state == "idle" and "DRAIN" in node.flags and not node.available


@pytest.mark.parametrize(
    "text, seconds",
    [
        ("2-00:00:00", 172800),
        ("08:00:00", 28800),
        ("30", 1800),
        ("10:30", 630),
        ("1-02:30", 95400),
        ("1-2", 93600),
        ("UNLIMITED", None),
        ("NONE", None),
    ],
)
def test_parse_time_limit(text, seconds):
    assert parse_time_limit(text) == seconds


def test_parse_partitions_oneliner():
    text = (
        "PartitionName=train AllowGroups=ALL Default=YES DefaultTime=01:00:00 MaxTime=2-00:00:00 "
        "Nodes=node[1-3] State=UP TRES=cpu=20,mem=40000M,node=3,gres/gpu=10\n"
        "PartitionName=lab Default=NO MaxTime=UNLIMITED Nodes=(null) State=DOWN\n"
    )
    train, lab = parse_partitions(text)
    assert (train.name, train.nodes, train.max_time, train.default_time, train.is_default) == (
        "train",
        ("node1", "node2", "node3"),
        172800,
        3600,
        True,
    )
    assert (lab.nodes, lab.max_time, lab.state) == ((), None, "DOWN")


@pytest.mark.parametrize("text", ["1:2:3:4", "x", "1-2:3:4:5"])
def test_parse_time_limit_refuses_garbage(text):
    with pytest.raises(ValueError):
        parse_time_limit(text)


def test_squeue_exit_status_is_decoded(slurm_json):
    jobs = {j.name: j for j in parse_jobs(slurm_json("22.05", "squeue_arrays"))}
    assert any((j.exit_code, j.signal) == (3, 0) for j in jobs.values())
    assert any(j.signal == 9 for j in jobs.values())


@pytest.mark.parametrize("name", ["sinfo", "squeue", "squeue_arrays", "sacct", "sacct_outcomes", "sacct_team_final"])
def test_every_recorded_2205_document_gets_the_v0_0_38_adapter(slurm_json, name):
    assert adapter_for(slurm_json("22.05", name)) is v0_0_38


@pytest.mark.parametrize(
    "meta, named",
    [
        (
            {
                "plugin": {"data_parser": "data_parser/v0.0.44"},
                "slurm": {"version": {"major": "26", "minor": "05", "micro": "0"}},
            },
            "Slurm 26.05 output not understood yet: squeue printed JSON of output plugin 'v0.0.44'",
        ),
        (
            {"plugin": {"type": "openapi/v0.0.37"}},
            "Slurm output not understood yet: squeue printed JSON of output plugin 'v0.0.37'",
        ),
        ({"Slurm": {"version": {"major": 26, "minor": 5, "micro": 0}}}, "Slurm 26.05 output not understood yet"),
        ({}, "no output plugin version and no Slurm release"),
    ],
)
def test_an_unknown_version_is_a_slurm_error_naming_it(meta, named):
    with pytest.raises(SlurmVersionUnknown) as caught:
        adapter_for({"meta": meta, "jobs": []}, argv=["squeue", "--json"])
    assert named in caught.value.message and "squeue" in caught.value.message
    assert "Slurm 22.05 (v0.0.38), 23.11 (v0.0.40), 24.05 (v0.0.41), 24.11 (v0.0.42)" in caught.value.message
    assert isinstance(caught.value, SlurmError) and caught.value.returncode is None


def test_the_release_alone_chooses_when_no_plugin_is_named():
    assert adapter_for({"meta": {"Slurm": {"version": {"major": 22, "minor": 5, "micro": 2}}}}) is v0_0_38


def test_a_snapshot_of_an_unknown_version_is_a_failed_poll_not_an_empty_cluster(slurm_json):
    newer = {**slurm_json("22.05", "sinfo"), "meta": {"plugins": {"data_parser": "data_parser/v0.0.44"}}}
    fake = FakeTransport()
    fake.expect(["sinfo", "--json"], stdout=json.dumps(newer))
    fake.expect(["squeue", "--json"], stdout=json.dumps(slurm_json("22.05", "squeue")))
    with pytest.raises(SlurmVersionUnknown, match="v0.0.44"):
        snapshot_take(SlurmGateway(fake), now=1000.0)


def test_a_sacct_document_cut_short_at_a_deleted_qos_is_read_to_the_cut_with_a_warning(caplog):
    """Slurm 22.05's sacct --json stops at a job whose QOS was deleted: the record ends at "qos" (as
    sacct wrote it on the lab's cluster1 after a test deleted a QOS its jobs ran in), every later job
    is missing, and the exit status is 0. The jobs before the cut are read; the log says why the rest
    are missing (refusing the whole document stopped the poller finishing any job of its batch)."""
    meta = {"plugin": {"type": "openapi/dbv0.0.38"}, "Slurm": {"release": "22.05.8"}}
    cut = {"account": "vision", "job_id": 141, "name": "it-cap-first", "partition": "train", "priority": 2428, "qos": None}
    whole = {**cut, "job_id": 140, "qos": "normal", "state": {"current": "COMPLETED", "reason": "None"}, "user": "alice"}
    read = v0_0_38.parse_sacct_jobs({"meta": meta, "errors": [], "jobs": [whole, cut]})
    assert [(j.job_id, j.state) for j in read] == [(140, JobState.COMPLETED)]
    assert "sacct --json stopped at job 141: Slurm 22.05 cannot write a job whose QOS was deleted" in caplog.text


def test_the_key_look_up_in_a_cut_sacct_document_finds_what_is_there_and_never_says_not_there():
    """The same cut as above: the key of a job before the cut is found; any other key may belong to
    a job the cut left out, so the look-up raises (a retried submission would otherwise be sent twice)."""
    meta = {"plugin": {"type": "openapi/dbv0.0.38"}, "Slurm": {"release": "22.05.8"}}
    cut = {"account": "vision", "comment": {"job": None}, "job_id": 141, "partition": "train", "qos": None}
    whole = {**cut, "comment": {"job": "portal:a"}, "job_id": 140, "qos": "normal", "state": {"current": "COMPLETED"}}
    doc = {"meta": meta, "errors": [], "jobs": [whole, cut]}
    assert v0_0_38.sacct_job_by_comment(doc, "portal:a") == (140, "")
    with pytest.raises(SlurmError, match="cut short at job 141, a job whose QOS was deleted") as caught:
        v0_0_38.sacct_job_by_comment(doc, "portal:b")
    assert "never delete a QOS that jobs ran in" in caught.value.message and caught.value.returncode == 0
    assert v0_0_38.sacct_job_by_comment({**doc, "jobs": [whole]}, "portal:b") is None
