"""A scripted stand-in for Prometheus's HTTP API: ``requests.get`` replaced by a function that
answers each query (matched by a piece of its PromQL) with a canned JSON document, in the format of
``/api/v1/query`` and ``/api/v1/query_range``. Records every call."""

from __future__ import annotations

import json
from pathlib import Path

import requests

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "prometheus"


def fixture(name: str) -> dict:
    return json.loads((FIXTURES / name).read_text())


class FakeResponse:
    def __init__(self, status: int, body):
        self.status_code = status
        self._body = body

    def json(self):
        if isinstance(self._body, str):
            raise ValueError("not JSON")
        return self._body


def vector(*series: tuple[dict, float], at: float = 1764590000.0) -> dict:
    """An instant query's answer: one entry per (labels, value)."""
    return {
        "status": "success",
        "data": {"resultType": "vector", "result": [{"metric": m, "value": [at, repr(v)]} for m, v in series]},
    }


class FakePrometheus:
    """``answers``: [(a piece of the PromQL, answer)], the first match wins; an answer is a dict
    (HTTP 200 with that JSON), an ``(status, body)`` pair, or an exception to raise."""

    def __init__(self, answers):
        self.answers = list(answers)
        self.calls: list[tuple[str, dict, float]] = []

    def __call__(self, url, params=None, timeout=None):
        self.calls.append((url, dict(params or {}), timeout))
        promql = (params or {}).get("query", "")
        for piece, answer in self.answers:
            if piece in promql:
                if isinstance(answer, Exception):
                    raise answer
                if isinstance(answer, tuple):
                    return FakeResponse(*answer)
                return FakeResponse(200, answer)
        return FakeResponse(200, {"status": "success", "data": {"resultType": "vector", "result": []}})

    @property
    def queries(self) -> list[str]:
        return [params.get("query", "") for _, params, _ in self.calls]


def install(monkeypatch, answers) -> FakePrometheus:
    fake = FakePrometheus(answers)
    monkeypatch.setattr("gpuusage.prometheus.requests.get", fake)
    return fake


__all__ = ["FakePrometheus", "FakeResponse", "fixture", "install", "requests", "vector"]
