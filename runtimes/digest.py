"""Content digest of a directory image (Charliecloud's format: a plain root file system).

``python -m runtimes.digest DIR`` prints it (scripts/build_image.sh writes it to the image's JSON)."""

from __future__ import annotations

import hashlib
import os
import stat
import sys

_CHUNK = 1 << 20


def directory_digest(root: str) -> str:
    """``"sha256:<64 hex>"`` over every entry below ``root``, in sorted order of the path relative to ``root``.

    Each entry contributes its relative path, its kind and permission bits, and then for a regular file the
    sha256 of its bytes, for a symbolic link its target (not followed). Owners and times are left out, so two
    builds of the same files give the same digest. Raises OSError when an entry cannot be read."""
    entries: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in dirnames + filenames:
            entries.append(os.path.relpath(os.path.join(dirpath, name), root))
    entries.sort()
    total = hashlib.sha256()
    for rel in entries:
        path = os.path.join(root, rel)
        st = os.lstat(path)
        mode = stat.S_IMODE(st.st_mode)
        if stat.S_ISLNK(st.st_mode):
            body = "link " + os.readlink(path)
        elif stat.S_ISREG(st.st_mode):
            body = "file " + _file_sha256(path)
        elif stat.S_ISDIR(st.st_mode):
            body = "dir"
        else:
            body = f"special {stat.S_IFMT(st.st_mode):o}"
        total.update(f"{rel}\0{mode:o}\0{body}\n".encode("utf-8", "surrogateescape"))
    return "sha256:" + total.hexdigest()


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


if __name__ == "__main__":  # pragma: no cover - exercised by scripts/build_image.sh
    if len(sys.argv) != 2 or not os.path.isdir(sys.argv[1]):
        sys.exit("usage: python -m runtimes.digest IMAGE_DIR")
    print(directory_digest(sys.argv[1]))
