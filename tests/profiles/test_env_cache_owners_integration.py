"""Who may own the directories above the environment cache, in Charliecloud's user namespace, on the
real cluster (docs/profiles.md, "Who may own the directories above the cache"). Inside, bob's and
root's directories both show as nobody; the batch script checks the cache on the host before ch-run
(jobs/worker/batch.py), so a directory above the cache that bob owns, or that a group can write in, is
refused there, and the job builds a private venv instead of using a cache bob could swap. A profile
job through real Slurm, then the cases one by one with ch-run as alice (the batch script's own
host-check lines before it, as in the job).

The cache of each test is ``<alice's home>/gpuportal-tests/owners-<id>/above/envs`` (bound at the
same path, so it is inside the container as outside), with alice's area in it; ``above`` is the
directory whose owner and mode each case sets."""

from __future__ import annotations

import dataclasses
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from django.conf import settings as django_settings

from jobs.reads.logs import job_log_tail
from jobs.worker.batch import env_cache_host_check
from profiles.envscript import EnvImage, EnvSite, render_profile_script
from profiles.schema import parse_profile
from profiles.services import profile_run
from slurm.states import JobState
from tests.jobs.test_jobs_integration import policy, wait  # noqa: F401  (fixture)
from tests.profiles.test_image_env_integration import IMAGE_ONLY, alice, demo_image  # noqa: F401  (fixtures)

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

OTHER = "choose a cache below directories only root can change (the cluster staff's PORTAL_ENV_CACHE_DIR)"
PRIVATE = "; building a private environment for this job only"


@pytest.fixture
def cache():
    """The cache ``.../above/envs`` (root's, mode 755) with alice's area (hers, mode 755), as
    cluster/env_cache.sh makes one; everything removed afterwards."""
    base = Path("/home/alice/gpuportal-tests") / f"owners-{uuid.uuid4().hex[:8]}"
    path = base / "above" / "envs"
    (path / "alice").mkdir(parents=True)
    for p in (base, base / "above", path):
        p.chmod(0o755)
    subprocess.run(["chown", "alice:alice", str(path / "alice")], check=True)
    yield path
    subprocess.run(["chmod", "-R", "u+w", str(base)], check=False)
    shutil.rmtree(base, ignore_errors=True)


def above(cache: Path, owner: str, mode: int) -> Path:
    """Give the directory above the cache to ``owner`` (user:group) with ``mode``."""
    path = cache.parent
    subprocess.run(["chown", owner, str(path)], check=True)
    path.chmod(mode)
    return path


def ch_run(cache: Path, image, *, host_check: bool = True) -> str:
    """The profile's script (no packages, on the image's Python) run in ``image`` with ch-run as alice,
    the cache bound at its own path, after the batch script's host check (``host_check=False``: ch-run
    by hand, with no check on the host). Returns the script's stdout."""
    site = dataclasses.replace(EnvSite.from_settings(), cache_dir=str(cache))
    script = cache.parents[1] / f"job-{uuid.uuid4().hex[:6]}.sh"
    text = IMAGE_ONLY.format(tag="owners").replace("grep PRETTY_NAME /etc/os-release\n", "")
    script.write_text(render_profile_script(parse_profile(text), site=site, image=EnvImage.of(image)))
    script.chmod(0o644)
    tools = str(Path(django_settings.PORTAL_ENV_UV).parent)
    run = ["ch-run", "--home", "-b", f"{cache}:{cache}", "-b", f"{tools}:{tools}", image.path, "--", "/bin/bash", str(script)]
    lines = env_cache_host_check(str(cache), str(cache)) if host_check else []
    shell = "\n".join([*lines, 'exec "$@"', ""])
    argv = ["runuser", "-u", "alice", "--", "bash", "-c", shell, "bash", *run]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "sklearn" in done.stdout, done.stdout
    return done.stdout


def used_the_cache(out: str, cache: Path) -> bool:
    return "portal-env: cache miss" in out and f"in {cache}/alice/" in out and "private" not in out


def test_a_profile_job_in_an_image_refuses_a_cache_below_bobs_directory_then_uses_one_below_roots(
    alice, policy, demo_image, cache, settings, django_capture_on_commit_callbacks
):
    """Real Slurm: the batch script's host check before ch-run, portal_env inside."""
    settings.PORTAL_ENV_CACHE_DIR = str(cache)
    text = IMAGE_ONLY.format(tag=uuid.uuid4().hex[:6])

    def run() -> str:
        with django_capture_on_commit_callbacks(execute=True):
            job = profile_run(user=alice, text=text)
        job.refresh_from_db()
        assert job.slurm_job_id, job.submit_error
        done = wait(job, {JobState.COMPLETED, JobState.FAILED}, timeout=240)
        out = job_log_tail(done, "out").text
        assert done.state == JobState.COMPLETED, (out, job_log_tail(done, "err").text)
        return out

    bobs = above(cache, "bob:bob", 0o755)  # shows as nobody, mode 755, inside: just as root's would
    out = run()
    assert (
        f"portal-env: refused the environment cache {cache}, checked on the host before the container started: "
        f"{bobs} belongs to bob, who could put their own environments in place of yours: "
        f"make it root's (chown root {bobs}), or {OTHER}{PRIVATE}" in out
    ), out
    assert "portal-env: building a private environment" in out and list((cache / "alice").iterdir()) == []

    above(cache, "root:root", 0o755)
    out = run()
    assert used_the_cache(out, cache), out


def test_a_directory_above_the_cache_a_group_can_write_in_is_refused_on_the_host(demo_image, cache):
    """A team member (bob shares slurmusers with alice) could swap alice's area."""
    shared = above(cache, "root:slurmusers", 0o775)
    out = ch_run(cache, demo_image)
    assert (
        f"portal-env: refused the environment cache {cache}, checked on the host before the container started: "
        f"members of group slurmusers can write in {shared} (mode 775, not sticky), so they could put their own "
        f"environments in place of yours: chmod go-w {shared}{PRIVATE}" in out
    ), out
    assert list((cache / "alice").iterdir()) == []


def test_a_sticky_directory_above_the_cache_is_refused_inside_the_container(demo_image, cache):
    """Root's and sticky: accepted on the host (as /tmp), but inside its owner shows as nobody and
    could be anyone, and a sticky directory's owner may rename what is in it."""
    sticky = above(cache, "root:root", 0o1777)
    out = ch_run(cache, demo_image)
    assert (
        f"portal-env: refused the environment cache {cache}: other users can write in {sticky} (mode 1777) and its "
        f"owner shows as nobody in this container, so it could be anyone and a sticky bit does not protect it: "
        f"chmod go-w {sticky}, or {OTHER}{PRIVATE}" in out
    ), out


def test_without_the_hosts_check_a_directory_shown_as_nobody_is_refused(demo_image, cache):
    """ch-run by hand: the cache (root's) shows as nobody and nothing checked it on the host."""
    out = ch_run(cache, demo_image, host_check=False)
    assert (
        f"portal-env: refused the environment cache {cache}: {cache} shows as owned by nobody (uid 65534: in this "
        f"container root and every other user look the same) and the host did not check it before the container "
        f"started: run the job from the portal, whose batch script checks it{PRIVATE}" in out
    ), out


@pytest.mark.parametrize("owner", ["root:root", "alice:alice"])
def test_directories_of_root_or_alice_that_nobody_else_can_write_in_are_accepted(demo_image, cache, owner):
    above(cache, owner, 0o755)  # root's shows as nobody inside: accepted after the host's check
    out = ch_run(cache, demo_image)
    assert used_the_cache(out, cache), out
