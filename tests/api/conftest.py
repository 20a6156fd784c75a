"""Fixtures shared by the API tests: the people and cluster of the profile tests, a token of every
scope for each person, and a scripted transport standing for every cluster."""

import pytest

from api.tokens import token_create
from slurm import SlurmGateway
from tests.fakes import EveryCluster, FakeTransport
from tests.profiles.conftest import cluster, no_slurm, people  # noqa: F401  (shared fixtures)

#: Every scope a personal access token can have.
ALL = ["read", "jobs", "sessions", "profiles"]


@pytest.fixture
def tokens(people):  # noqa: F811
    """A token of every scope (:data:`ALL`, 30 days) for each of ``people``, by name: the raw token."""
    return {name: token_create(user=user, name="t", scopes=ALL, days=30)[1] for name, user in people.items()}


@pytest.fixture
def fake(monkeypatch, clean_cache):
    """A scripted transport that every cluster's gateway uses (an empty cache: no log page read before)."""
    fake = FakeTransport()
    monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(SlurmGateway(fake)))
    return fake
