"""Fixtures of the teams tests: each configured cluster's slurmdbd as a scripted transport answering
from its own Slurm's recorded outputs (cluster1: Slurm 22.05, ``tests/fixtures/slurm/22.05/``;
cluster2: Slurm 24.11, ``tests/fixtures/slurm/24.11/accounting/``, cluster/record_accounting.py)."""

from __future__ import annotations

import json
from functools import cache

import pytest

from slurm import SlurmGateway
from slurm.accounting import SHOW_ASSOCIATIONS, SHOW_USERS
from tests.conftest import FIXTURES
from tests.fakes import FakeTransport

#: The Slurm release each cluster of cluster/clusters.toml runs.
RELEASE = {"cluster1": "22.05", "cluster2": "24.11"}
ACCOUNTING = {"22.05": FIXTURES / "slurm" / "22.05", "24.11": FIXTURES / "slurm" / "24.11" / "accounting"}


def recorded(release: str, name: str) -> str:
    """A recorded text output of ``release``: ``recorded("24.11", "sacctmgr_show_user.txt")``."""
    return (ACCOUNTING[release] / name).read_text()


@cache
def manifest_2411() -> dict:
    """cluster/record_accounting.py's manifest of the 24.11 accounting recording."""
    return json.loads((ACCOUNTING["24.11"] / "manifest.json").read_text())


def expect_sacctmgr_reads(fake: FakeTransport, release: str, associations: str | None = None, users: str | None = None) -> None:
    """Script the sync's two reads (associations, users) with ``release``'s recorded demo cluster
    (or the given texts)."""
    fake.expect(
        SHOW_ASSOCIATIONS, stdout=associations if associations is not None else recorded(release, "sacctmgr_show_association.txt")
    )
    fake.expect(SHOW_USERS, stdout=users if users is not None else recorded(release, "sacctmgr_show_user.txt"))


@pytest.fixture
def slurmdbds(monkeypatch) -> dict[str, FakeTransport]:
    """Each configured cluster's process-wide gateway answers from its own scripted transport
    (cluster name -> transport); an unscripted call fails the test. The site has the two clusters of
    cluster/clusters.toml (the test settings' file)."""
    from slurm.clusters import cluster_names

    assert cluster_names() == ["cluster1", "cluster2"], "these tests are for the two local clusters"
    fakes = {name: FakeTransport() for name in cluster_names()}
    monkeypatch.setattr("slurm.gateway._gateways", {name: SlurmGateway(fake) for name, fake in fakes.items()})
    return fakes
