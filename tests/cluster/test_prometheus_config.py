"""Prometheus's config, alert rules and the Grafana dashboard in the repo: promtool accepts the config and
rules and the rules' own unit tests pass (cluster/etc/prometheus-rules.test.yml), the scrape targets are the
exporters cluster/up.sh starts, and every dashboard query is valid PromQL on the metrics that exist."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
ETC = REPO / "cluster" / "etc"
CONFIG = ETC / "prometheus.yml"
RULES = ETC / "prometheus-rules.yml"
DASHBOARD = REPO / "docs" / "grafana" / "gpu-portal.json"

#: dcgm-exporter's names (the stand-in serves them: tests/cluster/test_fake_dcgm_exporter.py) and the portal's
DCGM = {
    "DCGM_FI_DEV_GPU_UTIL", "DCGM_FI_DEV_FB_USED", "DCGM_FI_DEV_FB_FREE", "DCGM_FI_DEV_POWER_USAGE",
    "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "DCGM_FI_PROF_SM_ACTIVE", "DCGM_FI_PROF_DRAM_ACTIVE",
    "DCGM_FI_PROF_PCIE_TX_BYTES", "DCGM_FI_PROF_PCIE_RX_BYTES", "DCGM_FI_PROF_NVLINK_TX_BYTES",
    "DCGM_FI_PROF_NVLINK_RX_BYTES", "DCGM_FI_DEV_CLOCK_THROTTLE_REASONS",
}  # fmt: skip
#: the portal's (api/metrics.py)
PORTAL = {
    "portal_jobs_pending", "portal_snapshot_age_seconds", "portal_poll_failures_total", "portal_submissions_stuck",
    "portal_submissions_total", "portal_sessions", "portal_gpu_usage_age_seconds",
}  # fmt: skip
KNOWN = DCGM | PORTAL | {"up"}

promtool = shutil.which("promtool")
needs_promtool = pytest.mark.skipif(not promtool, reason="promtool not installed (Debian's prometheus: scripts/prometheus.sh)")


def run_promtool(*args: str, cwd: Path = ETC) -> subprocess.CompletedProcess:
    return subprocess.run([promtool, *args], cwd=cwd, capture_output=True, text=True, timeout=60)


@needs_promtool
def test_promtool_accepts_the_config_and_its_rules():
    done = run_promtool("check", "config", str(CONFIG))

    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 8 rules found" in done.stdout + done.stderr


@needs_promtool
def test_promtool_check_rules_passes():
    done = run_promtool("check", "rules", str(RULES))

    assert done.returncode == 0, done.stdout + done.stderr


@needs_promtool
def test_the_alert_rules_unit_tests_pass():
    done = run_promtool("test", "rules", "prometheus-rules.test.yml")

    assert done.returncode == 0, done.stdout + done.stderr


def test_there_is_an_alert_for_each_fault_the_issue_names():
    rules = yaml.safe_load(RULES.read_text())
    alerts = {rule["alert"]: rule["expr"] for group in rules["groups"] for rule in group["rules"]}

    assert {"GpuPowerThrottled", "GpuThermallyThrottled", "GpusIdleWhilePending", "PortalSnapshotStale",
            "PortalPollFailing", "PortalSubmissionsStuck", "PortalGpuUsageStale"} <= set(alerts)  # fmt: skip
    assert "portal_jobs_pending" in alerts["GpusIdleWhilePending"]
    assert "DCGM_FI_PROF_SM_ACTIVE" in alerts["GpusIdleWhilePending"]
    assert "portal_snapshot_age_seconds" in alerts["PortalSnapshotStale"]
    assert "portal_poll_failures_total" in alerts["PortalPollFailing"]
    assert "portal_submissions_stuck" in alerts["PortalSubmissionsStuck"]


def test_prometheus_scrapes_every_exporter_up_sh_starts_every_5_s_labelled_with_the_portals_cluster_name():
    config = yaml.safe_load(CONFIG.read_text())
    jobs = {job["job_name"]: job for job in config["scrape_configs"]}
    ports = dict(re.findall(r"\[(\w+)\]=(\d+)", re.search(r"EXPORTER_PORT=\((.*)\)", (REPO / "cluster/lib.sh").read_text())[1]))
    ports2 = dict(
        re.findall(r"\[(\w+)\]=(\d+)", re.search(r"EXPORTER_PORT=\((.*)\)", (REPO / "cluster/cluster2/lib.sh").read_text())[1])
    )
    names = [c["name"] for c in tomllib.loads((REPO / "cluster" / "clusters.toml").read_text())["clusters"]]

    assert config["global"]["scrape_interval"] == "5s"
    assert "scrape_interval" not in jobs["dcgm"]
    by_cluster = {group["labels"]["cluster"]: group["targets"] for group in jobs["dcgm"]["static_configs"]}
    assert by_cluster == {
        "cluster1": [f"127.0.0.1:{port}" for port in ports.values()],
        "cluster2": [f"127.0.0.1:{port}" for port in ports2.values()],
    }
    assert sorted(by_cluster) == sorted(names)
    assert jobs["portal"]["static_configs"] == [{"targets": ["127.0.0.1:8000"]}]
    assert jobs["portal"]["metrics_path"] == "/metrics"


def dashboard_queries() -> list[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    exprs += [v["query"]["query"] for v in dashboard["templating"]["list"] if v["type"] == "query"]
    return exprs


def as_promql(expr: str) -> str:
    """A dashboard query with Grafana's variables filled in as a query would see them."""
    expr = expr.replace("$__range", "1h").replace("$__rate_interval", "1m")
    return re.sub(r"\$\{?\w+\}?", ".*", expr)


def test_the_dashboard_is_valid_json_with_unique_panel_ids_and_a_prometheus_datasource():
    dashboard = json.loads(DASHBOARD.read_text())
    ids = [p["id"] for p in dashboard["panels"]]

    assert len(ids) == len(set(ids))
    assert dashboard["uid"] == "gpu-portal"
    assert [v for v in dashboard["templating"]["list"] if v["type"] == "datasource"][0]["query"] == "prometheus"
    assert len(dashboard_queries()) > 15


def test_the_dashboard_reads_only_metrics_that_exist_and_leads_with_sm_activity():
    used = set()
    for expr in dashboard_queries():
        used |= set(re.findall(r"\b(DCGM_FI_\w+|portal_\w+|up)\b(?=\s*[{\[)]|\s*$|\s)", expr))

    assert used <= KNOWN, used - KNOWN
    assert used >= DCGM - {"DCGM_FI_DEV_FB_FREE"}
    assert used >= PORTAL
    first = json.loads(DASHBOARD.read_text())["panels"][1]
    assert "DCGM_FI_PROF_SM_ACTIVE" in first["targets"][0]["expr"]


@needs_promtool
def test_every_dashboard_query_is_valid_promql(tmp_path):
    # promtool parses PromQL in rule files: each panel query becomes a recording rule
    queries = [as_promql(e) for e in dashboard_queries() if not e.startswith("label_values(")]
    rules = {"groups": [{"name": "dashboard", "rules": [{"record": f"q{i}", "expr": e} for i, e in enumerate(queries)]}]}
    (tmp_path / "dashboard.yml").write_text(yaml.safe_dump(rules))

    done = run_promtool("check", "rules", "dashboard.yml", cwd=tmp_path)

    assert done.returncode == 0, done.stdout + done.stderr
