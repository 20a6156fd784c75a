"""Fixtures of the CLI's unit tests: a clean environment and the fake API (``fake_api.py``)."""

from __future__ import annotations

import pytest

from .fake_api import TOKEN, FakeAPI

ENV_VARS = [
    "GPUPORTAL_URL",
    "GPUPORTAL_TOKEN",
    "GPUPORTAL_CONFIG",
    "XDG_CONFIG_HOME",
    "http_proxy",
    "https_proxy",
    "all_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "NETRC",
]


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    """No configuration leaks in from the machine: a fresh HOME, no GPUPORTAL_* or proxy variables.
    (Used by the unit test modules with ``pytestmark``; the end-to-end tests make their own.)"""
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("NO_PROXY", "*")
    return tmp_path


@pytest.fixture
def api():
    fake = FakeAPI().start()
    yield fake
    fake.stop()


@pytest.fixture
def env(api, monkeypatch):
    """The CLI configured for the fake API through the environment."""
    monkeypatch.setenv("GPUPORTAL_URL", api.url)
    monkeypatch.setenv("GPUPORTAL_TOKEN", TOKEN)
    return api
