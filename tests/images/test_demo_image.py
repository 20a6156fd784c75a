"""The demo image scripts/build_image.sh made, as it lies in the shared image directory: its
JSON (what image_register reads) matches the directory, including a digest recomputed here; every user can read it
and none but root can write it; it starts as alice with ch-run and holds Debian 12's Python with numpy, scipy and
sklearn at the pinned versions, and the session venv at /opt/jupyter with the hub's own jupyterhub version and the
portal's session extension; no compiler and nothing a rebuild writes differently (time-stamped byte code, a build
time); the mount points the portal's binds need are there; a second run of the script does nothing and says so."""

from __future__ import annotations

import json
import os
import re
import stat
import subprocess
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


def _pinned(path: Path) -> dict[str, str]:
    """``{name: version}`` of a requirements file's ``name==version`` lines."""
    return {
        m.group(1).lower(): m.group(2)
        for line in path.read_text().splitlines()
        if (m := re.match(r"([A-Za-z0-9_.-]+)==([^ ;]+)", line))
    }


def test_starts_as_alice_with_debians_python_and_the_session_venv(doc):
    done = alice_in_image(
        "python3",
        "-c",
        "import numpy, scipy, sklearn, platform; print(platform.python_version(), numpy.__version__, scipy.__version__,"
        " sklearn.__version__, sklearn.__file__)",
    )
    assert done.returncode == 0, done.stderr
    version, numpy_version, scipy_version, sklearn_version, sklearn_file = done.stdout.split()
    assert version == doc["python"]
    pins = _pinned(REPO / "scripts" / "image" / "python-requirements.txt")
    assert (numpy_version, scipy_version, sklearn_version) == (pins["numpy"], pins["scipy"], pins["scikit-learn"])
    assert sklearn_file.startswith("/usr/local/lib/python3.11/dist-packages/")  # beside dpkg's, not in them
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


def test_second_run_is_up_to_date(doc):
    done = subprocess.run(["bash", str(REPO / "scripts" / "build_image.sh")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "image debian12-sklearn is up to date" in done.stdout
    assert json.loads(JSON.read_text())["digest"] == doc["digest"]


def test_no_compiler_and_no_recommended_packages(doc):
    """Debian's python3-scipy brought gcc, g++ and the Boost headers (1.3 GB image); they are not there."""
    done = subprocess.run(
        ["chroot", str(IMAGE), "dpkg-query", "-W", "-f", "${Package}\\n"], capture_output=True, text=True, check=True
    )
    installed = set(done.stdout.split())
    assert installed and not installed & {"gcc", "gcc-12", "g++", "g++-12", "cpp", "python3-pythran", "libboost1.74-dev"}
    assert not (IMAGE / "usr" / "bin" / "gcc").exists()


def test_nothing_a_rebuild_writes_differently(doc):
    """The sources of a new digest on every rebuild are gone: byte code that embeds its source's time
    (a .pyc whose flags word is 0; hash-based ones have bit 0 set), the build time in /etc/portal-image,
    the day of the last password change other than the script's fixed one, logs."""
    timestamped = []
    for root in ("usr/lib/python3.11", "usr/local/lib/python3.11/dist-packages", "opt/jupyter/lib/python3.11/site-packages"):
        for pyc in (IMAGE / root).rglob("*.pyc"):
            with open(pyc, "rb") as f:
                if int.from_bytes(f.read(8)[4:8], "little") & 1 == 0:
                    timestamped.append(str(pyc))
    assert timestamped == [], timestamped[:5]
    assert (IMAGE / "usr/local/lib/python3.11/dist-packages/sklearn/__pycache__").is_dir()  # compiled, not left out
    marker = (IMAGE / "etc" / "portal-image").read_text()
    assert "built=" not in marker and "inputs=" in marker
    days = {line.split(":")[2] for line in (IMAGE / "etc" / "shadow").read_text().splitlines() if line}
    assert days == {str(1767225600 // 86400)}, days
    assert [p for p in (IMAGE / "var" / "log").rglob("*") if p.is_file()] == []


def test_site_ca_certificates_are_in_the_images_store(doc):
    bundle = (IMAGE / "etc" / "ssl" / "certs" / "ca-certificates.crt").read_text()
    site = sorted(Path("/usr/local/share/ca-certificates").glob("*.crt"))
    for cert in site:
        body = "".join(line for line in cert.read_text().splitlines() if not line.startswith("-----"))
        assert body and body in bundle.replace("\n", ""), cert
