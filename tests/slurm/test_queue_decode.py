"""The poll's fast reading of ``squeue --json`` (slurm/adapters/queue_decode.py) gives exactly the
records the adapters' ``parse_jobs`` make of ``json.loads``'s document, for every recorded queue of
every version, and falls back to that reading for what its structs do not expect."""

import json
from pathlib import Path

import msgspec
import pytest
from msgspec.structs import asdict

from slurm.adapters import data_parser, v0_0_38
from slurm.adapters.queue_decode import decode_squeue, is_raw, queue_jobs
from slurm.poll_budget import TOO_BIG, PollBudget, PollTooBig

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "slurm"
QUEUES = sorted(p for p in FIXTURES.glob("*/**/squeue*.json"))


def _adapter(path: Path):
    return v0_0_38 if path.relative_to(FIXTURES).parts[0] == "22.05" else data_parser


def test_every_recorded_queue_is_found():
    assert len(QUEUES) >= 20 and {p.relative_to(FIXTURES).parts[0] for p in QUEUES} >= {"22.05", "23.11", "24.05", "24.11"}


@pytest.mark.parametrize("path", QUEUES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_fast_reading_gives_the_same_records(path):
    out = path.read_bytes()
    fast = decode_squeue(out)
    assert is_raw(fast["jobs"]) or not fast["jobs"]  # the structs, not json's dicts
    plain = json.loads(out.decode("utf-8", errors="replace"))
    adapter = _adapter(path)
    got, want = adapter.parse_jobs(fast), adapter.parse_jobs(plain)
    assert got == want and [asdict(g) for g in got] == [asdict(w) for w in want]
    assert fast["meta"] == plain["meta"] and fast.get("errors") == plain.get("errors")


def test_a_value_of_another_type_is_read_the_old_way(slurm_json):
    doc = slurm_json("24.11", "squeue")
    doc["jobs"][0]["priority"] = "1234"  # text where a number belongs: the struct does not take it
    out = json.dumps(doc).encode()
    read = decode_squeue(out)
    assert is_raw(read["jobs"])  # only that job is read the old way, the others by their structs
    read_by_dict = []

    def fallback(raw):
        read_by_dict.append(raw["job_id"])
        return data_parser.job_from_dict(raw)

    got = queue_jobs(decode_squeue(out)["jobs"], lists=True, fallback=fallback)
    assert read_by_dict == [doc["jobs"][0]["job_id"]]
    assert got == data_parser.parse_jobs(read) == data_parser.parse_jobs(doc)
    assert got[0].priority == 1234


def test_a_document_of_another_shape_is_read_the_old_way(slurm_json):
    doc = slurm_json("24.11", "squeue")
    doc["warnings"] = {"description": "not a list"}  # the document's own fields: all of it by json.loads
    read = decode_squeue(json.dumps(doc).encode())
    assert not is_raw(read["jobs"]) and read["warnings"] == doc["warnings"]
    assert data_parser.parse_jobs(read) == data_parser.parse_jobs(doc)


def test_invalid_utf8_reads_as_the_gateways_text(slurm_json):
    doc = slurm_json("22.05", "squeue")
    doc["jobs"][0]["name"] = "NAME"
    out = json.dumps(doc).encode().replace(b"NAME", b"n\xffme")
    assert v0_0_38.parse_jobs(decode_squeue(out))[0].name == "n\ufffdme"


def test_output_that_is_not_json_is_a_value_error():
    with pytest.raises(ValueError):
        decode_squeue(b"squeue: error: Unable to contact slurm controller")


def test_past_the_budget_nothing_is_read(slurm_json):
    out = json.dumps(slurm_json("22.05", "squeue")).encode()  # 5 jobs
    with pytest.raises(PollTooBig) as jobs:
        decode_squeue(out, budget=PollBudget(max_bytes=0, max_jobs=4, max_seconds=0))
    assert str(jobs.value).startswith(TOO_BIG) and "PORTAL_POLL_MAX_JOBS (4)" in str(jobs.value)
    with pytest.raises(PollTooBig) as size:
        decode_squeue(out, budget=PollBudget(max_bytes=len(out) - 1, max_jobs=0, max_seconds=0))
    assert "PORTAL_POLL_MAX_BYTES" in str(size.value)
    assert len(v0_0_38.parse_jobs(decode_squeue(out, budget=PollBudget(max_bytes=len(out), max_jobs=5)))) == 5


@pytest.mark.parametrize("path", QUEUES, ids=lambda p: str(p.relative_to(FIXTURES)))
def test_the_polls_reading_consumes_its_jobs_and_keeps_no_view_of_the_document(path):
    out = path.read_bytes()
    fast = decode_squeue(out)
    plain = json.loads(out.decode("utf-8", errors="replace"))
    adapter = _adapter(path)
    count = len(fast["jobs"])
    got = adapter.parse_jobs(fast, consume=True)  # as the poll reads its own document
    assert got == adapter.parse_jobs(plain) and fast["jobs"] == [None] * count
    # no record holds a view into the document (a msgspec.Raw keeps all of it alive)
    assert not [v for job in got for v in asdict(job).values() if isinstance(v, msgspec.Raw | memoryview)]


def test_jobs_share_their_repeated_strings_and_gpu_counts(slurm_json):
    doc = slurm_json("24.11", "squeue")
    first = next(j for j in doc["jobs"] if j["tres_alloc_str"])
    twin = {**first, "job_id": 999_999, "name": "twin"}
    doc["jobs"].append(twin)
    # the twin's strings are equal, not the same objects, as json writes them apart
    got = {job.job_id: job for job in data_parser.parse_jobs(decode_squeue(json.dumps(doc).encode()))}
    a, b = got[first["job_id"]], got[999_999]
    assert a.user == b.user and a.user is b.user and a.account is b.account and a.cwd is b.cwd
    assert a.gpus == b.gpus and a.gpus is b.gpus and a.name != b.name
