"""Jobs in site images: job_check refuses a bad image with the others' problems, the row
keeps the image's name, path and digest, and the batch script runs the user's script inside the
image through the runtime's command, after a fail-fast check. The rendered script is run by a real
bash where no image is: the check fails with the sentence, and a path holding shell code runs none."""

from __future__ import annotations

import subprocess
import uuid
from pathlib import Path

import pytest

from images.availability import image_state_store
from images.models import Image
from jobs.models import IMAGE_GONE_EXIT, Job
from jobs.submit import submit
from jobs.submit.policy import JobRequest
from jobs.worker.batch import render_batch_script
from portal.refusals import Refused
from slurm.states import JobState
from tests.jobs.test_submit import KEY, alice, make_job, policy  # noqa: F401 - fixtures

GOLDEN = Path(__file__).parent / "golden"
JOBDIR = f"/home/alice/portal-jobs/{KEY}"


@pytest.fixture
def image(db, clean_cache):
    image = Image.objects.create(
        name="debian12-sklearn", path="/srv/gpuportal/images/debian12-sklearn", os="Debian GNU/Linux 12 (bookworm)",
        python_version="3.11", digest="sha256:" + "ab" * 32, offers=["jupyterlab"],
    )  # fmt: skip
    image_state_store(image, "cluster1", available=True)
    return image


def request_(**kw) -> JobRequest:
    base = dict(
        name="fit",
        partition="train",
        gpu_type="",
        gpu_count=0,
        cpus=1,
        memory_mb=1024,
        time_limit_min=10,
        script="python3 -c 'import sklearn'\n",
    )
    base.update(kw)
    return JobRequest(**base)


@pytest.mark.django_db
def test_the_checked_image_is_kept_on_the_job(alice, policy, image, django_capture_on_commit_callbacks):  # noqa: F811
    with django_capture_on_commit_callbacks():
        job = submit.job_create(checked=submit.job_check(user=alice, request=request_(image="debian12-sklearn"), policy=policy))
    job.refresh_from_db()
    assert (job.image_name, job.image_path, job.image_digest) == ("debian12-sklearn", image.path, image.digest)


@pytest.mark.django_db
def test_no_image_is_the_nodes_own_system(alice, policy, clean_cache, django_capture_on_commit_callbacks):  # noqa: F811
    with django_capture_on_commit_callbacks():
        job = submit.job_create(checked=submit.job_check(user=alice, request=request_(), policy=policy))
    assert job.image_name == "" and job.environment_text == "the node's own system, with its packages (no virtual environment)"


@pytest.mark.django_db
def test_a_bad_image_is_refused_with_the_other_problems(alice, policy, image):  # noqa: F811
    with pytest.raises(Refused) as caught:
        submit.job_check(user=alice, request=request_(image="ubuntu", account="nlp"), policy=policy)
    fields = {p.field: p.message for p in caught.value.problems}
    assert set(fields) == {"image", "account"}
    assert fields["image"].startswith("There is no image called 'ubuntu': choose one of debian12-sklearn")
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_an_image_missing_on_the_cluster_is_refused_before_submission(alice, policy, image):  # noqa: F811
    image_state_store(
        image,
        "cluster1",
        available=False,
        reason="it is not there, or it lies in a directory the portal's service user cannot read",
    )
    with pytest.raises(
        Refused, match=r"The image debian12-sklearn \(/srv/gpuportal/images/debian12-sklearn\) cannot be used on cluster cluster1"
    ):
        submit.job_check(user=alice, request=request_(image="debian12-sklearn"), policy=policy)


def image_job(alice, image, **kw) -> Job:  # noqa: F811
    fields = dict(
        workdir=JOBDIR, output_path=f"{JOBDIR}/slurm-%j.out", error_path=f"{JOBDIR}/slurm-%j.err",
        image_name=image.name, image_path=image.path, image_digest=image.digest, script="#!/bin/bash\ncat /etc/os-release\npython3 -c 'import sklearn'\n",
    )  # fmt: skip
    fields.update(kw)
    return make_job(alice, **fields)


@pytest.mark.django_db
def test_rendered_script_in_an_image_matches_golden_file(alice, image):  # noqa: F811
    script = render_batch_script(image_job(alice, image), home="/home/alice")
    assert script == (GOLDEN / "batch_script_image.sh").read_text()


