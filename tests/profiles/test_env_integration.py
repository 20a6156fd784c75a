"""Profiles on the real cluster: the environment is built once per spec hash in the shared cache,
under a file lock; concurrent jobs wait for one build, later jobs reuse it, a failed build leaves
nothing behind. uv installs from PyPI on the node, as the researcher."""

from __future__ import annotations

import os
import re
import shutil
import uuid
from pathlib import Path

import pytest

from jobs.logs import job_log_tail
from profiles.services import profile_run
from slurm.states import JobState
from tests.jobs.test_jobs_integration import policy, wait  # noqa: F401  (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

PROFILE = """version: 1
name: env-cache-{tag}
resources: {{partition: small, cpus: 1, memory: 500M, time_limit: 10}}
run:
  command: |
    python -c 'import six, sys; print("six", six.__version__, "from", sys.prefix)'
environment:
  python: "3.11"
  pip: [{packages}]
"""


@pytest.fixture
def alice(django_user_model, clean_cache):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


@pytest.fixture
def cache_dir(settings):
    """A fresh shared cache (mode 1777, like /srv/gpuportal/envs), removed afterwards."""
    path = Path(settings.PORTAL_ENV_CACHE_DIR).parent / f"envs-test-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    os.chmod(path, 0o1777)
    settings.PORTAL_ENV_CACHE_DIR = str(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def run(user, text, capture):
    with capture(execute=True):
        job = profile_run(user=user, text=text)
    job.refresh_from_db()
    assert job.slurm_job_id, job.submit_error
    return job


def env_lines(job) -> list[str]:
    return [line for line in job_log_tail(job, "out").text.splitlines() if line.startswith("portal-env:")]


def test_same_spec_is_built_once_even_by_two_jobs_at_once_then_reused_by_a_colleague(
    alice, policy, cache_dir, django_capture_on_commit_callbacks
):
    text = PROFILE.format(tag=uuid.uuid4().hex[:6], packages="six==1.16.0")
    first, second = run(alice, text, django_capture_on_commit_callbacks), run(alice, text, django_capture_on_commit_callbacks)
    done = [wait(j, {JobState.COMPLETED, JobState.FAILED}, timeout=240) for j in (first, second)]
    assert [d.state for d in done] == [JobState.COMPLETED, JobState.COMPLETED], [job_log_tail(d, "err").text for d in done]
    logs = [env_lines(d) for d in done]
    built = [lines for lines in logs if any(re.match(r"portal-env: built [0-9a-f]{16} in [0-9.]+ s$", x) for x in lines)]
    hits = [lines for lines in logs if any(x.startswith("portal-env: cache hit ") for x in lines)]
    assert len(built) == 1 and len(hits) == 1, logs  # one build; the other job waited for it or found it ready
    envs = [p for p in cache_dir.iterdir() if p.is_dir()]
    assert len(envs) == 1 and (envs[0] / ".portal-ready").exists() and envs[0].owner() == "alice"
    for d in done:
        assert f"six 1.16.0 from {envs[0]}" in job_log_tail(d, "out").text

    # A colleague running the same profile gets the same environment, without a build.
    carol = type(alice).objects.create(username="carol", slurm_accounts=["vision"])
    third = wait(run(carol, text, django_capture_on_commit_callbacks), {JobState.COMPLETED, JobState.FAILED}, timeout=120)
    lines = env_lines(third)
    assert third.state == JobState.COMPLETED and lines and lines[0].startswith(f"portal-env: cache hit {envs[0].name}"), (
        lines,
        job_log_tail(third, "err").text,
    )
    assert not any("building" in x or "built" in x for x in lines)  # the later run skips the build
    assert f"six 1.16.0 from {envs[0]}" in job_log_tail(third, "out").text


def test_failed_build_says_so_and_leaves_nothing(alice, policy, cache_dir, django_capture_on_commit_callbacks):
    text = PROFILE.format(tag=uuid.uuid4().hex[:6], packages="portal-no-such-package-4f7a==1.0")
    done = wait(run(alice, text, django_capture_on_commit_callbacks), {JobState.COMPLETED, JobState.FAILED}, timeout=180)
    assert (done.state, done.exit_code) == (JobState.FAILED, 2)
    assert "portal-env: building environment" in job_log_tail(done, "err").text and "failed" in job_log_tail(done, "err").text
    assert [p for p in cache_dir.iterdir() if p.is_dir()] == []  # the next job builds again instead of using half an environment
