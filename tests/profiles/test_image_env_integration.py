"""The example training job in the demo image, from a profile with ``image: debian12-sklearn``, on
the real cluster: the whole profile script runs inside the image (jobs/worker/batch.py,
Charliecloud), its environment is a venv built there on top of the image's Python (the image's
scikit-learn visible under it), in alice's area of the real cache, keyed by hash(image digest,
spec); the log says which image (name, digest) and which environment (its hash); a second run
reuses the cached venv. Needs the demo image (scripts/build_image.sh) on cluster1."""

from __future__ import annotations

import hashlib
import json
import platform
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
from django.conf import settings

from jobs.reads.logs import job_log_tail
from jobs.worker.batch import env_cache_host_check
from profiles.envscript import EnvImage, EnvSite, env_spec_json
from profiles.schema import parse_profile
from profiles.services import profile_check, profile_run
from slurm.states import JobState
from tests.jobs.test_jobs_integration import policy, wait  # noqa: F401  (fixture)

REPO = Path(__file__).resolve().parents[2]
DEMO_JSON = Path("/srv/gpuportal/images/debian12-sklearn.json")

pytestmark = [pytest.mark.integration, pytest.mark.django_db]


@pytest.fixture
def alice(django_user_model, clean_cache):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


@pytest.fixture
def demo_image(clean_cache):
    """The demo image registered from its JSON (as make dev does) and looked at on cluster1 through
    the gateway as the service user (the availability task's probe)."""
    if not DEMO_JSON.exists():
        pytest.skip(f"no demo image ({DEMO_JSON}): scripts/build_image.sh builds it")
    from images.availability import image_probe
    from images.services import image_register

    image, _ = image_register(doc=json.loads(DEMO_JSON.read_text()))
    state = image_probe(image, "cluster1")
    assert state.available, state.reason
    return image


@pytest.fixture
def project():
    """A project directory in alice's home with the example's training script (removed afterwards)."""
    home = Path("/home/alice")
    rel = f"gpuportal-tests/image-env-{uuid.uuid4().hex[:8]}"
    path = home / rel
    path.mkdir(parents=True)
    shutil.copy(REPO / "examples" / "train_digits.py", path / "train_digits.py")
    subprocess.run(["chown", "-R", "alice:alice", str(home / "gpuportal-tests")], check=True)
    yield rel
    shutil.rmtree(path, ignore_errors=True)


def example_in_image(workdir: str) -> str:
    """examples/train_digits.yaml with ``image: debian12-sklearn``, in ``workdir``, 2 epochs."""
    text = (REPO / "examples" / "train_digits.yaml").read_text()
    text = text.replace("name: train-digits\n", "name: train-digits-in-image\nimage: debian12-sklearn\n")
    text = text.replace("workdir: gpuportal-examples/digits", f"workdir: {workdir}")
    text = text.replace("--epochs 8", "--epochs 2")
    assert "image: debian12-sklearn" in text and workdir in text and "--epochs 2" in text
    return text


def remove_entry(entry: Path) -> None:
    if entry.exists():
        subprocess.run(["chmod", "-R", "u+w", str(entry)], check=False)
        shutil.rmtree(entry, ignore_errors=True)


def test_the_example_trains_in_the_image_with_a_venv_on_its_python_reused_by_the_next_run(
    alice, policy, demo_image, project, django_capture_on_commit_callbacks
):
    text = example_in_image(project)
    spec, checked = profile_check(user=alice, text=text)
    assert spec.image == "debian12-sklearn" and checked.image is not None and checked.image.name == "debian12-sklearn"
    # The cache key: hash(image digest, spec) as the job works it out (profiles/portal_env.sh).
    env_json = env_spec_json(parse_profile(text).environment, EnvSite.from_settings(), EnvImage.of(demo_image))
    assert json.loads(env_json)["image"] == demo_image.digest
    hash_ = hashlib.sha256(f"{env_json}\n{platform.machine()}\n".encode()).hexdigest()[:16]
    entry = Path(settings.PORTAL_ENV_CACHE_DIR) / "alice" / hash_
    remove_entry(entry)  # a run of this test before (same digest, same spec) would make this a hit
    try:
        jobs = []
        for _ in range(2):
            with django_capture_on_commit_callbacks(execute=True):
                job = profile_run(user=alice, text=text)
            job.refresh_from_db()
            assert job.slurm_job_id, job.submit_error
            jobs.append(wait(job, {JobState.COMPLETED, JobState.FAILED}, timeout=400))
        logs = [job_log_tail(j, "out").text for j in jobs]
        errs = [job_log_tail(j, "err").text for j in jobs]
        assert [j.state for j in jobs] == [JobState.COMPLETED, JobState.COMPLETED], (logs, errs)
        for job, out in zip(jobs, logs, strict=True):
            assert job.image_name == "debian12-sklearn" and job.image_digest == demo_image.digest
            # Which image: the batch script's line and the environment's.
            assert f"debian12-sklearn ({demo_image.digest})" in out, out
            assert f"portal-env: in image debian12-sklearn ({demo_image.digest})" in out, out
            assert re.search(r"final val_acc=0\.\d{3}", out), out
        first, second = logs
        # Which environment: built once, in alice's area, on the image's Python 3.11 ...
        assert (
            f"portal-env: cache miss {hash_}; building it (python 3.11 of image debian12-sklearn, 2 packages) in {entry}" in first
        )
        assert re.search(rf"portal-env: built {hash_} in [0-9.]+ s", first), first
        # ... and the second run takes it from the cache.
        assert f"portal-env: cache hit {hash_} (python 3.11 of image debian12-sklearn, 2 packages) in {entry}" in second, second
        assert "building" not in "\n".join(x for x in second.splitlines() if x.startswith("portal-env:"))
        # The venv is the image's Python's: its pyvenv.cfg names /usr/bin (the image's), with its site packages.
        cfg = (entry / "pyvenv.cfg").read_text()
        assert "include-system-site-packages = true" in cfg and re.search(r"^version_info = 3\.11\.", cfg, re.M), cfg
        assert entry.owner() == "alice" and (entry / ".portal-manifest").exists()
    finally:
        remove_entry(entry)


