"""Every command prints every warning of the API's answer on stderr (gpuportal/notices.py), keeps
its exit status, and keeps the warnings in ``--json`` output.

The answers that carry them: ``warnings`` of POST /jobs, POST /profiles/{id}/submit and
POST /sessions (a maintenance reservation in the way, a per-person cap reached); ``warning`` of
GET /jobs and GET /sessions (the cluster or the hub unreachable); a stale ``freshness`` of
GET /jobs/{ref}."""

from __future__ import annotations

import json
import time

import pytest

from gpuportal.cli import main
from gpuportal.notices import WarningPrinter, answer_warnings

from .fake_api import make_job, make_session

pytestmark = pytest.mark.usefixtures("clean_env")

WARNING = "This session cannot start before 2026-12-03 12:00 UTC because it would run into maintenance"
URL = "https://hub.example.org/user/alice/lab-1/lab?token=abc"


def _stale(message: str) -> dict:
    return {
        "age_s": 130.0,
        "stale": bool(message),
        "reasons": ["snapshot-stale"] if message else [],
        "since": {},
        "message": message,
    }


def _notebook(env, w: str, *, state: str = "RUNNING") -> None:
    env.script("POST", "/sessions", (201, make_session(warnings=[w] if w else [])))
    env.session_states = [make_session(state=state, url=URL if state == "RUNNING" else None, message="no such partition")]


def _submit(env, w: str) -> None:
    env.script("POST", "/jobs", (201, make_job(warnings=[w] if w else [])))


def _profiles_run(env, w: str) -> None:
    env.script("POST", "/profiles/3/submit", (201, make_job(id=4300, profile_id=3, warnings=[w] if w else [])))


def _ls(env, w: str) -> None:
    env.script("GET", "/jobs", (200, {"items": env.jobs, "count": len(env.jobs), "warning": w, "freshness": _stale("")}))


def _sessions(env, w: str) -> None:
    env.script("GET", "/sessions", (200, {"items": [make_session()], "count": 1, "warning": w, "freshness": _stale("")}))


def _show(env, w: str) -> None:
    env.script("GET", "/jobs/4242", (200, {**make_job(), "freshness": _stale(w)}))


#: (id, command line, how to make the fake API answer with warning ``w``, "" for none, where
#: ``--json`` keeps it: a key of the printed document or a path to it).
CASES = [
    ("notebook", ["notebook", "--interval", "0.01"], _notebook, ("warnings",)),
    ("notebook-no-wait", ["notebook", "--no-wait"], _notebook, ("warnings",)),
    ("notebook-failed", ["notebook", "--interval", "0.01"], lambda env, w: _notebook(env, w, state="FAILED"), ("warnings",)),
    ("submit", ["submit", "FILE"], _submit, ("warnings",)),
    ("profiles-run", ["profiles", "run", "3"], _profiles_run, ("warnings",)),
    ("ls", ["ls"], _ls, ("warning",)),
    ("sessions", ["sessions"], _sessions, ("warning",)),
    ("show", ["show", "4242"], _show, ("freshness", "message")),
]


def _argv(argv: list[str], tmp_path) -> list[str]:
    f = tmp_path / "train.yaml"
    f.write_text("name: train\ncommand: python train.py\n")
    return [str(f) if a == "FILE" else a for a in argv]


def _kept(document: dict, path: tuple[str, ...]) -> str:
    value = document
    for key in path:
        value = value[key]
    return value[0] if isinstance(value, list) else value


@pytest.mark.parametrize("name, argv, answer, path", CASES, ids=[c[0] for c in CASES])
def test_every_warning_of_an_answer_is_on_stderr_with_the_same_exit_status(env, tmp_path, capsys, name, argv, answer, path):
    argv = _argv(argv, tmp_path)
    answer(env, "")
    quiet = main(argv)
    assert "warning:" not in capsys.readouterr().err
    answer(env, WARNING)
    assert main(argv) == quiet
    captured = capsys.readouterr()
    assert f"warning: {WARNING}\n" in captured.err
    assert captured.err.count(WARNING) == 1  # once, however many answers repeat it


@pytest.mark.parametrize("name, argv, answer, path", CASES, ids=[c[0] for c in CASES])
def test_json_keeps_the_warning_in_the_document_and_stderr_says_it(env, tmp_path, capsys, name, argv, answer, path):
    argv = _argv(argv, tmp_path)
    answer(env, "")
    quiet = main(["--json", *argv])
    capsys.readouterr()
    answer(env, WARNING)
    assert main(["--json", *argv]) == quiet
    captured = capsys.readouterr()
    assert _kept(json.loads(captured.out), path) == WARNING
    assert f"warning: {WARNING}\n" in captured.err


def test_notebook_says_the_warning_before_it_waits(env, capsys, monkeypatch):
    """The maintenance warning comes with the start, not after the wait it explains."""
    monkeypatch.setattr(time, "sleep", lambda s: None)
    _notebook(env, WARNING)
    env.session_states = [make_session(state="REQUESTED"), make_session(state="RUNNING", url=URL)]
    assert main(["notebook"]) == 0
    lines = capsys.readouterr().err.splitlines()
    assert lines.index(f"warning: {WARNING}") < lines.index("lab-1: REQUESTED")


@pytest.mark.parametrize(
    "document, expected",
    [
        ({"warnings": ["a", "b"]}, ["a", "b"]),
        ({"warnings": [], "warning": ""}, []),
        ({"warning": "c", "freshness": _stale("old")}, ["c"]),  # the warning says it in full
        ({"freshness": _stale("old")}, ["old"]),
        ({"freshness": {"stale": True}}, ["these figures are old"]),
        ({"freshness": _stale("")}, []),
        ({"warnings": ["a"], "warning": "c"}, ["a", "c"]),
        ([1, 2], []),
    ],
)
def test_answer_warnings(document, expected):
    assert answer_warnings(document) == expected


def test_the_printer_says_each_warning_once():
    lines = []
    printer = WarningPrinter(lines.append)
    printer({"warnings": ["a"]})
    printer({"warning": "a"})
    printer({"warnings": ["b"]})
    assert lines == ["warning: a", "warning: b"]
