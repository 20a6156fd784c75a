"""Shared fixtures. Integration fixtures talk to the real local cluster (``make cluster``), the real
Redis and PostgreSQL, and a real OIDC provider (``idp/``) started per test session."""
from __future__ import annotations

import json
import os
import socket
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pytest_configure(config):
    # The live server needs a known port before the IdP starts: the IdP must list the callback URL.
    os.environ.setdefault("DJANGO_LIVE_TEST_SERVER_ADDRESS", f"127.0.0.1:{free_port()}")


@pytest.fixture
def slurm_json():
    """Load a recorded Slurm JSON document: ``slurm_json("22.05", "sinfo")``."""

    def load(version: str, name: str) -> dict:
        return json.loads((FIXTURES / "slurm" / version / f"{name}.json").read_text())

    return load


@pytest.fixture(autouse=True)
def _fresh_gateway():
    """Every test starts with no pooled gateway (tests may change settings)."""
    from jobs.slurm import reset_gateway

    reset_gateway()
    yield
    reset_gateway()


@pytest.fixture
def clean_cache():
    """The test Redis database (``/15``), emptied before and after the test."""
    from django.core.cache import cache

    cache.clear()
    yield cache
    cache.clear()
