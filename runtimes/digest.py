"""Content digest of a directory image (Charliecloud's format: a plain root file system).

``python -m runtimes.digest DIR`` prints it (scripts/build_image.sh writes it to the image's JSON);
``python -m runtimes.digest --list DIR`` prints the line each entry adds, so ``diff`` of two builds' lists
names the files that make their digests differ."""

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
    total = hashlib.sha256()
    for line in digest_lines(root):
        total.update(line.encode("utf-8", "surrogateescape"))
    return "sha256:" + total.hexdigest()


def digest_lines(root: str):
    """The lines :func:`directory_digest` hashes, one per entry in its order: ``"<path>\\0<mode, octal>\\0<body>\\n"``
    (body: ``file <sha256>``, ``link <target>``, ``dir`` or ``special <type, octal>``). A generator of str."""
    entries: list[str] = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames.sort()
        for name in dirnames + filenames:
            entries.append(os.path.relpath(os.path.join(dirpath, name), root))
    entries.sort()
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
        yield f"{rel}\0{mode:o}\0{body}\n"


def _file_sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(_CHUNK):
            h.update(chunk)
    return h.hexdigest()


if __name__ == "__main__":  # pragma: no cover - exercised by scripts/build_image.sh
    args = sys.argv[1:]
    listing = args[:1] == ["--list"]
    if listing:
        args = args[1:]
    if len(args) != 1 or not os.path.isdir(args[0]):
        sys.exit("usage: python -m runtimes.digest [--list] IMAGE_DIR")
    if listing:
        for entry in digest_lines(args[0]):
            sys.stdout.write(entry.replace("\0", " "))
    else:
        print(directory_digest(args[0]))
