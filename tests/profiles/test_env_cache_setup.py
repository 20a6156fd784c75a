"""cluster/env_cache.sh (run by cluster/up.sh) on this machine, as root, with the real users: it turns
a cache as earlier versions left it (mode 1777, shared entries anyone could plant, an area made by
another user, one others can write in, a symbolic link) into root's cache with one area per user
that only its user writes in, and a second run changes nothing."""

from __future__ import annotations

import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
MEMBERS = (
    subprocess.run(["getent", "group", "slurmusers"], capture_output=True, text=True).stdout.strip().split(":")[-1].split(",")
)


def as_user(user: str, script: str) -> None:
    done = subprocess.run(["runuser", "-u", user, "--", "sh", "-c", script], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr


def setup(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["bash", str(REPO / "cluster" / "env_cache.sh")],
        env={**os.environ, "PORTAL_ENV_CACHE_DIR": str(path)},
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def cache():
    path = Path("/srv/gpuportal") / f"envs-setup-{uuid.uuid4().hex[:8]}"
    yield path
    shutil.rmtree(path, ignore_errors=True)


def state(path: Path) -> list[tuple]:
    return sorted((str(p), p.lstat().st_mode, p.lstat().st_uid, p.lstat().st_gid) for p in [path, *path.rglob("*")])


def test_setup_fixes_a_cache_left_by_earlier_versions_and_is_idempotent(cache):
    assert {"alice", "bob", "carol", "dana"} <= set(MEMBERS)
    cache.mkdir()
    cache.chmod(0o1777)
    as_user("bob", f"mkdir -p {cache}/0123456789abcdef/bin {cache}/alice/0123456789abcdef && : >{cache}/0123456789abcdef.lock")
    as_user("carol", f"mkdir -m 777 {cache}/carol && mkdir {cache}/carol/fedcba9876543210")
    as_user("bob", f"ln -s /tmp {cache}/dana")
    (cache / "README").write_text("kept: not an environment\n")

    first = setup(cache)
    assert first.returncode == 0, first.stderr
    assert f"environment cache {cache}: root's, mode 755 (was: 1777 root)" in first.stdout
    assert f"removed 2 shared environment entries of the old layout from {cache}" in first.stdout
    assert f"removed {cache}/alice (directory owned by bob)" in first.stdout
    assert f"removed {cache}/dana (symbolic link owned by bob)" in first.stdout
    assert f"{cache}/carol: made it writable by carol only (mode 755)" in first.stdout

    st = cache.stat()
    assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o755)
    assert sorted(p.name for p in cache.iterdir()) == sorted([*MEMBERS, "README"])
    for user in MEMBERS:
        area = cache / user
        assert not area.is_symlink() and area.is_dir() and area.owner() == user and area.stat().st_mode & 0o777 == 0o755, user
    assert list((cache / "alice").iterdir()) == []  # bob's planted entry is gone with his directory
    assert (cache / "carol" / "fedcba9876543210").is_dir()  # carol's own entries stay (jobs verify each one)

    before = state(cache)
    second = setup(cache)
    assert second.returncode == 0 and second.stdout == "", (second.stdout, second.stderr)
    assert state(cache) == before


def test_setup_refuses_a_cache_below_a_directory_others_can_write_in(cache):
    parent = cache.with_name(cache.name + "-parent")
    parent.mkdir(mode=0o777)
    parent.chmod(0o777)
    try:
        done = setup(parent / "envs")
        assert done.returncode != 0
        assert f"{parent} (above the environment cache) must belong to root and be writable by nobody else" in done.stderr
        assert not (parent / "envs").exists()  # nothing made
    finally:
        shutil.rmtree(parent, ignore_errors=True)
