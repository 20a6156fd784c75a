"""Memory from the CLI. The CLI imports no portal code: it sends memory as typed
(``--set memory=4000M``, ``notebook --memory 4000M``) and the portal reads it with the one reader
(portal.units.memory_mib). Against the fake API: what is sent. Against the live portal (its API over
HTTP, the recorded cluster's snapshot, no Slurm and no JupyterHub reachable): what the portal makes
of it, and the refusal printed with the sentence that says which units are accepted."""

from __future__ import annotations

from pathlib import Path

import pytest

from api.tokens import token_create
from gpuportal.cli import main
from interactive.models import Session
from jobs.models import Job
from portal.units import ACCEPTED
from tests.conftest import free_port
from tests.jobs.test_job_pages import cluster, no_slurm  # noqa: F401  (fixtures: the recorded cluster's snapshot; no Slurm)
from tests.profiles.conftest import EXAMPLE_TEXT

from .fake_api import make_session

pytestmark = pytest.mark.usefixtures("clean_env")


# --- what the CLI sends (fake API) -------------------------------------------------------------------
def test_notebook_sends_memory_as_typed(env, capsys):
    env.session_states = [make_session(state="RUNNING", url="https://hub.example.org/user/alice/lab-1/lab")]
    assert main(["notebook", "--memory", "4000M", "--interval", "0.01"]) == 0
    [post] = env.calls("POST", "/sessions")
    assert post.body["memory"] == "4000M" and "memory_gb" not in post.body


def test_notebook_memory_and_memory_gb_together_is_a_usage_error(env, capsys):
    assert main(["notebook", "--memory", "4G", "--memory-gb", "4"]) == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert env.calls("POST", "/sessions") == []


# --- what the portal makes of it (live portal) -------------------------------------------------------
@pytest.fixture
def portal(live_server, transactional_db, clean_cache, cluster, no_slurm, django_user_model, settings, monkeypatch, tmp_path):  # noqa: F811
    """The CLI pointed at the live portal with alice's token; the hub's URL answers nothing."""
    settings.PORTAL_HUB_API_URL = f"http://127.0.0.1:{free_port()}/hub/api"
    settings.PORTAL_HUB_TOKEN = "t"
    settings.PORTAL_SESSION_PARTITIONS, settings.PORTAL_SESSION_MAX_GPUS, settings.PORTAL_SESSION_MAX_HOURS = (
        ["interactive"],
        2,
        8,
    )
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    _, raw = token_create(user=alice, name="cli", scopes=["read", "jobs", "sessions"], days=1)
    monkeypatch.setenv("GPUPORTAL_URL", live_server.url)
    monkeypatch.setenv("GPUPORTAL_TOKEN", raw)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    profile = tmp_path / "train.yaml"
    profile.write_text(EXAMPLE_TEXT)
    return profile


def test_submit_set_memory_is_read_by_the_portal(portal: Path, capsys, monkeypatch):
    monkeypatch.setattr("gpuportal.jobs.ID_WAIT_S", 0)  # no Slurm here: the id never comes, so do not wait 10 s for it
    assert main(["submit", str(portal), "--set", "memory=4000M"]) == 0, capsys.readouterr().err
    assert Job.objects.get().memory_mb == 4000


def test_submit_set_memory_as_slurm_habit_is_refused_saying_what_to_write(portal: Path, capsys):
    """``--set memory=4096`` (MiB, as sbatch --mem reads it) is not taken as 4096 GB."""
    assert main(["submit", str(portal), "--set", "memory=4096"]) == 1
    err = capsys.readouterr().err
    assert (
        "  resources.memory: 4096 with no unit would be 4096 GB: write 4096M for MiB (what Slurm's --mem means by a bare number)"
        " or 4096G for GB. " + ACCEPTED
    ) in err, err
    assert not Job.objects.exists()


def test_notebook_memory_is_read_by_the_portal(portal: Path, capsys):
    # Every check passes; the hub does not answer (503), after the session row is stored.
    assert main(["notebook", "--memory", "1536M", "--no-wait"]) == 1
    assert "JupyterHub could not be reached" in capsys.readouterr().err
    assert Session.objects.get().memory_mb == 1536


@pytest.mark.parametrize(
    "typed, sentence",
    [
        ("4GBs", "'4GBs' is not an amount of memory."),
        ("0", "Memory must be more than 0 ('0' is not)."),
        ("99T", "'99T' is more memory than any node has: at most 64T."),
    ],
)
def test_notebook_memory_refused_says_which_units_are_accepted(portal: Path, capsys, typed, sentence):
    assert main(["notebook", "--memory", typed, "--no-wait"]) == 1
    err = capsys.readouterr().err
    assert f"  memory: {sentence} {ACCEPTED}" in err, err
    assert not Session.objects.exists()
