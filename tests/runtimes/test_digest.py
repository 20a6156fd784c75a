"""runtimes.digest.directory_digest: content, names, modes and link targets count; owners and times do not."""

from __future__ import annotations

import os

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
