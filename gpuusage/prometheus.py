"""The one client of Prometheus's HTTP API (``/api/v1/query``, ``/api/v1/query_range``).

Every call has a deadline (``PORTAL_PROMETHEUS_TIMEOUT`` seconds) and raises only
:class:`PrometheusError`: Prometheus down (connection refused), slow (the deadline passed), or an
answer that is not a success (HTTP error, ``"status": "error"``, not JSON, not a vector/matrix).
"""

from __future__ import annotations

from dataclasses import dataclass

import requests
from django.conf import settings


class PrometheusError(Exception):
    """A query could not be answered. ``query``: the PromQL sent; ``reason``: why, in a few words
    ("not answering", "no answer within 2 s", "HTTP 503", Prometheus's own ``error``)."""

    def __init__(self, query: str, reason: str):
        self.query = query
        self.reason = reason
        super().__init__(f"Prometheus: {reason} (query {query[:120]})")


@dataclass(frozen=True)
class Sample:
    """One series of an answer: its ``labels`` (``__name__`` included) and its ``points``
    (``[(unix seconds, value)]``; one point for an instant query). Values are floats; NaN stays NaN."""

    labels: dict[str, str]
    points: tuple[tuple[float, float], ...]

    @property
    def value(self) -> float:
        """The last point's value (an instant query's only one)."""
        return self.points[-1][1]


def promql_string(text: str) -> str:
    """``text`` as a PromQL string literal (a label value in a selector)."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def prometheus_configured() -> bool:
    """Whether this site measures GPU usage (``PORTAL_PROMETHEUS_URL`` is set)."""
    return bool(settings.PORTAL_PROMETHEUS_URL)


def _get(path: str, params: dict, promql: str) -> dict:
    timeout = settings.PORTAL_PROMETHEUS_TIMEOUT
    try:
        response = requests.get(f"{settings.PORTAL_PROMETHEUS_URL}{path}", params=params, timeout=timeout)
    except requests.Timeout as exc:
        raise PrometheusError(promql, f"no answer within {timeout:g} s") from exc
    except requests.RequestException as exc:
        raise PrometheusError(promql, f"not answering at {settings.PORTAL_PROMETHEUS_URL}") from exc
    try:
        body = response.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        raise PrometheusError(promql, f"HTTP {response.status_code}, not a Prometheus answer")
    if body.get("status") != "success":
        detail = body.get("error") or f"HTTP {response.status_code}"
        raise PrometheusError(promql, f"{body.get('errorType', 'error')}: {detail}"[:300])
    data = body.get("data")
    if not isinstance(data, dict) or not isinstance(data.get("result"), list):
        raise PrometheusError(promql, "answer without data.result")
    return data


def _float(text) -> float:
    try:
        return float(text)
    except (TypeError, ValueError):
        return float("nan")


def query(promql: str, *, at: float | None = None) -> list[Sample]:
    """Run an instant query (evaluated at ``at``, Unix seconds; now when ``None``). Returns one
    :class:`Sample` per series of the vector (a scalar answer is one sample without labels).
    Raises :class:`PrometheusError`."""
    params = {"query": promql}
    if at is not None:
        params["time"] = f"{at:.3f}"
    data = _get("/api/v1/query", params, promql)
    kind = data.get("resultType")
    if kind == "scalar":
        t, v = data["result"]
        return [Sample({}, ((float(t), _float(v)),))]
    if kind != "vector":
        raise PrometheusError(promql, f"a {kind} where a vector was expected")
    try:
        return [Sample(dict(r["metric"]), ((float(r["value"][0]), _float(r["value"][1])),)) for r in data["result"]]
    except (KeyError, IndexError, TypeError, ValueError) as exc:
        raise PrometheusError(promql, "a vector entry without metric or value") from exc


def query_range(promql: str, *, start: float, end: float, step: float) -> list[Sample]:
    """Run a range query from ``start`` to ``end`` (Unix seconds) every ``step`` seconds. Returns
    one :class:`Sample` per series of the matrix, its points in time order. Raises
    :class:`PrometheusError`."""
    params = {"query": promql, "start": f"{start:.3f}", "end": f"{end:.3f}", "step": f"{max(step, 1.0):g}"}
    data = _get("/api/v1/query_range", params, promql)
    if data.get("resultType") != "matrix":
        raise PrometheusError(promql, f"a {data.get('resultType')} where a matrix was expected")
    try:
        return [Sample(dict(r["metric"]), tuple((float(t), _float(v)) for t, v in r["values"])) for r in data["result"]]
    except (KeyError, TypeError, ValueError) as exc:
        raise PrometheusError(promql, "a matrix entry without metric or values") from exc
