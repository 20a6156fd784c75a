"""One cluster's GPU usage read once per interval (gpuusage/store.py): three queries for every GPU
held by a job, stored in the cache; a failure keeps the last figures and says since when."""

from __future__ import annotations

import pytest

from gpuusage.store import ClusterUsage, usage_load, usage_read, usage_refresh, usages_load
from tests.gpuusage.fakes import fixture, install, requests

ANSWERS = [
    ("avg_over_time", fixture("window_two_jobs.json")),
    ("count by (Hostname)", fixture("hosts.json")),
    ("__name__=~", fixture("latest_two_jobs.json")),
]


def test_one_read_is_three_queries_for_the_whole_cluster(monkeypatch, settings):
    settings.PORTAL_GPU_LOW_USE_MINUTES = 30
    fake = install(monkeypatch, ANSWERS)
    usage = usage_read("cluster1", now=1764590000.0)
    assert len(fake.calls) == 3
    latest, window, hosts = fake.queries
    assert 'cluster="cluster1",hpc_job!=""' in latest and "DCGM_FI_PROF_SM_ACTIVE|DCGM_FI_PROF_DRAM_ACTIVE" in latest
    assert window == 'avg_over_time(DCGM_FI_PROF_SM_ACTIVE{cluster="cluster1",hpc_job!=""}[30m])'
    assert hosts == 'count by (Hostname) (DCGM_FI_DEV_FB_FREE{cluster="cluster1"})'
    assert usage.hosts == ["gpu1", "gpu2"]
    assert sorted(usage.jobs) == ["101", "102"]
    busy, idle = usage.jobs["101"]
    assert (busy.host, busy.gpu, busy.model) == ("gpu1", "0", "NVIDIA A100-SXM4-80GB")
    assert busy.sm_active == pytest.approx(80.0) and busy.dram_active == pytest.approx(42.0) and busy.util == 97
    assert (busy.memory_used_mib, busy.memory_total_mib, busy.power_w) == (30720, 81920, 312.5)
    assert busy.sm_active_window == pytest.approx(75.0)
    assert idle.sm_active == 0.0 and idle.sm_active_window == pytest.approx(2.0) and idle.memory_total_mib == 81920
    assert usage.read_at == 1764590000.0 and usage.error == ""


def test_a_cluster_name_is_quoted_as_a_promql_string(monkeypatch):
    fake = install(monkeypatch, [])
    usage_read('we"ird\\', now=1.0)
    assert 'cluster="we\\"ird\\\\"' in fake.queries[0]


def test_a_missing_figure_is_none_never_zero(monkeypatch):
    latest = fixture("latest_two_jobs.json")
    latest["data"]["result"] = [r for r in latest["data"]["result"] if r["metric"]["__name__"] != "DCGM_FI_DEV_POWER_USAGE"]
    latest["data"]["result"][0]["value"][1] = "NaN"  # job 101's GPU 0 SM activity
    install(monkeypatch, [("avg_over_time", fixture("window_two_jobs.json")), ("__name__=~", latest)])
    gpu = usage_read("cluster1", now=1.0).jobs["101"][0]
    assert gpu.power_w is None and gpu.sm_active is None


def test_refresh_stores_it_per_cluster(monkeypatch, clean_cache):
    install(monkeypatch, ANSWERS)
    usage_refresh("cluster1", now=1000.0)
    stored = usage_load("cluster1")
    assert isinstance(stored, ClusterUsage) and stored.jobs["101"][0].sm_active == pytest.approx(80.0)
    assert usages_load(["cluster1", "cluster2"])["cluster2"] is None


def test_prometheus_down_keeps_the_last_figures_and_says_since_when(monkeypatch, clean_cache):
    install(monkeypatch, ANSWERS)
    usage_refresh("cluster1", now=1000.0)
    fake = install(monkeypatch, [("", requests.ConnectionError("refused"))])
    usage_refresh("cluster1", now=1005.0)
    usage_refresh("cluster1", now=1010.0)
    stored = usage_load("cluster1")
    assert stored.unavailable and "not answering" in stored.error
    assert (stored.error_since, stored.attempted_at, stored.read_at) == (1005.0, 1010.0, 1000.0)
    assert stored.jobs["101"][0].sm_active == pytest.approx(80.0)  # the last figures, not zeros
    assert len(fake.calls) == 2  # one failed query per read: the others are not tried
    install(monkeypatch, ANSWERS)
    usage_refresh("cluster1", now=1015.0)
    assert usage_load("cluster1").error == "" and usage_load("cluster1").error_since is None


def test_prometheus_down_before_any_read_stores_only_the_error(monkeypatch, clean_cache):
    install(monkeypatch, [("", requests.ReadTimeout("slow"))])
    usage = usage_refresh("cluster2", now=50.0)
    assert usage.jobs == {} and usage.read_at == 0.0 and usage.error_since == 50.0
