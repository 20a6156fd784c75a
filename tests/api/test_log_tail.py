"""A log's last bytes in one read (``GET /api/v1/jobs/{ref}/log?tail=N``, :func:`jobs.reads.logs.job_log_read`
with ``tail``): the file's size from ``stat`` as the owner, then one ``dd`` from ``size - N``; never a
start inside a UTF-8 character; failures as a read from an offset; cached apart from reads from an
offset; ``offset`` with ``tail`` refused; another user's job refused before any command runs."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from slurm import SlurmError
from slurm.states import JobState
from tests.api.test_api import _job, call

pytestmark = pytest.mark.django_db

AS_ALICE = ["sudo", "-n", "-u", "alice", "--"]
STAT = [*AS_ALICE, "stat", "-L", "-c", "%s", "--", "/o/77.out"]


def dd(skip: int, count: int) -> list[str]:
    """The read as alice of ``count`` bytes of job 77's stdout from byte ``skip``."""
    return [*AS_ALICE, "dd", "if=/o/77.out", "iflag=skip_bytes,count_bytes", f"skip={skip}", f"count={count}", "status=none"]


def test_a_tail_read_is_the_files_last_bytes_from_its_size(client, people, tokens, fake):
    _job(people["alice"])
    fake.expect(STAT, stdout="20\n").expect(dd(12, 8), stdout="line 3\n\n")
    body = call(client, "get", "/jobs/77/log?tail=8", tokens["alice"]).json()
    assert body == {
        "stream": "out",
        "offset": 12,
        "next_offset": 20,
        "data": "line 3\n\n",
        "missing": False,
        "final": False,
        "state": "RUNNING",
        "error": "",
        "where_unknown": False,
        "message": "",
        "tail": 8,
    }
    assert fake.script == []


@pytest.mark.parametrize(
    "text, tail, offset, data",
    [
        ("xxxxx€yz", 4, 8, "yz"),  # € is bytes 5-7: the tail starts on its 2nd byte, skips 2
        ("x😀yz", 4, 5, "yz"),  # 😀 is bytes 1-4: the tail starts on its 2nd byte, skips 3 (the most)
        ("xxxxx€yz", 5, 5, "€yz"),  # starts on €'s first byte: nothing skipped
    ],
)
def test_a_tail_read_never_starts_inside_a_character(people, fake, text, tail, offset, data):
    from jobs.reads.logs import job_log_read

    job = _job(people["alice"])
    raw = text.encode()
    fake.expect(STAT, stdout=f"{len(raw)}\n").expect(dd(len(raw) - tail, tail), stdout=raw[-tail:])
    chunk = job_log_read(job, "out", limit=64, tail=tail)
    assert (chunk.offset, chunk.next_offset, chunk.text, chunk.tail) == (offset, len(raw), data, tail)


def test_a_file_shorter_than_the_tail_is_read_whole_and_an_empty_one_not_at_all(people, fake):
    from jobs.reads.logs import job_log_read

    job = _job(people["alice"], state=JobState.COMPLETED)
    fake.expect(STAT, stdout="5\n").expect(dd(0, 5), stdout="done\n")
    chunk = job_log_read(job, "out", limit=64, tail=64)
    assert (chunk.offset, chunk.next_offset, chunk.text) == (0, 5, "done\n")
    fake.expect([*AS_ALICE, "stat", "-L", "-c", "%s", "--", "/o/77.err"], stdout="0\n")  # no dd: nothing to read
    chunk = job_log_read(job, "err", limit=64, tail=64)
    assert (chunk.offset, chunk.next_offset, chunk.text, chunk.missing) == (0, 0, "", False)
    assert fake.script == []


