"""runtimes.digest.directory_digest: content, names, modes and link targets count; owners and times do not."""

from __future__ import annotations

import os
import subprocess
import sys

from runtimes.digest import directory_digest


def _tree(root):
    (root / "etc").mkdir(parents=True)
    (root / "etc" / "os-release").write_text("ID=debian\n")
    (root / "bin").mkdir()
    (root / "bin" / "sh").write_bytes(b"\x7fELF")
    os.symlink("/bin/sh", root / "bin" / "bash")
    return root


def test_digest_stable_and_sensitive(tmp_path):
    a, b = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    first = directory_digest(str(a))
    assert first.startswith("sha256:") and len(first) == 7 + 64
    os.utime(b / "etc" / "os-release", (1, 1))
    assert directory_digest(str(b)) == first  # times left out
    (b / "etc" / "os-release").write_text("ID=ubuntu\n")
    assert directory_digest(str(b)) != first  # contents
    (b / "etc" / "os-release").write_text("ID=debian\n")
    assert directory_digest(str(b)) == first
    os.chmod(b / "bin" / "sh", 0o755)
    assert directory_digest(str(b)) != first  # modes
    os.chmod(b / "bin" / "sh", os.stat(a / "bin" / "sh").st_mode & 0o7777)
    os.remove(b / "bin" / "bash")
    os.symlink("/bin/dash", b / "bin" / "bash")
    assert directory_digest(str(b)) != first  # link targets


def test_listing_names_what_differs(tmp_path):
    """``python -m runtimes.digest --list`` prints one line per entry; two builds' lists differ exactly
    where their digests do, so ``diff`` names the file that changed."""
    a, b = _tree(tmp_path / "a"), _tree(tmp_path / "b")
    (b / "etc" / "os-release").write_text("ID=ubuntu\n")

    def listing(root):
        done = subprocess.run([sys.executable, "-m", "runtimes.digest", "--list", str(root)], capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout.splitlines()

    first, second = listing(a), listing(b)
    assert len(first) == 5 and first[0].startswith("bin 755 dir")
    assert [line.split()[0] for line in set(first) ^ set(second)] == ["etc/os-release", "etc/os-release"]
