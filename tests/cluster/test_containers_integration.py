"""A profile with ``image: debian12-sklearn`` on each real local cluster, through the portal's own
submit path (profile_check, job_create, the gateway's sbatch, the batch script's ch-run): the job
runs inside the demo image, shown by a file only the image has (``/etc/portal-image``, written by
scripts/build_image.sh), its ``/etc/os-release`` (Debian 12; cluster2's root is Debian 13) and
ch-run's own mark in the environment. The image is checked on each cluster as the availability
task does (``test -r`` as the service user through that cluster's sshd)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from images.availability import image_probe
from images.services import image_register
from jobs.reads.logs import job_log_tail
from jobs.worker.services import snapshot_refresh
from profiles.services import profile_run
from slurm.states import JobState
from tests.waiting import wait_for_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(300)]

DEMO_JSON = Path("/srv/gpuportal/images/debian12-sklearn.json")

PROFILE = """\
version: 1
name: in-image-{on}
cluster: {on}
image: debian12-sklearn
resources:
  partition: small
  gpus_per_node: 0
  cpus: 1
  memory: 500M
  time_limit: "00:05:00"
run:
  command: cat /etc/portal-image /etc/os-release; echo "ch-run=$CH_RUNNING"
"""


@pytest.fixture
def alice(django_user_model):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


@pytest.fixture
def demo(clean_cache, monkeypatch):
    """The demo image registered for every cluster, as its JSON says (no ``clusters``)."""
    monkeypatch.setattr("images.services._probe_on_commit", lambda image: None)
    if not DEMO_JSON.exists():
        pytest.fail("The demo image is not built: run scripts/build_image.sh (make dev and scripts/test.sh do).")
    image, _ = image_register(doc=json.loads(DEMO_JSON.read_text()))
    assert image.clusters == []
    return image


@pytest.mark.parametrize("on", ["cluster1", "cluster2"])
def test_a_profile_with_an_image_runs_inside_it(on, alice, demo, django_capture_on_commit_callbacks):
    snapshot = snapshot_refresh(cluster=on)
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    state = image_probe(demo, on)
    assert state.available, state.reason  # the image is readable there: the registry's path on that cluster
    with django_capture_on_commit_callbacks(execute=True):
        job = profile_run(user=alice, text=PROFILE.format(on=on))
    job.refresh_from_db()
    assert job.slurm_job_id and job.cluster == on and job.image_name == "debian12-sklearn", job.submit_error
    done = wait_for_job(job, {JobState.COMPLETED, JobState.FAILED}, timeout=120)
    out, err = job_log_tail(done, "out").text, job_log_tail(done, "err").text
    assert (done.state, done.exit_code) == (JobState.COMPLETED, 0), (out, err)
    assert f"portal: image debian12-sklearn ({demo.digest}) at {demo.path}, run by charliecloud" in out
    assert "name=debian12-sklearn\n" in out, out  # /etc/portal-image: only the image has it
    assert 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"' in out, out
    assert "ch-run=Weird Al Yankovic" in out, out
