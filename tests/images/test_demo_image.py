"""The demo image scripts/build_image.sh made, as it lies in the shared image directory: its
JSON (what image_register reads) matches the directory, including a digest recomputed here; every user can read it
and none but root can write it; it starts as alice with ch-run and holds Debian 12's Python, numpy and sklearn
and the session venv at /opt/jupyter with the hub's own jupyterhub version and the portal's session extension; the mount points the portal's binds
need are there; a second run of the script does nothing and says so within seconds."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
import time
from pathlib import Path

import pytest

from runtimes.digest import directory_digest

pytestmark = [pytest.mark.integration, pytest.mark.timeout(120)]

REPO = Path(__file__).resolve().parents[2]
IMAGES_DIR = Path(os.environ.get("PORTAL_IMAGES_DIR", "/srv/gpuportal/images"))
IMAGE = IMAGES_DIR / "debian12-sklearn"
JSON = IMAGES_DIR / "debian12-sklearn.json"


@pytest.fixture(scope="module")
def doc() -> dict:
    if not JSON.is_file() or not IMAGE.is_dir():
        pytest.fail(f"the demo image is not at {IMAGE}: build it with 'sudo bash scripts/build_image.sh'")
    return json.loads(JSON.read_text())


def alice_in_image(*argv: str) -> subprocess.CompletedProcess:
    return subprocess.run(["sudo", "-u", "alice", "ch-run", str(IMAGE), "--", *argv], capture_output=True, text=True, cwd="/tmp")


def test_json_describes_the_directory(doc):
    assert set(doc) == {"name", "description", "os", "python", "cuda", "digest", "path", "runtime", "offers"}
    assert doc["name"] == "debian12-sklearn" and doc["path"] == str(IMAGE)
    assert doc["os"] == "Debian GNU/Linux 12 (bookworm)"
    assert re.fullmatch(r"3\.11\.\d+", doc["python"])
    assert doc["cuda"] is None and doc["runtime"] == "charliecloud" and doc["offers"] == ["jupyterlab"]
    assert doc["digest"] == directory_digest(str(IMAGE))


def test_readable_by_every_user_writable_by_root_only(doc):
    assert IMAGE.stat().st_uid == 0
    bad = []
    for dirpath, dirnames, filenames in os.walk(IMAGE):
        for name in dirnames + filenames:
            st = os.lstat(os.path.join(dirpath, name))
            if stat.S_ISLNK(st.st_mode):
                continue
            if st.st_uid != 0 or st.st_mode & (stat.S_IWGRP | stat.S_IWOTH) and not stat.S_ISVTX & st.st_mode:
                bad.append(os.path.join(dirpath, name))
            elif not st.st_mode & stat.S_IROTH or stat.S_ISDIR(st.st_mode) and not st.st_mode & stat.S_IXOTH:
                bad.append(os.path.join(dirpath, name))
    assert bad == [], bad[:10]
    assert os.stat(IMAGE / "tmp").st_mode & 0o7777 == 0o1777
    assert subprocess.run(["sudo", "-u", "alice", "touch", str(IMAGE / "etc" / "x")], capture_output=True).returncode != 0


def test_starts_as_alice_with_debians_python_and_the_session_venv(doc):
    done = alice_in_image(
        "python3", "-c", "import numpy, sklearn, platform; print(platform.python_version(), numpy.__file__, sklearn.__file__)"
    )
    assert done.returncode == 0, done.stderr
    version, numpy_file, sklearn_file = done.stdout.split()
    assert version == doc["python"]
    assert numpy_file.startswith("/usr/lib/python3/dist-packages/")  # Debian's packages, not PyPI's
    assert sklearn_file.startswith("/usr/lib/python3/dist-packages/")
    pins = dict(
        line.strip().split("==", 1)
        for line in (REPO / "hub" / "requirements.txt").read_text().splitlines()
        if "==" in line and not line.startswith("#")
    )
    done = alice_in_image(
        "/opt/jupyter/bin/python",
        "-c",
        "import jupyterhub, jupyterlab, batchspawner; print(jupyterhub.__version__, jupyterlab.__version__)",
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == [pins["jupyterhub"].split(";")[0].strip(), pins["jupyterlab"].split(";")[0].strip()]
    for server in ("batchspawner-singleuser", "jupyterhub-singleuser", "jupyter-lab"):
        assert (IMAGE / "opt" / "jupyter" / "bin" / server).is_file(), server
    # the same single-user server as the hub's own venv: the portal's activity extension (the idle limit) is on
    done = alice_in_image("/opt/jupyter/bin/jupyter", "server", "extension", "list")
    assert done.returncode == 0, done.stderr
    listing = done.stdout + done.stderr
    assert "gpuportal_session" in listing and "enabled" in listing, listing


def test_mount_points_of_the_portals_binds(doc):
    for path in ("home", "tmp", "srv/gpuportal/envs", "opt/gpuportal/tools/bin", "etc/hosts", "etc/resolv.conf"):
        assert (IMAGE / path).exists(), path


def test_second_run_is_up_to_date_in_seconds(doc):
    t0 = time.monotonic()
    done = subprocess.run(["bash", str(REPO / "scripts" / "build_image.sh")], capture_output=True, text=True)
    took = time.monotonic() - t0
    assert done.returncode == 0, done.stderr
    assert "image debian12-sklearn is up to date" in done.stdout
    assert took < 5, took
    assert json.loads(JSON.read_text())["digest"] == doc["digest"]


def test_site_ca_certificates_are_in_the_images_store(doc):
    bundle = (IMAGE / "etc" / "ssl" / "certs" / "ca-certificates.crt").read_text()
    site = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    for cert in site:
        body = "".join(line for line in cert.read_text().splitlines() if not line.startswith("-----"))
        assert body and body in bundle.replace("\n", ""), cert
