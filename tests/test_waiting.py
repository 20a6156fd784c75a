"""tests/waiting.py: the one wait helper returns the moment its probe is true, and a timeout says
what it waited for and what it last saw."""

from __future__ import annotations

import time

import pytest

from tests.waiting import wait_for


def test_returns_the_probes_first_true_value_without_waiting_longer():
    calls = []

    def probe():
        calls.append(1)
        return len(calls) >= 3 and {"state": "RUNNING"}

    started = time.monotonic()
    assert wait_for("the third call", probe, timeout=10, every=0.01) == {"state": "RUNNING"}
    assert len(calls) == 3 and time.monotonic() - started < 5


def test_a_timeout_names_what_it_waited_for_the_last_value_and_what_was_seen():
    with pytest.raises(pytest.fail.Exception) as failed:
        wait_for("job 42 to run", lambda: [], timeout=0.05, every=0.01, seen=lambda: "JobState=PENDING Reason=Resources")
    text = str(failed.value)
    assert "timed out after 0 s waiting for job 42 to run" in text
    assert "last value: []" in text and "seen: JobState=PENDING Reason=Resources" in text


def test_an_exception_from_the_probe_is_not_yet_and_the_last_one_is_shown():
    answers = iter([ConnectionRefusedError("port 8000"), ConnectionRefusedError("port 8000"), "up"])

    def probe():
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert wait_for("the port", probe, timeout=10, every=0.01) == "up"
    with pytest.raises(pytest.fail.Exception, match="KeyError"):
        wait_for("the port", lambda: {}["missing"], timeout=0.05, every=0.01)
