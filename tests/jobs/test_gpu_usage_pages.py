"""What people see of GPU usage: the job page's GPUs as text and the chart's
series, the low-use flag on My jobs; another user's job shows nothing of its usage (404)."""

from __future__ import annotations

import pytest
from bs4 import BeautifulSoup

from gpuusage.store import usage_refresh
from tests.gpuusage.fakes import fixture, install, requests
from tests.jobs.test_gpu_usage import ANSWERS, running_job

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


@pytest.fixture
def bob(django_user_model):
    return django_user_model.objects.create(username="bob", slurm_accounts=["vision"])


@pytest.fixture
def read(monkeypatch, clean_cache):
    """One poller read of cluster1 from the handmade answers; then Prometheus counts every call."""
    install(monkeypatch, ANSWERS)
    usage_refresh("cluster1")
    return install(monkeypatch, [("__name__=~", fixture("range_sm.json"))])


def soup(response) -> BeautifulSoup:
    assert response.status_code == 200
    return BeautifulSoup(response.content, "html.parser")


def test_the_job_page_shows_each_gpu_as_text_without_asking_prometheus(client, alice, read):
    job = running_job(alice)
    client.force_login(alice)
    for url in (f"/jobs/{job.key}/", f"/jobs/{job.key}/gpus/"):
        html = soup(client.get(url))
        rows = html.select('[data-testid="gpu-usage"] tbody tr')
        assert [r["data-gpu"] for r in rows] == ["gpu1:0", "gpu1:1"]
        assert rows[0].select_one('[data-testid="sm-active"]').get_text() == "80 %"
        assert rows[0].select_one('[data-testid="memory"]').get_text() == "30720 / 81920 MiB"
        assert rows[0].select_one('[data-testid="power"]').get_text() == "313 W"
        assert rows[1].select_one('[data-testid="sm-active"]').get_text() == "0 %"  # measured 0, shown as 0
    assert read.calls == []
    page = soup(client.get(f"/jobs/{job.key}/"))
    region = page.select_one("#job-gpus")
    assert region["aria-live"] == "polite" and region["hx-swap"] == "morph:innerHTML" and "every" in region["hx-trigger"]
    chart = page.select_one('[data-testid="gpu-chart"]')
    assert chart["data-gpu-chart"] == f"/jobs/{job.key}/gpus/series/"
    assert page.select_one('script[src$="vendor/uPlot-1.6.32.iife.min.js"]') is not None


def test_a_job_on_a_node_without_an_exporter_says_not_measured(client, alice, read):
    job = running_job(alice, slurm_job_id=777, nodes="cpu1")
    client.force_login(alice)
    html = soup(client.get(f"/jobs/{job.key}/gpus/"))
    assert "Not measured on this node" in html.get_text() and "this is not 0 %" in html.get_text()
    assert html.select('[data-testid="gpu-usage"]') == []


def test_no_gpu_card_where_usage_is_not_measured_or_the_job_has_no_gpu(client, alice, read, settings):
    client.force_login(alice)
    cpu_job = running_job(alice, gpus=0)
    assert soup(client.get(f"/jobs/{cpu_job.key}/")).select('[data-testid="gpu-card"]') == []
    settings.PORTAL_PROMETHEUS_URL = ""
    assert soup(client.get(f"/jobs/{running_job(alice).key}/")).select('[data-testid="gpu-card"]') == []


def test_the_chart_series_come_from_one_cached_range_query(client, alice, read):
    job = running_job(alice)
    client.force_login(alice)
    first = client.get(f"/jobs/{job.key}/gpus/series/").json()
    second = client.get(f"/jobs/{job.key}/gpus/series/").json()
    assert first == second and len(read.calls) == 1  # the second viewer within the interval: the cache
    url, params, _ = read.calls[0]
    assert url.endswith("/api/v1/query_range")
    assert 'hpc_job="101"' in params["query"] and 'cluster="cluster1"' in params["query"]
    assert float(params["start"]) == pytest.approx(job.start_at.timestamp(), abs=1)
    assert [g["label"] for g in first["gpus"]] == ["gpu1 GPU 0", "gpu1 GPU 1"]
    assert first["gpus"][0]["sm_active"] == [70.0, 80.0, 80.0]
    assert first["gpus"][0]["memory_used_mib"] == [None, None, None]  # not in the answer: no figure, not 0
    assert len(first["t"]) == 3


def test_the_chart_says_when_prometheus_is_down(client, alice, monkeypatch, clean_cache):
    job = running_job(alice)
    install(monkeypatch, [("", requests.ConnectionError("refused"))])
    client.force_login(alice)
    answer = client.get(f"/jobs/{job.key}/gpus/series/").json()
    assert answer["t"] == [] and "not answering" in answer["error"]


def test_my_jobs_flags_a_running_gpu_job_that_barely_uses_its_gpus(client, alice, read):
    idle = running_job(alice, slurm_job_id=102, nodes="gpu2", gpus=1)
    busy = running_job(alice)
    client.force_login(alice)
    for url in ("/jobs/", "/jobs/table/"):
        html = soup(client.get(url, HTTP_HX_REQUEST="true" if "table" in url else ""))
        flags = {
            tag.find_parent("tr")["data-job"]: tag.get_text(" ", strip=True) for tag in html.select('[data-testid="low-use"]')
        }
        assert list(flags) == [str(idle.key)], url
        assert flags[str(idle.key)].startswith("1 GPU at 3 % SM activity for the last 30 min")
        assert str(busy.key) not in flags
    assert read.calls == []


@pytest.mark.parametrize("path", ["gpus/", "gpus/series/"])
def test_another_users_job_shows_nothing_of_its_usage(client, alice, bob, read, path):
    job = running_job(alice)
    client.force_login(bob)
    response = client.get(f"/jobs/{job.key}/{path}")
    assert response.status_code == 404
    assert b"80 %" not in response.content and b"gpu1" not in response.content
    assert read.calls == []
    assert client.get(f"/jobs/{job.key}/").status_code == 404
    html = soup(client.get("/jobs/"))
    assert html.select('[data-testid="low-use"]') == []


def test_the_api_gives_a_running_jobs_gpu_figures_and_nothing_of_anothers(client, alice, bob, read):
    job = running_job(alice, slurm_job_id=102, nodes="gpu2", gpus=1)
    client.force_login(alice)
    usage = client.get(f"/api/v1/jobs/{job.key}").json()["gpu_usage"]
    assert usage["state"] == "measured" and usage["low_use"] == "1 GPU at 3 % SM activity for the last 30 min"
    assert [(g["node"], g["sm_active_percent"], g["memory_total_mib"]) for g in usage["gpus"]] == [("gpu2", 35.0, 81920.0)]
    assert usage["read_at"] is not None and usage["unavailable_since"] is None
    client.force_login(bob)
    response = client.get(f"/api/v1/jobs/{job.key}")
    assert response.status_code == 404 and b"gpu2" not in response.content
    assert read.calls == []
