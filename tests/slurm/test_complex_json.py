"""Slurm 24.11's JSON with data_parser's ``complex`` flag (``--json=v0.0.42+complex``: plain numbers and
``null`` instead of ``{"set", "infinite", "number"}`` objects), which the v0.0.42 adapter polls with,
reads as the same records as the plain ``--json`` document of the same moment. Pairs recorded from the
real cluster2 by ``cluster/record_complex.py`` (``tests/fixtures/slurm/24.11/complex/``)."""

from __future__ import annotations

import json

import pytest

from slurm.adapters import adapter_for, document_version, v0_0_42
from tests.conftest import FIXTURES

PAIRS = FIXTURES / "slurm" / "24.11" / "complex"


def pair(name: str) -> tuple[dict, dict]:
    return (json.loads((PAIRS / f"{name}.json").read_text()), json.loads((PAIRS / f"{name}.complex.json").read_text()))


def test_the_complex_flag_is_the_same_output_version():
    plain, complex_ = pair("squeue_all")
    assert complex_["meta"]["plugin"]["data_parser"] == "data_parser/v0.0.42+complex"
    assert document_version(complex_) == document_version(plain) == ("v0.0.42", "24.11")
    assert adapter_for(complex_) is adapter_for(plain) is v0_0_42
    assert v0_0_42.SQUEUE == ["squeue", "--json=v0.0.42+complex", "-t", "all"]
    assert len(json.dumps(complex_)) < 0.8 * len(json.dumps(plain))  # what it is for


@pytest.mark.parametrize(
    ("name", "reader"),
    [("squeue_all", v0_0_42.parse_jobs), ("scontrol_show_node", v0_0_42.parse_nodes), ("sacct", v0_0_42.parse_sacct_jobs)],
)
def test_both_forms_read_as_the_same_records(name, reader):
    plain, complex_ = pair(name)
    records = reader(complex_)
    assert records == reader(plain)
    assert records  # the recording holds jobs/nodes to compare


def test_the_recorded_roles_read_right_in_the_complex_form():
    manifest = json.loads((PAIRS / "manifest.json").read_text())["jobs"]
    jobs = {j.job_id: j for j in v0_0_42.parse_jobs(pair("squeue_all")[1])}
    running = jobs[manifest["running"]]
    assert running.state == "RUNNING" and running.gpus == {"h100": 1} and running.time_limit == 5
    assert jobs[manifest["held"]].state == "PENDING" and jobs[manifest["held"]].reason == "JobHeldUser"
    assert jobs[manifest["exit3"]].exit_code == 3
    assert jobs[manifest["signal"]].signal == 9
    array = [j for j in jobs.values() if j.array_job_id == manifest["array"]]
    assert array and all(j.array_job_id == manifest["array"] for j in array)
