"""`make dev`'s settings show the portal's own error pages, not Django's debug page listing every URL,
unless a developer asks for them with PORTAL_DEBUG=true."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PROBE = (
    "import django; django.setup(); from django.test import Client; from django.conf import settings; "
    "r = Client().get('/no-such-page/'); print(settings.DEBUG, r.status_code, b'URLconf' in r.content)"
)


@pytest.mark.parametrize("debug, expected", [("", "False 404 False"), ("true", "True 404 True")])
def test_dev_404_is_the_portals_page_unless_debug_is_asked_for(debug, expected):
    env = {k: v for k, v in os.environ.items() if k != "PORTAL_DEBUG"}
    env.update(DJANGO_SETTINGS_MODULE="portal.settings.dev", PORTAL_ALLOWED_HOSTS="testserver")
    if debug:
        env["PORTAL_DEBUG"] = debug
    out = subprocess.run([sys.executable, "-c", PROBE], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1] == expected, out.stderr[-2000:]


def test_dev_manages_the_local_clusters_small_job_pool_and_the_tests_start_without_it():
    """The lab's QOS ``small`` allows 1 GPU per job (cluster/up.sh): under ``make dev`` the form must know
    it, or a 2-GPU job in ``small`` is accepted and pends forever."""
    probe = "import django; django.setup(); from django.conf import settings; print(repr(settings.PORTAL_SMALL_POOL_PARTITION))"
    seen = {}
    for module, setting in [("portal.settings.dev", None), ("portal.settings.test", None), ("portal.settings.dev", "")]:
        env = {k: v for k, v in os.environ.items() if k != "PORTAL_SMALL_POOL_PARTITION"}
        env["DJANGO_SETTINGS_MODULE"] = module
        if setting is not None:
            env["PORTAL_SMALL_POOL_PARTITION"] = setting  # set, and empty: no pool, as the admin guide says
        out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
        seen[module, setting] = out.stdout.strip().splitlines()[-1] if out.stdout.strip() else out.stderr[-2000:]
    assert seen == {
        ("portal.settings.dev", None): "'small'",
        ("portal.settings.test", None): "''",
        ("portal.settings.dev", ""): "''",
    }


@pytest.mark.parametrize(
    "module, expected", [("portal.settings.dev", "http://dotenv.example"), ("portal.settings.test", "http://127.0.0.1:8000")]
)
def test_the_test_settings_read_the_environment_never_a_developers_dotenv(tmp_path, module, expected):
    """``make dev`` and docker-compose may read ``<repo>/.env``; the tests run with the process
    environment only, so a developer's ``.env`` cannot change the settings they run with. The probe
    points ``portal.env`` at a folder whose ``.env`` sets the site URL, then imports the settings."""
    (tmp_path / ".env").write_text("PORTAL_SITE_URL=http://dotenv.example\n")
    probe = (
        f"import pathlib, portal.env; portal.env.BASE_DIR = pathlib.Path({str(tmp_path)!r}); "
        f"import {module} as s; print(s.PORTAL_SITE_URL)"
    )
    env = {k: v for k, v in os.environ.items() if k != "PORTAL_SITE_URL"}
    env["DJANGO_SETTINGS_MODULE"] = module
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().splitlines()[-1:] == [expected], out.stderr[-2000:]


@pytest.mark.parametrize("load, expected", [(True, "small"), (False, "")])
def test_read_env_loads_dotenv_only_when_asked(tmp_path, monkeypatch, load, expected):
    from portal import env as env_module

    (tmp_path / ".env").write_text("PORTAL_SMALL_POOL_PARTITION=small\n")
    monkeypatch.delenv("PORTAL_SMALL_POOL_PARTITION", raising=False)
    monkeypatch.setattr(env_module, "BASE_DIR", tmp_path)
    monkeypatch.setattr(env_module, "LOAD_DOTENV", load)
    try:
        assert env_module.read_env()("PORTAL_SMALL_POOL_PARTITION") == expected
    finally:
        os.environ.pop("PORTAL_SMALL_POOL_PARTITION", None)  # read_env writes .env's values into os.environ
