"""runtimes/path_owners.sh on the host, run for real with bash as this test's user (no root, no
container): a directory above the cache that its group or others can write in is refused with which
directory, who can write and what to do; the user's own directories and sticky ones of root or the
user are accepted; and the batch script's host check (jobs/worker/batch.py) exports what it found for the
job inside the container. The other users' and the container's cases are on the cluster:
tests/profiles/test_env_cache_owners_integration.py."""

from __future__ import annotations

import grp
import os
import subprocess
from pathlib import Path

import pytest

from jobs.worker.batch import env_cache_host_check
from runtimes import path_owners_sh


def path_ok(cache: Path, **env: str) -> tuple[int, str]:
    """``portal_env_path_ok CACHE $(id -u)`` in bash: (its status, PORTAL_ENV_WHY)."""
    script = path_owners_sh() + '\nportal_env_path_ok "$1" "$(id -u)"; rc=$?\nprintf "%s\\n%s" "$rc" "${PORTAL_ENV_WHY:-}"\n'
    done = subprocess.run(
        ["bash", "-c", script, "bash", str(cache)], env={**os.environ, **env}, capture_output=True, text=True, timeout=30
    )
    assert done.returncode == 0, done.stderr
    rc, why = done.stdout.split("\n", 1)
    return int(rc), why


@pytest.fixture
def cache(tmp_path):
    """``<tmp>/above/envs``: the cache and the directory above it, this user's, mode 755."""
    path = tmp_path / "above" / "envs"
    path.mkdir(parents=True)
    (tmp_path / "above").chmod(0o755)
    return path


def test_directories_of_root_or_the_user_that_nobody_else_can_write_in_are_accepted(cache):
    assert path_ok(cache) == (0, "")
    cache.parent.chmod(0o1777)  # sticky like /tmp, and the user's (or root's, as pytest's base is)
    assert path_ok(cache) == (0, "")


@pytest.mark.parametrize(
    ("mode", "who"),
    [(0o775, "members of group {group}"), (0o777, "other users"), (0o757, "other users")],
)
def test_a_directory_above_the_cache_its_group_or_others_can_write_in_is_refused(cache, mode, who):
    above = cache.parent
    above.chmod(mode)
    group = grp.getgrgid(above.stat().st_gid).gr_name
    assert path_ok(cache) == (
        1,
        f"{who.format(group=group)} can write in {above} (mode {mode:o}, not sticky), so they could put their own "
        f"environments in place of yours: chmod go-w {above}",
    )


def test_on_the_host_an_inherited_host_check_changes_nothing(cache):
    """PORTAL_ENV_HOST_CHECKED only matters in a container (PORTAL_ENV_UNMAPPED set): from the
    submitter's environment on the host it opens nothing."""
    cache.parent.chmod(0o777)
    code, why = path_ok(cache, PORTAL_ENV_HOST_CHECKED=str(cache), PORTAL_ENV_UNMAPPED="")
    assert code == 1 and why.startswith(f"other users can write in {cache.parent} (mode 777, not sticky)")


def host_check(source: Path, target: str) -> dict[str, str]:
    """Run the batch script's host-check lines, then print what they export."""
    lines = env_cache_host_check(str(source), target)
    script = "\n".join([*lines, 'printf "%s\\n%s" "${PORTAL_ENV_HOST_CHECKED-unset}" "${PORTAL_ENV_HOST_REFUSED-unset}"', ""])
    env = {**os.environ, "PORTAL_ENV_HOST_CHECKED": "inherited", "PORTAL_ENV_HOST_REFUSED": "inherited"}
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    checked, refused = done.stdout.split("\n", 1)
    return {"checked": checked, "refused": refused}


def test_the_batch_scripts_host_check_says_checked_or_why_not(cache):
    assert host_check(cache, "/srv/gpuportal/envs/") == {"checked": "/srv/gpuportal/envs", "refused": "unset"}
    cache.parent.chmod(0o775)
    group = grp.getgrgid(cache.parent.stat().st_gid).gr_name
    assert host_check(cache, "/srv/gpuportal/envs") == {
        "checked": "unset",
        "refused": f"members of group {group} can write in {cache.parent} (mode 775, not sticky), so they could put "
        f"their own environments in place of yours: chmod go-w {cache.parent}",
    }
    cache.parent.chmod(0o755)
    missing = cache / "no-such-dir"
    assert host_check(missing, "/srv/gpuportal/envs")["refused"] == f"{missing} is not a directory"


def test_the_host_check_refuses_a_cache_path_through_a_symbolic_link(cache):
    """ch-run follows the link again when it binds the path, after the check: only the real path counts."""
    link = cache.parent / "link"
    link.symlink_to(cache)
    assert host_check(link, "/srv/gpuportal/envs") == {
        "checked": "unset",
        "refused": f"{link} goes through a symbolic link (to {cache}), which the container runtime would follow again "
        f"after this check: the cluster staff should set PORTAL_ENV_CACHE_DIR to {cache}",
    }