def test_a_tail_read_fails_as_a_read_from_an_offset_does(people, fake):
    """No file: ``missing`` at offset 0 (the CLI's "no output yet"); stat or dd refused: its
    ``error``; the cluster unreachable: the same sentence as a read from an offset. None is cached."""
    from jobs.reads.logs import LogChunk, job_log_read

    job = _job(people["alice"])
    fake.expect(STAT, stderr="stat: cannot statx '/o/77.out': No such file or directory\n", returncode=1)
    assert job_log_read(job, "out", tail=8) == LogChunk(0, 0, missing=True, tail=8)
    fake.expect(STAT, stderr="sudo: a password is required\n", returncode=1)
    assert job_log_read(job, "out", tail=8) == LogChunk(0, 0, error="sudo: a password is required", tail=8)
    fake.expect(STAT, stdout="20\n").expect(dd(12, 8), stderr="dd: error reading '/o/77.out': Input/output error\n", returncode=1)
    assert job_log_read(job, "out", tail=8) == LogChunk(12, 12, error="dd: error reading '/o/77.out': Input/output error", tail=8)
    refused = "ssh: connect to host login1: Connection refused"
    fake.expect(STAT, raises=SlurmError(STAT, None, message=refused))
    unreached = job_log_read(job, "out", tail=8)
    fake.expect(dd(12, 64), raises=SlurmError(dd(12, 64), None, message=refused))
    assert unreached.error == job_log_read(job, "out", offset=12, limit=64).error
    assert unreached.error == f"The log could not be read right now ({refused})." and unreached.offset == 0
    assert fake.script == []


def test_a_tail_read_is_cached_apart_from_a_read_from_the_same_number(people, fake):
    """``tail=8`` and ``offset=8`` are different reads: neither answers the other from the cache;
    the same tail again is the cached one (no command)."""
    from jobs.reads.logs import job_log_read

    job = _job(people["alice"])
    fake.expect(STAT, stdout="20\n").expect(dd(12, 8), stdout="line 3\n\n").expect(dd(8, 64), stdout="ne 2\nline 3\n\n")
    assert job_log_read(job, "out", limit=64, tail=8).offset == 12
    assert job_log_read(job, "out", offset=8, limit=64).text == "ne 2\nline 3\n\n"
    assert job_log_read(job, "out", limit=64, tail=8).text == "line 3\n\n"
    assert fake.script == [] and len(fake.calls) == 3


def test_offset_and_tail_together_are_refused_before_any_read(client, people, tokens, fake):
    _job(people["alice"])
    r = call(client, "get", "/jobs/77/log?offset=0&tail=8", tokens["alice"])
    assert r.status_code == HTTPStatus.BAD_REQUEST and r.json() == {
        "detail": "offset and tail together: use one.",
        "errors": [{"field": "tail", "message": "Give offset or tail, not both.", "line": None}],
    }
    r = call(client, "get", "/jobs/77/log?tail=65537", tokens["alice"])  # more than a page
    assert r.status_code == HTTPStatus.BAD_REQUEST and r.json()["errors"][0]["field"] == "tail"
    assert fake.calls == []


def test_a_tail_is_at_most_the_sites_page(client, people, tokens, fake, settings):
    settings.PORTAL_LOG_TAIL_BYTES = 16
    _job(people["alice"])
    fake.expect(STAT, stdout="100\n").expect(dd(84, 16), stdout="x" * 16)
    body = call(client, "get", "/jobs/77/log?tail=1000", tokens["alice"]).json()
    assert (body["offset"], body["next_offset"], body["tail"]) == (84, 100, 16)


@pytest.mark.parametrize("who", ["bob", "carol"])  # in another team; alice's own team lead
def test_another_users_job_log_is_refused_for_a_tail_read_too(client, people, tokens, fake, who):
    """As for a read from an offset (the role matrix in test_api.py): 404, and nothing is run on the
    cluster, as alice or anyone."""
    job = _job(people["alice"])
    for query in ("offset=0", "tail=8"):
        for ref in ("77", str(job.key)):
            r = call(client, "get", f"/jobs/{ref}/log?{query}", tokens[who])
            assert r.status_code == HTTPStatus.NOT_FOUND and "data" not in r.json(), (query, ref)
    assert fake.calls == []
