"""Profiles on the real cluster: the environment is built once per spec hash in the user's own area
of the cache, under a file lock; concurrent jobs wait for one build, the user's later jobs reuse it,
a failed build leaves nothing behind. uv installs from PyPI on the node, as the researcher.

And nobody else can make or change an environment that alice's job runs: bob
plants one at the path alice's job would use (in the cache layout of earlier versions, which anyone
could write in), or tries to change alice's; her job never runs his code (his planted python would
write a marker file) and her log says what it refused."""

from __future__ import annotations

import hashlib
import os
import platform
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from jobs.reads.logs import job_log_tail
from profiles.envscript import EnvSite, env_spec_json
from profiles.schema import parse_profile
from profiles.services import profile_run
from slurm.states import JobState
from tests.jobs.test_jobs_integration import policy, wait  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[2]

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
    """A fresh cache set up as cluster/up.sh sets up /srv/gpuportal/envs (cluster/env_cache.sh: root's,
    mode 755, an area per member of slurmusers), removed afterwards."""
    path = Path(settings.PORTAL_ENV_CACHE_DIR).parent / f"envs-test-{uuid.uuid4().hex[:8]}"
    setup = subprocess.run(
        ["bash", str(REPO / "cluster" / "env_cache.sh")],
        env={**os.environ, "PORTAL_ENV_CACHE_DIR": str(path)},
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert setup.returncode == 0, setup.stderr
    settings.PORTAL_ENV_CACHE_DIR = str(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def old_cache_dir(settings):
    """A fresh cache as earlier versions made it: mode 1777 like /tmp, no areas; removed afterwards."""
    path = Path(settings.PORTAL_ENV_CACHE_DIR).parent / f"envs-test-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    os.chmod(path, 0o1777)
    settings.PORTAL_ENV_CACHE_DIR = str(path)
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def marker_dir():
    """Where planted code would leave its mark (anyone may write here)."""
    path = Path("/tmp") / f"env-poison-{uuid.uuid4().hex[:8]}"
    path.mkdir()
    os.chmod(path, 0o1777)
    yield path
    shutil.rmtree(path, ignore_errors=True)


def as_bob(script: str) -> subprocess.CompletedProcess:
    """Run ``sh -c script`` as the Unix user bob (another researcher of the cluster)."""
    return subprocess.run(["runuser", "-u", "bob", "--", "sh", "-c", script], capture_output=True, text=True, timeout=60)


def spec_hash(text: str) -> str:
    """The environment's hash as the job computes it (profiles/portal_env.sh): anyone can work it out."""
    spec = env_spec_json(parse_profile(text).environment, EnvSite.from_settings())
    return hashlib.sha256(f"{spec}\n{platform.machine()}\n".encode()).hexdigest()[:16]


def listing(path: Path) -> list[tuple]:
    return sorted(
        (str(p), p.lstat().st_mode, p.lstat().st_uid, p.lstat().st_size, p.lstat().st_mtime_ns) for p in [path, *path.rglob("*")]
    )


def run(user, text, capture):
    with capture(execute=True):
        job = profile_run(user=user, text=text)
    job.refresh_from_db()
    assert job.slurm_job_id, job.submit_error
    return job


def env_lines(job) -> list[str]:
    return [line for line in job_log_tail(job, "out").text.splitlines() if line.startswith("portal-env:")]


def test_same_spec_is_built_once_even_by_two_jobs_at_once_then_reused_by_later_jobs(
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
    area = cache_dir / "alice"
    envs = [p for p in area.iterdir() if p.is_dir()]
    assert len(envs) == 1 and (envs[0] / ".portal-manifest").exists() and envs[0].owner() == "alice"
    assert envs[0].name == spec_hash(text)
    assert not [p for p in [envs[0], *envs[0].rglob("*")] if not p.is_symlink() and p.stat().st_mode & 0o222]  # read-only
    for d in done:
        assert f"six 1.16.0 from {envs[0]}" in job_log_tail(d, "out").text

    # alice's later job takes it from the cache, without a build.
    third = wait(run(alice, text, django_capture_on_commit_callbacks), {JobState.COMPLETED, JobState.FAILED}, timeout=120)
    lines = env_lines(third)
    assert third.state == JobState.COMPLETED and lines and lines[0].startswith(f"portal-env: cache hit {envs[0].name}"), (
        lines,
        job_log_tail(third, "err").text,
    )
    assert not any("building" in x or "built" in x for x in lines)  # the later run skips the build
    assert f"six 1.16.0 from {envs[0]}" in job_log_tail(third, "out").text

    # A colleague running the same profile builds it once in her own area (per-user reuse: docs/profiles.md).
    carol = type(alice).objects.create(username="carol", slurm_accounts=["vision"])
    fourth = wait(run(carol, text, django_capture_on_commit_callbacks), {JobState.COMPLETED, JobState.FAILED}, timeout=240)
    assert fourth.state == JobState.COMPLETED, job_log_tail(fourth, "err").text
    assert f"six 1.16.0 from {cache_dir / 'carol' / envs[0].name}" in job_log_tail(fourth, "out").text
    assert any(x.startswith(f"portal-env: built {envs[0].name}") for x in env_lines(fourth))


def test_failed_build_says_so_and_leaves_nothing(alice, policy, cache_dir, django_capture_on_commit_callbacks):
    text = PROFILE.format(tag=uuid.uuid4().hex[:6], packages="portal-no-such-package-4f7a==1.0")
    done = wait(run(alice, text, django_capture_on_commit_callbacks), {JobState.COMPLETED, JobState.FAILED}, timeout=180)
    assert (done.state, done.exit_code) == (JobState.FAILED, 2)
    assert "portal-env: building environment" in job_log_tail(done, "err").text and "failed" in job_log_tail(done, "err").text
    assert [
        p for p in (cache_dir / "alice").iterdir() if p.is_dir()
    ] == []  # the next job builds again instead of using half an environment


PLANTED_PYTHON = """#!/bin/sh
touch {marker}/bobs-python-ran-as-$(id -un)
exec /usr/bin/python3 "$@"
"""


def plant(entry: Path, hash_: str, marker: Path) -> None:
    """As bob: a complete-looking environment at ``entry`` whose python leaves a marker (with the
    finished-build marks of this version and the last: a manifest naming the hash, .portal-ready)."""
    script = PLANTED_PYTHON.format(marker=marker)
    done = as_bob(
        f"set -e; mkdir -p {entry}/bin; cat >{entry}/bin/python <<'EOF'\n{script}EOF\n"
        f"chmod 755 {entry}/bin/python; ln -s python {entry}/bin/python3; : >{entry}/.portal-ready; "
        f"printf 'portal-env manifest 1\\nhash {hash_}\\nfiles 0\\n' >{entry}/.portal-manifest; chmod -R a-w {entry}"
    )
    assert done.returncode == 0, done.stderr


def test_bob_cannot_plant_an_environment_that_alices_job_runs(
    alice, policy, old_cache_dir, marker_dir, django_capture_on_commit_callbacks
):
    text = PROFILE.format(tag=uuid.uuid4().hex[:6], packages="six==1.16.0")
    hash_ = spec_hash(text)
    # In a cache anyone can write in (as this one was), bob makes alice's area before her first job, and
    # also plants at the path of the old layout.
    plant(old_cache_dir / "alice" / hash_, hash_, marker_dir)
    plant(old_cache_dir / hash_, hash_, marker_dir)
    assert (old_cache_dir / "alice").owner() == "bob"

    done = wait(run(alice, text, django_capture_on_commit_callbacks), {JobState.COMPLETED, JobState.FAILED}, timeout=240)
    out = job_log_tail(done, "out").text
    assert done.state == JobState.COMPLETED, (out, job_log_tail(done, "err").text)
    assert list(marker_dir.iterdir()) == []  # bob's python never ran
    area = old_cache_dir / "alice"
    assert f"portal-env: refused the cache area {area}: it belongs to bob, not to you" in out, out
    assert f"portal-env: building a private environment {hash_} (python 3.11, 1 package) in /tmp/portal-env-{hash_}." in out, out
    assert re.search(rf"six 1\.16\.0 from /tmp/portal-env-{hash_}\.\w+/env$", out, re.M), out
    assert f"from {area}" not in out and f"from {old_cache_dir / hash_}" not in out


def test_bob_cannot_change_alices_environment(alice, policy, cache_dir, marker_dir, django_capture_on_commit_callbacks):
    text = PROFILE.format(tag=uuid.uuid4().hex[:6], packages="six==1.16.0")
    hash_ = spec_hash(text)
    first = wait(run(alice, text, django_capture_on_commit_callbacks), {JobState.COMPLETED, JobState.FAILED}, timeout=240)
    assert first.state == JobState.COMPLETED, job_log_tail(first, "err").text
    area, entry = cache_dir / "alice", cache_dir / "alice" / hash_
    assert (entry / ".portal-manifest").exists() and area.owner() == entry.owner() == "alice"
    before = listing(area)

    site_packages = next(entry.glob("lib/python*/site-packages"))
    script = PLANTED_PYTHON.format(marker=marker_dir)
    attempts = {
        "replace her python": f"cat >{entry}/bin/python <<'EOF'\n{script}EOF",
        "add a .pth file to her site-packages": f"echo 'import os' >{site_packages}/zz_bob.pth",
        "make her python writable": f"chmod o+w {entry}/bin/python",
        "remove her environment": f"rm -rf {entry}",
        "move it aside": f"mv {entry} {entry}.old",
        "add an environment to her area": f"mkdir {area}/0123456789abcdef",
        "plant at the top of the cache": f"mkdir {cache_dir}/{hash_}",
        "take over her lock": f": >{area}/{hash_}.lock",
    }
    for what, command in attempts.items():
        tried = as_bob(command)
        assert tried.returncode != 0, f"bob could {what}"
        assert "Permission denied" in tried.stderr or "Operation not permitted" in tried.stderr, (what, tried.stderr)
    assert listing(area) == before
    assert not (cache_dir / hash_).exists() and not (area / "0123456789abcdef").exists()

    again = wait(run(alice, text, django_capture_on_commit_callbacks), {JobState.COMPLETED, JobState.FAILED}, timeout=120)
    assert again.state == JobState.COMPLETED, job_log_tail(again, "err").text
    assert env_lines(again)[0].startswith(f"portal-env: cache hit {hash_}")
    assert f"six 1.16.0 from {entry}" in job_log_tail(again, "out").text
    assert list(marker_dir.iterdir()) == []