@pytest.mark.django_db
def test_a_gone_image_fails_fast_with_one_sentence_and_shell_code_in_its_path_never_runs(alice, image, tmp_path):  # noqa: F811
    pwned = tmp_path / "pwned"
    image.path = f"/srv/gpuportal/images/x$(touch {pwned});`touch {pwned}`"
    job_dir = tmp_path / "job"
    job_dir.mkdir()
    job = image_job(
        alice,
        image,
        image_path=image.path,
        workdir=str(job_dir),
        output_path=f"{job_dir}/slurm.out",
        error_path=f"{job_dir}/slurm.err",
    )
    script = render_batch_script(job, home=str(tmp_path))
    done = subprocess.run(
        ["bash", "-c", script.split(": portal-job-script-begins", 1)[1].split("\n", 1)[1]],
        capture_output=True,
        text=True,
        cwd=job_dir,
    )
    assert done.returncode == IMAGE_GONE_EXIT
    sentence = f"The image debian12-sklearn ({image.path}) is no longer on the cluster: ask your admins or choose another image"
    assert sentence in done.stdout and sentence in done.stderr
    assert done.stdout.startswith(
        f"portal: image debian12-sklearn ({image.digest}) at {image.path}, run by charliecloud\nportal: environment: "
    )
    assert not pwned.exists()
    assert not (job_dir / "portal-script.sh").exists()  # nothing after the check ran


@pytest.mark.django_db
def test_the_job_page_shows_image_environment_and_the_gone_sentence(alice, image, client):  # noqa: F811
    job = image_job(alice, image, state=JobState.FAILED, exit_code=IMAGE_GONE_EXIT)
    client.force_login(alice)
    page = client.get(f"/jobs/{job.key}/").content.decode()
    assert 'data-testid="job-image"><code>debian12-sklearn</code>' in page
    assert "the image debian12-sklearn&#x27;s own packages (no virtual environment)" in page
    assert (
        "The image debian12-sklearn (/srv/gpuportal/images/debian12-sklearn) is no longer on the cluster: ask your admins or choose another image"
        in page
    )


@pytest.mark.django_db
def test_run_again_keeps_the_image(alice, image):  # noqa: F811
    from jobs.submit.rerun import run_again_initial, run_again_request

    job = image_job(alice, image, state=JobState.COMPLETED)
    assert run_again_request(job).image == "debian12-sklearn"
    assert run_again_initial(job)["image"] == "debian12-sklearn"
    assert "image" not in run_again_initial(image_job(alice, image, key=uuid.uuid4(), image_name=""))


@pytest.mark.django_db
def test_the_forms_image_choices(image, settings):
    from jobs.web.forms import image_choices

    Image.objects.create(
        name="cuda12", path="/srv/gpuportal/images/cuda12.sif", runtime="apptainer", partitions=["train"], cuda_version="12.4"
    )
    Image.objects.create(name="off", path="/srv/gpuportal/images/off", enabled=False)
    image_state_store(Image.objects.get(name="cuda12"), "cluster1", available=False, reason="it is not there")
    assert image_choices("cluster1") == [
        ("", "none: the node's own system"),
        ("cuda12", "cuda12 — CUDA 12.4 (partitions train) — not usable now"),
        ("debian12-sklearn", "debian12-sklearn — Debian GNU/Linux 12 (bookworm), Python 3.11"),
    ]
    settings.PORTAL_IMAGE_NONE_ALLOWED = False
    assert [value for value, _ in image_choices("cluster1")] == ["cuda12", "debian12-sklearn"]


@pytest.mark.django_db
def test_a_workdir_the_runtime_cannot_bind_is_refused_before_anything_is_sent(alice, policy, image):  # noqa: F811
    with pytest.raises(Refused) as caught:
        submit.job_check(user=alice, request=request_(image="debian12-sklearn", workdir="/scratch/run:1"), policy=policy)
    [problem] = caught.value.problems
    assert problem.field == "workdir" and problem.message.startswith(
        "This working directory cannot be used in the image debian12-sklearn: bind source '/scratch/run:1' holds ':'"
    )
    assert (
        submit.job_check(user=alice, request=request_(workdir="/scratch/run:1"), policy=policy).image is None
    )  # no image: no bind
    assert Job.objects.count() == 0


@pytest.mark.django_db
def test_a_profile_job_with_an_environment_checks_the_cache_on_the_host_before_the_container(alice, image, settings):  # noqa: F811
    """Inside, root's directories and other users' both show as nobody: the owners of the cache's
    directories are checked on the host, before ch-run (tests/runtimes/test_path_owners.py runs the lines)."""
    settings.PORTAL_ENV_CACHE_DIR = "/srv/gpu portal/envs/"
    job = image_job(alice, image, profile_spec={"environment": {"pip": []}})
    with_env = render_batch_script(job, home="/home/alice")
    host = with_env.split(": portal-job-script-begins", 1)[1]
    check = host.index("elif portal_env_path_ok '/srv/gpu portal/envs' \"$(id -u)\"; then")
    assert check < host.index("export PORTAL_ENV_HOST_CHECKED='/srv/gpu portal/envs'\n") < host.index("\nexec ch-run")
    assert host.index('export PORTAL_ENV_HOST_REFUSED="$PORTAL_ENV_WHY"') < host.index("cat > ")  # before the user's script
    job.profile_spec = {"name": "x"}  # a profile without an environment block builds nothing in the cache
    without = render_batch_script(job, home="/home/alice")
    assert "portal_env_path_ok" not in without and "PORTAL_ENV_HOST" not in without
