"""bench/poller_clusters.py's canned gateway answers every command a poll of each Slurm version runs.
The benchmark stopped running once the poll also read reservations (its gateway had no answer for
``scontrol show reservation``) and nobody noticed; this runs one canned poll of each version, with a
short queue, through the same ``snapshot_take`` the benchmark times."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from slurm import SlurmGateway
from slurm.snapshot import snapshot_take

BENCH = Path(__file__).resolve().parents[2] / "bench" / "poller_clusters.py"


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_poller_clusters", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up by name
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        sys.modules.pop(spec.name, None)


@pytest.mark.parametrize(("release", "cluster"), [("22.05", "cluster1"), ("24.11", "cluster2")])
def test_a_canned_poll_of_each_version_reads_the_repeated_queue(bench, release, cluster):
    gateway = SlurmGateway(bench.CannedTransport(bench.canned_outputs(release, 40)))
    snapshot = snapshot_take(gateway, previous=None, now=1_800_000_000.0, cluster=cluster)
    assert snapshot.error == "", snapshot.error
    assert len(snapshot.jobs) == 40
    assert len(snapshot.reservations) == 2  # the recorded pair the canned gateway answers with
