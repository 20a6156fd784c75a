"""The home page's GPUs allocated vs busy per GPU type, from the snapshot's nodes
and the GPU usage read (no page asks Prometheus)."""

from __future__ import annotations

import time

import pytest
from bs4 import BeautifulSoup
from django.core.cache import cache

from gpuusage.store import ClusterUsage, GpuFigures, usage_key
from jobs.gpu.gpu_usage import gpus_busy
from slurm import SlurmGateway
from slurm.snapshot import snapshot_store, snapshot_take
from tests.fakes import cluster_transport
from tests.gpuusage.fakes import install

pytestmark = pytest.mark.django_db


def usage() -> ClusterUsage:
    busy, idle = GpuFigures(host="node1", gpu="0", sm_active=70.0), GpuFigures(host="node1", gpu="1", sm_active=1.0)
    t4 = GpuFigures(host="node3", gpu="1", sm_active=55.0)
    return ClusterUsage(cluster="cluster1", read_at=time.time(), jobs={"7": [busy, idle], "8": [t4]}, hosts=["node1", "node3"])


@pytest.fixture
def snapshot(slurm_json, clean_cache):
    taken = snapshot_take(SlurmGateway(cluster_transport(slurm_json)), now=time.time() - 2)
    snapshot_store(taken)
    return taken


def test_busy_gpus_per_partition_and_type(snapshot):
    # node1 (interactive, train; 4 a100): GPU 0 busy; node2 has no exporter; node3 (train, small; 2 t4): GPU 1 busy
    assert gpus_busy(snapshot, usage()) == {
        ("interactive", "a100"): 1,
        ("train", "a100"): 1,
        ("train", "t4"): 1,
        ("small", "t4"): 1,
    }
    assert gpus_busy(snapshot, None) == {}


def test_the_home_gpu_table_shows_allocated_vs_busy(client, django_user_model, snapshot, monkeypatch):
    cache.set(usage_key("cluster1"), usage().to_dict(), timeout=None)
    fake = install(monkeypatch, [])
    alice = django_user_model.objects.create(username="alice")
    client.force_login(alice)
    for url in ("/", "/cluster/gpus/"):
        html = BeautifulSoup(client.get(url).content, "html.parser")
        section = html.select_one('[data-cluster="cluster1"][data-testid="cluster-gpus"]')
        cells = {
            (tr["data-partition"], tr["data-gpu-type"]): tr.select_one('[data-testid="gpus-busy"]').get_text(strip=True)
            for tr in section.select("tbody tr")
        }
        assert cells[("interactive", "a100")] == "1 of 4"
        assert cells[("small", "t4")] == "1 of 1"
        assert "SM activity is at least 5 %" in section.get_text()
    assert fake.calls == []


def test_no_busy_column_before_any_read(client, django_user_model, snapshot):
    client.force_login(django_user_model.objects.create(username="alice"))
    html = BeautifulSoup(client.get("/cluster/gpus/").content, "html.parser")
    assert html.select('[data-testid="gpus-busy"]') == []
