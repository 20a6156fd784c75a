"""Charliecloud on the real cluster1 (Slurm 22.05): a batch job submitted as alice through the portal's gateway
(ssh + the sudo rule) whose script is made of ``runtimes`` command lines runs ``ch-run`` on the demo image:
the image's /etc/os-release and ``import sklearn`` in the log, the job's fake GPUs (CUDA_VISIBLE_DEVICES and the
device files) the same inside as outside, alice's own uid inside, a file written to the job directory from
inside, a variable with shell metacharacters arriving literally, and the check command of a missing image
failing with ch-run's reason naming the path."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest

from runtimes import command_line, default_binds, runtime_get
from slurm import get_gateway
from tests.waiting import scontrol_show_job, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]

REPO = Path(__file__).resolve().parents[2]
IMAGES_DIR = Path(os.environ.get("PORTAL_IMAGES_DIR", "/srv/gpuportal/images"))
IMAGE = IMAGES_DIR / "debian12-sklearn"
ENV_CACHE = "/srv/gpuportal/envs"
ODD = "a b;$(id) `id` 'q' \"d\" $HOME"
FINAL = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY"}


@pytest.fixture
def image() -> Path:
    if not (IMAGE / "etc" / "os-release").is_file():
        pytest.fail(f"the demo image is not at {IMAGE}: build it with 'sudo bash scripts/build_image.sh'")
    return IMAGE


@pytest.fixture
def job_dir():
    path = Path("/home/alice/portal-jobs") / f"i1-ch-{uuid.uuid4().hex[:8]}"
    path.mkdir(parents=True)
    for p in (path.parent, path):
        shutil.chown(p, "alice", "alice")
    yield path
    shutil.rmtree(path, ignore_errors=True)


def wait_final(job_id: str, timeout: float = 120) -> str:
    """The job's final state in accounting, once it has one."""

    def state() -> str:
        done = subprocess.run(["sacct", "-X", "-n", "-P", "-o", "State", "-j", job_id], capture_output=True, text=True)
        return done.stdout.strip().split(" ")[0]

    def final() -> str:
        now = state()
        return now if now in FINAL else ""

    return wait_for(
        f"job {job_id} to end (sacct state in {sorted(FINAL)})",
        final,
        timeout=timeout,
        every=0.5,
        seen=lambda: f"sacct state {state()!r}\n{scontrol_show_job(job_id)}",
    )


def test_a_batch_job_runs_in_the_demo_image_with_its_gpus(image, job_dir):
    cc = runtime_get("charliecloud")
    binds = default_binds(job_dir=str(job_dir), home="/home/alice", env_cache=ENV_CACHE)

    def inside(*argv: str, **kw) -> str:
        return command_line(cc.exec_argv(str(image), list(argv), binds=binds, workdir=str(job_dir), **kw))

    missing = str(IMAGES_DIR / "gone; touch /tmp/pwned-i1")
    script = (
        "\n".join(
            [
                "#!/bin/bash",
                "set -u",
                command_line(cc.check_argv(str(image))) + " || { echo 'CHECK FAILED'; exit 3; }",
                "echo '--- os-release'",
                inside("cat", "/etc/os-release"),
                "echo '--- sklearn'",
                inside(
                    "python3", "-c", "import sklearn, numpy; print('sklearn', sklearn.__version__, 'numpy', numpy.__version__)"
                ),
                "echo '--- gpus'",
                'echo "outside=$CUDA_VISIBLE_DEVICES"',
                inside("/bin/sh", "-c", 'echo "inside=$CUDA_VISIBLE_DEVICES"; ls /dev/ | grep fakegpu | tr "\\n" " "; echo'),
                "echo '--- who'",
                inside("/bin/sh", "-c", "echo user=$(id -un) uid=$(id -u) pwd=$(pwd); echo hi > written-inside"),
                inside("python3", "-c", "import os; print('odd=' + repr(os.environ['ODD']))", env={"ODD": ODD}),
                "echo '--- missing'",
                command_line(cc.check_argv(missing)) + ' 2>&1; echo "missing_rc=$?"',
                "echo END",
            ]
        )
        + "\n"
    )
    out = job_dir / "out.txt"
    job_id = (
        get_gateway("cluster1")
        .run(
            [
                "sbatch",
                "--parsable",
                f"--chdir={job_dir}",
                f"--output={out}",
                "-p",
                "train",
                "--gres=gpu:a100:2",
                "-t",
                "5",
                "-J",
                "i1-charliecloud",
            ],
            as_user="alice",
            stdin=script,
        )
        .out.strip()
        .split(";")[0]
    )
    try:
        state = wait_final(job_id)
    finally:
        subprocess.run(["scancel", job_id], check=False)
    log = out.read_text()
    assert state == "COMPLETED", log
    assert 'PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"' in log
    pinned = re.search(r"^scikit-learn==(\S+)", (REPO / "scripts" / "image" / "python-requirements.txt").read_text(), re.M)
    assert f"sklearn {pinned.group(1)}" in log, log  # the image's, at the version its build pins
    outside = next(line for line in log.splitlines() if line.startswith("outside="))[len("outside=") :]
    inside_cvd = next(line for line in log.splitlines() if line.startswith("inside="))[len("inside=") :]
    assert outside and len(outside.split(",")) == 2 and inside_cvd == outside, log
    assert log.count("fakegpu") >= 2, log
    assert f"user=alice uid={int(subprocess.check_output(['id', '-u', 'alice']))} pwd={job_dir}" in log
    assert (job_dir / "written-inside").read_text() == "hi\n"
    assert (job_dir / "written-inside").owner() == "alice"
    assert f"odd={ODD!r}" in log
    assert "can't stat: /srv/gpuportal/images/gone" in log and "/srv/gpuportal/images/gone; touch /tmp/pwned-i1" in log, log
    assert "missing_rc=0" not in log and "missing_rc=" in log
    assert not Path("/tmp/pwned-i1").exists()
    assert log.rstrip().endswith("END")


def test_check_of_a_missing_image_fails_as_the_user(image):
    cc = runtime_get("charliecloud")
    done = subprocess.run(
        ["sudo", "-u", "alice", *cc.check_argv(str(IMAGES_DIR / "no-such-image"))],
        capture_output=True,
        text=True,
        cwd="/tmp",
    )
    assert done.returncode != 0
    assert "/srv/gpuportal/images/no-such-image" in done.stderr and "No such file or directory" in done.stderr
    ok = subprocess.run(["sudo", "-u", "alice", *cc.check_argv(str(image))], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
