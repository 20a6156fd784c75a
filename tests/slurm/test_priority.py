"""sprio read from what Slurm 22.05 and 24.11 printed (``cluster/record_priority.py``: a blocker on
partition small, then waiting jobs of alice (vision) and bob (nlp): one on two partitions, an array, one
with ``--nice=500``, one an operator set to ``Nice=-2000``, one whose priority was set by hand, and a
held job and one with a begin time ahead, which sprio does not list)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slurm import SlurmError, SlurmGateway
from slurm.adapters import RELEASES
from slurm.poll_budget import PollTooBig
from slurm.priority import (
    SPRIO_ARGV,
    JobPriority,
    has_listed_pending,
    job_lines,
    parse_sprio,
    priorities_read,
    priority_entry,
    priority_rows,
)
from tests.fakes import FakeTransport

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slurm"
RELEASES_RECORDED = ("22.05", "24.11")


def recorded(release: str, name: str) -> str:
    return (FIXTURES / release / "priority" / name).read_text()


def roles(release: str) -> dict[str, int]:
    """role -> job id, from the recording's README.md table."""
    found = {}
    for line in recorded(release, "README.md").splitlines():
        cells = [c.strip(" `") for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[1].isdigit():
            found[cells[0]] = int(cells[1])
    return found


def queue(release: str):
    return RELEASES[release].parse_jobs(json.loads(recorded(release, "squeue.json")))


@pytest.mark.parametrize("release", RELEASES_RECORDED)
def test_every_listed_job_is_read_with_its_weighted_parts(release):
    ids = roles(release)
    records = parse_sprio(recorded(release, "sprio.txt"))
    listed = {r.job_id for r in records}
    assert listed == {ids[r] for r in ("waiting", "multi", "array", "nice", "boosted", "direct")}
    waiting = job_lines(records, ids["waiting"])[0]
    assert (waiting.partition, waiting.user) == ("small", "alice")
    assert waiting.partition_part == 1000 and waiting.fairshare > 0 and waiting.age == 0 and waiting.qos == 0
    assert abs(waiting.priority - waiting.parts_sum) <= 1  # sprio rounds each part apart
    assert not waiting.set_by_hand


@pytest.mark.parametrize("release", RELEASES_RECORDED)
def test_held_jobs_and_jobs_whose_begin_time_is_ahead_are_not_listed(release):
    ids = roles(release)
    records = parse_sprio(recorded(release, "sprio.txt"))
    assert not job_lines(records, ids["held"]) and not job_lines(records, ids["begin"])
    assert parse_sprio(recorded(release, "sprio_none_listed.txt")) == []


@pytest.mark.parametrize("release", RELEASES_RECORDED)
def test_a_job_on_two_partitions_has_one_line_for_each(release):
    lines = job_lines(parse_sprio(recorded(release, "sprio.txt")), roles(release)["multi"])
    assert sorted(r.partition for r in lines) == sorted(["small", {"22.05": "train", "24.11": "gpu"}[release]])
    assert {r.user for r in lines} == {"bob"}


@pytest.mark.parametrize("release", RELEASES_RECORDED)
def test_nice_lowers_the_total_and_an_operators_negative_nice_raises_it(release):
    ids = roles(release)
    records = parse_sprio(recorded(release, "sprio.txt"))
    nice, boosted = job_lines(records, ids["nice"])[0], job_lines(records, ids["boosted"])[0]
    assert nice.nice == 500 and abs(nice.priority - nice.parts_sum) <= 1
    assert boosted.nice == -2000 and boosted.priority == boosted.fairshare + boosted.partition_part + 2000


@pytest.mark.parametrize("release", RELEASES_RECORDED)
def test_a_priority_set_by_hand_has_no_parts(release):
    direct = job_lines(parse_sprio(recorded(release, "sprio.txt")), roles(release)["direct"])[0]
    assert direct.priority == 50000 and direct.parts_sum == 0 and direct.set_by_hand


@pytest.mark.parametrize("release", RELEASES_RECORDED)
def test_the_read_joins_account_and_submit_time_from_the_same_queue(release):
    ids = roles(release)
    fake = FakeTransport().expect(SPRIO_ARGV, stdout=recorded(release, "sprio.txt"))
    records = priorities_read(SlurmGateway(fake), queue(release))
    assert len(fake.calls) == 1
    by_id = {r.job_id: r for r in records}
    assert by_id[ids["waiting"]].account == "vision" and by_id[ids["multi"]].account == "nlp"
    assert by_id[ids["array"]].account == "vision"  # the pending array's one line, under the array's id
    assert all(r.submit_time > 0 for r in records)


def test_no_pending_job_sprio_could_list_costs_no_call(slurm_json):
    jobs = [q for q in RELEASES["22.05"].parse_jobs(slurm_json("22.05", "squeue")) if q.state != "PENDING"]
    assert not has_listed_pending(jobs)
    assert priorities_read(SlurmGateway(FakeTransport()), jobs) == []  # an unexpected call would fail


def test_sprio_over_the_byte_budget_is_a_slurm_error(settings):
    settings.PORTAL_POLL_MAX_BYTES = 10
    fake = FakeTransport().expect(SPRIO_ARGV, stdout=recorded("24.11", "sprio.txt"))
    with pytest.raises(PollTooBig, match="PORTAL_POLL_MAX_BYTES"):
        priorities_read(SlurmGateway(fake), queue("24.11"))
    assert issubclass(PollTooBig, SlurmError)


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("10|small|alice|2666|0|0|1667|0|1000|0|0\n", "sprio line 1: 11 fields, expected 13"),
        ("\n10|small|alice|2666|0|0|1667|0|1000|0|0|0||\n", "sprio line 2: 14 fields"),
        ("x|small|alice|2666|0|0|1667|0|1000|0|0|0|\n", "job id 'x' is not a positive integer"),
        ("0|small|alice|2666|0|0|1667|0|1000|0|0|0|\n", "job id '0' is not a positive integer"),
        ("10||alice|2666|0|0|1667|0|1000|0|0|0|\n", "no partition or user"),
        ("10|small|alice|2666|0|0|16.5|0|1000|0|0|0|\n", "fairshare '16.5' is not an integer"),
        ("10|small|alice|2666|0|0|1667|0|1000|0|0|0|cpu:3\n", "TRES part 'cpu:3' is not name=N"),
        ("Unable to find jobs matching user/id(s) specified\n", "sprio line 1: 1 fields"),
    ],
)
def test_malformed_output_is_refused_naming_the_line(text, says):
    with pytest.raises(ValueError, match=says.replace("(", r"\(").replace(")", r"\)")):
        parse_sprio(text)


def test_tres_parts_are_added_up():
    (record,) = parse_sprio("7|gpu|carol|1450|10|0|1000|0|0|0|0|0|cpu=40,gres/gpu=400\n")
    assert record.tres == 440 and record.parts_sum == 1450 and not record.set_by_hand


def test_the_stored_entry_reads_back_and_a_foreign_one_reads_as_nothing():
    records = parse_sprio(recorded("22.05", "sprio.txt"))
    taken_at, back = priority_rows(priority_entry(records, taken_at=1234.5))
    assert taken_at == 1234.5 and back == records and all(isinstance(r, JobPriority) for r in back)
    assert priority_rows(None) == (0.0, [])
    assert priority_rows({"taken_at": 1, "rows": [("not", "a", "record")]}) == (0.0, [])