IMAGE_ONLY = """version: 1
name: image-python-{tag}
image: debian12-sklearn
resources: {{partition: small, cpus: 1, memory: 500M, time_limit: 10}}
run:
  command: |
    grep PRETTY_NAME /etc/os-release
    python -c 'import sklearn, sys; print("sklearn", sklearn.__version__, "from", sklearn.__file__, "in", sys.prefix)'
environment:
  python: "3.11"
"""


def test_the_venv_sees_the_images_own_packages(alice, policy, demo_image, django_capture_on_commit_callbacks):
    """No packages to install: the venv is made on the image's Python (no package index needed) and
    the image's scikit-learn (in /usr/local/lib/python3.11/dist-packages, on the image Python's path) is imported
    through it."""
    text = IMAGE_ONLY.format(tag=uuid.uuid4().hex[:6])
    env_json = env_spec_json(parse_profile(text).environment, EnvSite.from_settings(), EnvImage.of(demo_image))
    hash_ = hashlib.sha256(f"{env_json}\n{platform.machine()}\n".encode()).hexdigest()[:16]
    entry = Path(settings.PORTAL_ENV_CACHE_DIR) / "alice" / hash_
    remove_entry(entry)
    try:
        with django_capture_on_commit_callbacks(execute=True):
            job = profile_run(user=alice, text=text)
        job.refresh_from_db()
        assert job.slurm_job_id, job.submit_error
        done = wait(job, {JobState.COMPLETED, JobState.FAILED}, timeout=240)
        out = job_log_tail(done, "out").text
        assert done.state == JobState.COMPLETED, (out, job_log_tail(done, "err").text)
        assert 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"' in out, out
        assert re.search(
            rf"^sklearn \S+ from /usr/local/lib/python3.11/dist-packages/sklearn/__init__\.py in {entry}$", out, re.M
        ), out
        assert f"portal-env: cache miss {hash_}; building it (python 3.11 of image debian12-sklearn, 0 packages)" in out, out
    finally:
        remove_entry(entry)


def test_inside_the_container_an_area_of_another_user_is_still_refused(demo_image, tmp_path):
    """In Charliecloud's user namespace every uid but alice's shows as the overflow uid (nobody):
    root's cache root is accepted as such, but an area (or entry) that is not alice's own, here bob's
    (also shown as nobody), is refused and the job builds a private venv. Run with ch-run as alice
    after the batch script's host check, the cache bound at the image's mount point PORTAL_ENV_CACHE_DIR."""
    from profiles.envscript import render_profile_script

    cache = Path(settings.PORTAL_ENV_CACHE_DIR).parent / f"envs-test-{uuid.uuid4().hex[:8]}"
    cache.mkdir(mode=0o755)
    script = Path("/home/alice/gpuportal-tests") / f"userns-{uuid.uuid4().hex[:8]}.sh"
    site = EnvSite.from_settings()
    text = IMAGE_ONLY.format(tag="userns").replace("grep PRETTY_NAME /etc/os-release\n", "")
    script.write_text(render_profile_script(parse_profile(text), site=site, image=EnvImage.of(demo_image)))
    subprocess.run(["chown", "alice:alice", str(script)], check=True)

    def run_in_image() -> str:
        argv = ["ch-run", "--home", "-b", f"{cache}:{settings.PORTAL_ENV_CACHE_DIR}"]
        argv += ["-b", f"{Path(settings.PORTAL_ENV_UV).parent}:{Path(settings.PORTAL_ENV_UV).parent}", demo_image.path]
        # After the batch script's check of the cache on the host (jobs/worker/batch.py), as in a job.
        host_check = "\n".join([*env_cache_host_check(str(cache), settings.PORTAL_ENV_CACHE_DIR), 'exec "$@"'])
        argv = ["runuser", "-u", "alice", "--", "bash", "-c", host_check, "bash", *argv]
        done = subprocess.run([*argv, "--", "/bin/bash", str(script)], capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    try:
        area = cache / "alice"
        area.mkdir(mode=0o755)
        subprocess.run(["chown", "bob:bob", str(area)], check=True)
        out = run_in_image()
        inside = f"{settings.PORTAL_ENV_CACHE_DIR}/alice"
        assert f"portal-env: refused the cache area {inside}: it belongs to nobody, not to you" in out, out
        assert "portal-env: building a private environment" in out and "sklearn" in out, out
        assert list(area.iterdir()) == []  # nothing written into bob's directory
        # The same cache with alice's own area (as cluster/env_cache.sh makes it): the root, shown as
        # nobody, is accepted (the host checked it) and the venv is cached there.
        subprocess.run(["chown", "alice:alice", str(area)], check=True)
        out = run_in_image()
        assert "portal-env: cache miss" in out and f"in {inside}/" in out, out
        assert "private" not in out, out
        assert run_in_image().count("portal-env: cache hit") == 1
    finally:
        subprocess.run(["chmod", "-R", "u+w", str(cache)], check=False)
        shutil.rmtree(cache, ignore_errors=True)
        script.unlink(missing_ok=True)
