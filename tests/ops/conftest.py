"""The cluster page's fixtures on the recorded 22.05 cluster: its stored snapshot and a scripted
gateway for every cluster; the admin dana, signed in (a module may define its own ``dana``)."""

from __future__ import annotations

import json

import pytest

from slurm import SlurmGateway
from slurm.snapshot import snapshot_store, snapshot_take
from tests.fakes import EveryCluster, FakeTransport
from tests.slurm.recorded import poll_transport, reservations_text


@pytest.fixture
def snapshot(clean_cache, slurm_json):
    """cluster1's snapshot from the recorded 22.05 cluster, stored: node3 drained ("disk swap", by root)
    from ``sinfo_drained.json``, the queue of ``squeue.json`` (jobs 2, 3, 5 running on node1, node2,
    node3), and the two recorded reservations (``fx_maint``, ``fx_team``)."""
    fake = poll_transport("22.05")
    fake.script[0].stdout = json.dumps(slurm_json("22.05", "sinfo_drained")).encode()
    fake.script[-1].stdout = reservations_text("22.05", "two").encode()
    snap = snapshot_take(SlurmGateway(fake), cluster="cluster1")
    snapshot_store(snap)
    return snap


@pytest.fixture
def slurm(monkeypatch):
    """Every cluster's gateway is this scripted transport (empty: any Slurm call fails the test)."""
    fake = FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    return fake


@pytest.fixture
def dana(client, django_user_model, clean_cache):
    """The admin dana, signed in."""
    user = django_user_model.objects.create(username="dana", is_staff=True)
    client.force_login(user)
    return user
