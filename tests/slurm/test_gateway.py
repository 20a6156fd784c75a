"""The gateway with a scripted fake transport: argv building, sudo, errors."""

import json

import pytest

from slurm import SlurmError, SlurmGateway, SlurmTimeout
from tests.fakes import FakeTransport


def test_run_plain_command_returns_output():
    fake = FakeTransport().expect(["squeue", "--json"], stdout='{"jobs": []}')
    result = SlurmGateway(fake, command_timeout=7).run(["squeue", "--json"])
    assert result.out == '{"jobs": []}'
    assert fake.calls == [(["squeue", "--json"], None, 7)]


def test_as_user_goes_through_sudo_without_password_prompt():
    argv = ["sudo", "-n", "-u", "alice", "--", "sbatch", "--parsable"]
    fake = FakeTransport().expect(argv, stdout="123\n")
    result = SlurmGateway(fake).run(["sbatch", "--parsable"], as_user="alice", stdin="#!/bin/bash\necho hi\n", timeout=3)
    assert result.out.strip() == "123"
    assert fake.calls[0][1] == b"#!/bin/bash\necho hi\n"
    assert fake.calls[0][2] == 3


@pytest.mark.parametrize("bad", ["-u", "root -s", "alice;id", "Alice", "", "a" * 33, "../x", "al ice", 5])
def test_as_user_must_be_a_plain_unix_name(bad):
    fake = FakeTransport()
    with pytest.raises(ValueError):
        SlurmGateway(fake).run(["squeue"], as_user=bad)
    assert fake.calls == []


@pytest.mark.parametrize("bad", [[], "squeue --json", ["squeue", 3], ["echo", "a\x00b"]])
def test_argv_must_be_a_list_of_strings(bad):
    with pytest.raises(ValueError):
        SlurmGateway(FakeTransport()).run(bad)


def test_nonzero_exit_raises_slurm_error_with_everything():
    fake = FakeTransport().expect(
        ["sudo", "-n", "-u", "bob", "--", "scancel", "42"],
        stdout="",
        stderr="scancel: error: Kill job error on job id 42: Invalid job id specified\n",
        returncode=1,
    )
    with pytest.raises(SlurmError) as info:
        SlurmGateway(fake).run(["scancel", "42"], as_user="bob")
    err = info.value
    assert err.argv == ["sudo", "-n", "-u", "bob", "--", "scancel", "42"]
    assert err.returncode == 1
    assert "Invalid job id" in err.stderr
    assert "Invalid job id" in str(err)


def test_check_false_returns_nonzero_result():
    fake = FakeTransport().expect(["id", "-nG", "--", "ghost"], stderr="id: 'ghost': no such user\n", returncode=1)
    result = SlurmGateway(fake).run(["id", "-nG", "--", "ghost"], check=False)
    assert result.returncode == 1 and "no such user" in result.err


def test_sudo_refusal_is_explained():
    fake = FakeTransport().expect(
        ["sudo", "-n", "-u", "alice", "--", "id"], stderr="sudo: a password is required\n", returncode=1
    )
    with pytest.raises(SlurmError, match="sudo rule does not allow"):
        SlurmGateway(fake).run(["id"], as_user="alice")


def test_transport_errors_pass_through_as_slurm_errors():
    fake = FakeTransport().expect(["sinfo", "--json"], raises=SlurmTimeout(["sinfo", "--json"], None, message="late"))
    with pytest.raises(SlurmError) as info:
        SlurmGateway(fake).run(["sinfo", "--json"])
    assert info.value.returncode is None


def test_invalid_utf8_output_is_replaced_not_raised():
    fake = FakeTransport().expect(["cat", "log"], stdout=b"ok \xff\xfe end")
    assert SlurmGateway(fake).run(["cat", "log"]).out == "ok \ufffd\ufffd end"


def test_local_transport_runs_argv_without_a_shell(tmp_path):
    from slurm.transports.local import LocalTransport

    marker = tmp_path / "pwned"
    gw = SlurmGateway(LocalTransport())
    result = gw.run(["echo", f"x; touch {marker}"])
    assert result.out == f"x; touch {marker}\n" and not marker.exists()
    assert gw.run(["cat"], stdin=b"\x00\xffdata").stdout == b"\x00\xffdata"


def test_local_transport_deadline_and_missing_command():
    from slurm import SlurmUnreachable
    from slurm.transports.local import LocalTransport

    gw = SlurmGateway(LocalTransport())
    with pytest.raises(SlurmTimeout):
        gw.run(["sleep", "5"], timeout=0.5)
    with pytest.raises(SlurmUnreachable, match="not installed"):
        gw.run(["no-such-slurm-command"])


# Slurm 22.05 exits 0 from `squeue --json` / `sinfo --json` when slurmctld is down, with an empty list
# and "errors" (recorded on the local cluster with slurmctld stopped). That must read as a failure.
CTLD_DOWN_SQUEUE = '{"meta": {"Slurm": {"release": "22.05.8"}}, "errors": [{"description": "Failed while looking for jobs", "error_number": -1, "error": "Unspecified error", "source": "slurm_load_jobs"}], "jobs": []}'
CTLD_DOWN_SINFO = (
    '{"meta": {"Slurm": {"release": "22.05.8"}}, "errors": [{"error": "Unspecified error", "errno": -1}], "nodes": []}'
)


def test_json_errors_with_exit_0_are_a_failure_not_an_empty_queue():
    from slurm import SlurmError
    from slurm.snapshot import snapshot_take

    gw = SlurmGateway(FakeTransport().expect(["squeue", "--json"], stdout=CTLD_DOWN_SQUEUE))
    with pytest.raises(SlurmError) as err:
        gw.run_json(["squeue", "--json"])
    assert "Failed while looking for jobs" in str(err.value)
    gw = SlurmGateway(FakeTransport().expect(["sinfo", "--json"], stdout=CTLD_DOWN_SINFO))
    with pytest.raises(SlurmError):
        snapshot_take(gw)


def test_nothing_found_from_accounting_is_an_empty_answer_not_an_outage(slurm_json):
    """22.05's sacct --json for a query that matched nothing: exit 0, jobs [] and error 9003 (recorded)."""
    from slurm.adapters import adapter_for

    recorded = slurm_json("22.05", "sacct_nothing_found")
    assert recorded["errors"][0]["error_number"] == 9003 and recorded["jobs"] == []
    gw = SlurmGateway(FakeTransport().expect(["sacct", "--json", "-j", "99999999"], stdout=json.dumps(recorded)))
    doc = gw.run_json(["sacct", "--json", "-j", "99999999"])
    assert adapter_for(doc).parse_sacct_jobs(doc) == []
    # "Nothing found" beside a real failure is still a failure.
    both = {**recorded, "errors": recorded["errors"] + [{"description": "Unable to connect to database", "error_number": 7000}]}
    gw = SlurmGateway(FakeTransport().expect(["sacct", "--json"], stdout=json.dumps(both)))
    with pytest.raises(SlurmError, match="Unable to connect to database"):
        gw.run_json(["sacct", "--json"])
