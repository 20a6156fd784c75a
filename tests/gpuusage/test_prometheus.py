"""The Prometheus client (gpuusage/prometheus.py): answers read into samples, and every way
Prometheus can fail (down, slow, an error answer, not Prometheus at all) is one PrometheusError."""

from __future__ import annotations

import math

import pytest

from gpuusage import PrometheusError, prometheus_configured, query, query_range
from tests.gpuusage.fakes import fixture, install, requests


def test_an_instant_query_reads_every_series_with_its_labels(monkeypatch, settings):
    settings.PORTAL_PROMETHEUS_URL = "http://prom.example:9090"
    settings.PORTAL_PROMETHEUS_TIMEOUT = 1.5
    fake = install(monkeypatch, [("SM_ACTIVE", fixture("window_two_jobs.json"))])
    samples = query('DCGM_FI_PROF_SM_ACTIVE{cluster="cluster1"}', at=1764590000.0)
    assert [(s.labels["hpc_job"], s.labels["gpu"], s.value) for s in samples] == [
        ("101", "0", 0.75),
        ("101", "1", 0.02),
        ("102", "0", 0.03),
    ]
    url, params, timeout = fake.calls[0]
    assert url == "http://prom.example:9090/api/v1/query"
    assert params == {"query": 'DCGM_FI_PROF_SM_ACTIVE{cluster="cluster1"}', "time": "1764590000.000"}
    assert timeout == 1.5


def test_a_range_query_keeps_every_point_in_order(monkeypatch):
    fake = install(monkeypatch, [("SM_ACTIVE", fixture("range_sm.json"))])
    samples = query_range("DCGM_FI_PROF_SM_ACTIVE", start=100.0, end=200.0, step=5)
    assert [p[1] for p in samples[0].points] == [0.7, 0.8, 0.8]
    assert fake.calls[0][0].endswith("/api/v1/query_range")
    assert fake.calls[0][1]["step"] == "5"


def test_a_nan_value_is_kept_as_nan(monkeypatch):
    install(
        monkeypatch,
        [("x", {"status": "success", "data": {"resultType": "vector", "result": [{"metric": {}, "value": [1, "NaN"]}]}})],
    )
    assert math.isnan(query("x")[0].value)


@pytest.mark.parametrize(
    ("answer", "reason"),
    [
        (requests.ConnectTimeout("slow"), "no answer within 2 s"),
        (requests.ReadTimeout("slow"), "no answer within 2 s"),
        (requests.ConnectionError("refused"), "not answering at http://127.0.0.1:9090"),
        ((503, "Service Unavailable"), "HTTP 503, not a Prometheus answer"),
        (
            (400, {"status": "error", "errorType": "bad_data", "error": "parse error at char 5"}),
            "bad_data: parse error at char 5",
        ),
        ((200, {"status": "success", "data": {"resultType": "matrix", "result": []}}), "a matrix where a vector was expected"),
        ((200, {"status": "success"}), "answer without data.result"),
        ((200, [1, 2]), "HTTP 200, not a Prometheus answer"),
    ],
)
def test_every_failure_is_one_error_type_saying_why(monkeypatch, settings, answer, reason):
    settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9090"
    settings.PORTAL_PROMETHEUS_TIMEOUT = 2.0
    install(monkeypatch, [("up", answer)])
    with pytest.raises(PrometheusError) as caught:
        query("up")
    assert caught.value.reason == reason
    assert caught.value.query == "up"
    assert reason in str(caught.value)


def test_an_empty_url_means_usage_is_not_measured_here(settings):
    settings.PORTAL_PROMETHEUS_URL = ""
    assert prometheus_configured() is False
    settings.PORTAL_PROMETHEUS_URL = "http://127.0.0.1:9090"
    assert prometheus_configured() is True


def test_the_settings_come_from_the_environment():
    from portal.env import SCHEMA

    assert SCHEMA["PORTAL_PROMETHEUS_URL"] == (str, "http://127.0.0.1:9090")
    assert SCHEMA["PORTAL_PROMETHEUS_TIMEOUT"] == (float, 2.0)
