"""Images on the real cluster1: the availability check through the gateway as the service
user; a form job in the demo image runs as alice; a job whose image is removed before it starts
fails fast with one sentence (log and page); another user's private image directory is unreadable
through the portal and refused; shell code in an image path runs nowhere."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from images.availability import image_probe, image_state
from images.models import Image
from images.services import image_register
from images.tasks import images_availability_task, images_cluster_check_task
from jobs.models import IMAGE_GONE_EXIT, Job, JobOrigin
from jobs.reads.logs import job_log_tail
from jobs.submit.policy import JobRequest
from jobs.submit.submit import job_check
from jobs.worker import send
from jobs.worker.services import snapshot_refresh
from portal.refusals import Refused
from slurm import get_gateway
from slurm.states import JobState
from tests.waiting import wait_for_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db]

DEMO_JSON = Path("/srv/gpuportal/images/debian12-sklearn.json")
IMAGES_DIR = Path("/srv/gpuportal/images")
UNREADABLE = "it is not there, or it lies in a directory the portal's service user cannot read"


@pytest.fixture
def demo(clean_cache, monkeypatch):
    """The demo image registered (cluster1 only) and checked there, as make dev and the beat do."""
    monkeypatch.setattr("images.services._probe_on_commit", lambda image: None)
    if not DEMO_JSON.exists():
        pytest.fail("The demo image is not built: run scripts/build_image.sh (make dev and scripts/test.sh do).")
    image, _ = image_register(doc={**json.loads(DEMO_JSON.read_text()), "clusters": ["cluster1"]})
    assert image_probe(image, "cluster1").available
    return image


@pytest.fixture
def people(django_user_model):
    return {n: django_user_model.objects.create(username=n, slurm_accounts=[t]) for n, t in (("alice", "vision"), ("bob", "nlp"))}


@pytest.fixture
def policy(clean_cache):
    snapshot = snapshot_refresh(cluster="cluster1")
    assert snapshot is not None and not snapshot.error
    return snapshot


def wait(job: Job, states, timeout: float = 120) -> Job:
    """The job once it is in one of ``states``, as a poll of its cluster shows it (tests.waiting.wait_for_job)."""
    return wait_for_job(job, states, timeout=timeout)


def form_post(client, user, image: str, script: str):
    client.force_login(user)
    return client.post(
        "/jobs/new/",
        {
            "cluster": "cluster1", "name": "in-the-image", "account": user.slurm_accounts[0], "partition": "train", "image": image,
            "gpu_type": "", "gpu_count": "0", "cpus": "1", "memory_gb": "1G", "time_limit": "5", "requeue": "", "workdir": "", "script": script,
        },
    )  # fmt: skip


def mine() -> Job:
    """The job this test submitted through the form (the poller also makes rows of other users' jobs)."""
    return Job.objects.get(origin=JobOrigin.PORTAL, name="in-the-image")


def cancel(job: Job) -> None:
    job.refresh_from_db()
    if job.slurm_job_id and not job.is_final:
        subprocess.run(["scancel", str(job.slurm_job_id)], capture_output=True)


def test_the_beat_task_checks_every_image_on_its_clusters(demo, monkeypatch):
    missing = Image.objects.create(name="missing", path=f"/srv/gpuportal/images/missing-{uuid.uuid4().hex}")
    assert images_availability_task() == ["cluster1", "cluster2"]  # one check per cluster, eager here
    assert images_cluster_check_task("cluster1") == {"debian12-sklearn": True, "missing": False}
    assert images_cluster_check_task("cluster2") == {"missing": False}  # the demo image is cluster1's only
    assert not image_state(demo, "cluster2").checked
    state = image_state(missing, "cluster1")
    assert state.checked and state.reason == UNREADABLE


def test_a_form_job_in_the_demo_image_runs_as_alice(client, demo, people, policy, django_capture_on_commit_callbacks):
    script = 'id -un\ncat /etc/os-release\necho "inside=$CH_RUNNING"\npython3 -c \'import sklearn; print("sklearn", sklearn.__version__)\'\n'
    with django_capture_on_commit_callbacks(execute=True):
        response = form_post(client, people["alice"], "debian12-sklearn", script)
    assert response.status_code == 302, response.content.decode()[-3000:]
    job = mine()
    try:
        assert (job.image_name, job.image_digest) == ("debian12-sklearn", demo.digest) and job.slurm_job_id, job.submit_error
        done = wait(job, {JobState.COMPLETED, JobState.FAILED})
        out = job_log_tail(done, "out").text
        assert (done.state, done.exit_code) == (JobState.COMPLETED, 0), (out, job_log_tail(done, "err").text)
        lines = out.splitlines()
        assert lines[0] == f"portal: image debian12-sklearn ({demo.digest}) at {demo.path}, run by charliecloud"
        assert lines[1] == "portal: environment: the image debian12-sklearn's own packages (no virtual environment)"
        assert lines[2] == "alice"
        assert 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"' in out and "sklearn 1." in out
        # The node is Debian 12 with scikit-learn too: ch-run's mark shows the script ran in the image.
        assert "inside=Weird Al Yankovic" in out
        page = client.get(f"/jobs/{job.key}/").content.decode()
        assert 'data-testid="job-image"><code>debian12-sklearn</code>' in page
    finally:
        cancel(job)


def test_an_image_removed_before_the_job_starts_fails_fast_with_one_sentence(
    client, demo, people, policy, monkeypatch, django_capture_on_commit_callbacks
):
    copy = IMAGES_DIR / f"it-copy-{uuid.uuid4().hex[:8]}"
    subprocess.run(["cp", "-al", str(demo.path), str(copy)], check=True)  # hard links: instant, the demo untouched
    try:
        image = Image.objects.create(name=copy.name, path=str(copy), digest=demo.digest, clusters=["cluster1"])
        assert image_probe(image, "cluster1").available
        # The job is sent held (sbatch --hold), so the image can go before it starts.
        render = send.render_batch_script
        monkeypatch.setattr(
            send, "render_batch_script", lambda job, **kw: render(job, **kw).replace("\n", "\n#SBATCH --hold\n", 1)
        )
        with django_capture_on_commit_callbacks(execute=True):
            assert form_post(client, people["alice"], copy.name, "echo should-not-run\n").status_code == 302
        job = mine()
        assert job.slurm_job_id, job.submit_error
        shutil.rmtree(copy)
        get_gateway("cluster1").run(["scontrol", "release", str(job.slurm_job_id)], as_user="alice")
        done = wait(job, {JobState.COMPLETED, JobState.FAILED})
        sentence = f"The image {copy.name} ({copy}) is no longer on the cluster: ask your admins or choose another image"
        out, err = job_log_tail(done, "out").text, job_log_tail(done, "err").text
        assert (done.state, done.exit_code) == (JobState.FAILED, IMAGE_GONE_EXIT), (out, err)
        assert sentence in out and sentence in err and "should-not-run" not in out
        assert err.splitlines()[0] == sentence and len(err.splitlines()) == 2  # the sentence, then ch-run's one line
        page = client.get(f"/jobs/{job.key}/").content.decode()
        assert f'data-testid="end-hint">{sentence}' in page
    finally:
        shutil.rmtree(copy, ignore_errors=True)
        for job in Job.objects.filter(origin=JobOrigin.PORTAL):
            cancel(job)


def test_another_users_private_image_directory_is_unreadable_through_the_portal(demo, people, policy):
    private = Path(f"/home/bob/private-images-{uuid.uuid4().hex[:8]}")
    private.mkdir(mode=0o700)
    try:
        (private / "img").mkdir()
        (private / "img" / "etc").mkdir()
        for path in (private, private / "img", private / "img" / "etc"):
            shutil.chown(path, "bob", "bob")
        os.chmod(private, 0o700)
        image = Image.objects.create(name="bobs-image", path=str(private / "img"), clusters=["cluster1"])
        state = image_probe(image, "cluster1")
        assert (state.available, state.reason) == (False, UNREADABLE)
        for who in ("bob", "alice"):  # refused for its owner too: the portal cannot vouch for it
            user = people[who]
            request = JobRequest(
                name="x",
                partition="train",
                gpu_type="",
                gpu_count=0,
                cpus=1,
                memory_mb=512,
                time_limit_min=5,
                script="true\n",
                account=user.slurm_accounts[0],
                cluster="cluster1",
                image="bobs-image",
            )
            with pytest.raises(Refused) as caught:
                job_check(user=user, request=request)
            [problem] = caught.value.problems
            assert problem.field == "image" and problem.message.startswith(
                f"The image bobs-image ({private}/img) cannot be used on cluster cluster1: {UNREADABLE}."
            )
        assert not Job.objects.filter(origin=JobOrigin.PORTAL).exists()
    finally:
        shutil.rmtree(private, ignore_errors=True)


def test_shell_code_in_an_image_path_runs_nowhere(client, demo, people, policy, monkeypatch, django_capture_on_commit_callbacks):
    marker = Path(f"/tmp/pwned-{uuid.uuid4().hex[:8]}")
    path = f"/srv/gpuportal/images/x$(touch {marker});`touch {marker}`;touch {marker}"
    image = Image.objects.create(name="hostile", path=path, clusters=["cluster1"])
    state = image_probe(image, "cluster1")  # through the gateway (SSH) as the service user
    assert (state.available, state.reason) == (False, UNREADABLE) and not marker.exists()
    # Say the check found it, so the path reaches the batch script and the node's shell too.
    from images.availability import image_state_store

    image_state_store(image, "cluster1", available=True)
    with django_capture_on_commit_callbacks(execute=True):
        assert form_post(client, people["alice"], "hostile", "echo should-not-run\n").status_code == 302
    job = mine()
    try:
        done = wait(job, {JobState.COMPLETED, JobState.FAILED})
        assert (done.state, done.exit_code) == (JobState.FAILED, IMAGE_GONE_EXIT)
        assert f"The image hostile ({path}) is no longer on the cluster" in job_log_tail(done, "err").text
        assert not marker.exists()
    finally:
        cancel(job)
        marker.unlink(missing_ok=True)
