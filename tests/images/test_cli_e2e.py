"""The CLI and images end to end: the installed ``gpuportal`` against the live portal and the real
cluster1. ``gpuportal images`` lists the demo image with what the check (run here, as the service
user through the gateway) saw; ``submit --image`` of an unknown image is refused naming the field;
``submit --image debian12-sklearn`` runs the profile's command inside the image as alice: the log
names the image and shows the image's /etc/os-release, ch-run's ``CH_RUNNING`` mark and a working
``import sklearn``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from api.tokens import token_create
from images.availability import image_probe
from images.models import Image
from tests.e2e.test_batch_job_browser import poller  # noqa: F401  (fixture: the snapshot poller in a thread)

pytestmark = [pytest.mark.integration, pytest.mark.e2e]

GPUPORTAL = str(Path(sys.executable).with_name("gpuportal"))
DEMO_JSON = Path("/srv/gpuportal/images/debian12-sklearn.json")
PROFILE = """version: 1
name: in-the-image
resources:
  partition: train
  gpus_per_node: 0
  cpus: 1
  memory: 1G
  time_limit: "00:05:00"
run:
  command: cat /etc/os-release && echo "inside=$CH_RUNNING" && python3 -c "import sklearn; print('sklearn', sklearn.__version__)"
  requeue: false
"""


@pytest.fixture
def demo_image(transactional_db, clean_cache):
    """The demo image registered as make dev registers it, and checked on cluster1 as the beat does."""
    if not DEMO_JSON.exists():
        pytest.fail("The demo image is not built: run scripts/build_image.sh (make dev and scripts/test.sh do).")
    from images.services import image_register

    image, _ = image_register(doc={**json.loads(DEMO_JSON.read_text()), "clusters": ["cluster1"]})
    state = image_probe(image, "cluster1")
    assert state.available, state.reason
    return Image.objects.get(pk=image.pk)


@pytest.fixture
def cli(live_server, demo_image, django_user_model, tmp_path):
    user = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    _, raw = token_create(user=user, name="cli-images", scopes=["read", "jobs"], days=1)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUPORTAL_")}
    env.update(GPUPORTAL_URL=live_server.url, GPUPORTAL_TOKEN=raw, NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")

    def run(*args: str, timeout: float = 60) -> subprocess.CompletedProcess:
        return subprocess.run([GPUPORTAL, *args], env=env, capture_output=True, text=True, timeout=timeout, cwd=tmp_path)

    (tmp_path / "image.yaml").write_text(PROFILE)
    return run


def test_images_lists_the_demo_image_and_submit_runs_in_it(cli, demo_image, poller):
    listed = cli("images")
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if line.startswith("debian12-sklearn"))
    assert "Debian GNU/Linux 12 (bookworm)" in row and "jupyterlab" in row and "cluster1 ok" in row
    assert "--image none: the node's own system" in listed.stdout

    refused = cli("submit", "image.yaml", "--image", "ubuntu")
    assert refused.returncode != 0 and "image" in refused.stderr and "There is no image called 'ubuntu'" in refused.stderr

    submitted = cli("--json", "submit", "image.yaml", "--image", "debian12-sklearn")
    assert submitted.returncode == 0, (submitted.stdout, submitted.stderr)
    job = json.loads(submitted.stdout)
    assert (job["image"], job["image_digest"]) == ("debian12-sklearn", demo_image.digest) and job["id"], job
    try:
        logs = cli("logs", "-f", "--interval", "1", str(job["id"]), timeout=240)
        assert logs.returncode == 0, (logs.stdout[-2000:], logs.stderr[-2000:])
        assert f"portal: image debian12-sklearn ({demo_image.digest}) at {demo_image.path}, run by charliecloud" in logs.stdout
        assert 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"' in logs.stdout
        assert "sklearn 1." in logs.stdout
        # The node's own Debian 12 has scikit-learn too (cluster/up.sh installs it for the bare-node
        # examples), so what shows the command ran in the image is ch-run's mark, set only inside it.
        assert "inside=Weird Al Yankovic" in logs.stdout
        assert "CH_RUNNING" not in os.environ
        shown = cli("show", str(job["id"]))
        assert "debian12-sklearn" in shown.stdout and "environment" in shown.stdout
    finally:
        cli("cancel", str(job["id"]))
