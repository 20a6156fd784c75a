"""cluster2, the second local cluster (Slurm 24.11 in a Debian 13 root: cluster/cluster2/up.sh), on the
portal's own path: the SSH transport (paramiko, strict known_hosts) to the root's sshd on 127.0.0.1:2223 as
the service user, ``sudo -n -u alice`` the submit helper, and the job read back with the root's own
``squeue --json`` (Slurm 24.11, data_parser v0.0.42: job states are lists, numbers are ``{set, infinite,
number}`` objects). Needs ``cluster/up.sh`` to have started cluster2; fails (never skips) when it has not."""

from __future__ import annotations

import json
import os
import subprocess
import uuid

import pytest
from django.conf import settings

from slurm import SlurmGateway, SlurmUnreachable
from slurm.gateway import build_transport
from tests.waiting import scontrol_show_job, wait_for

pytestmark = pytest.mark.integration

ROOT = os.environ.get("CLUSTER2_ROOT", "/srv/cluster2")
PORT = int(os.environ.get("CLUSTER2_SSH_PORT", "2223"))
NUMBER_KEYS = {"set", "infinite", "number"}


def cluster2_transport(**overrides):
    """The portal's SSH transport from its settings, aimed at cluster2's sshd."""
    return build_transport({**settings.PORTAL_SLURM_GATEWAY, "ssh_port": PORT, "ssh_connect_timeout": 5.0, **overrides})


@pytest.fixture
def cluster2():
    gw = SlurmGateway(cluster2_transport(), command_timeout=30)
    yield gw
    gw.close()


def squeue_in_root(job_id: int) -> dict:
    """``squeue --json -t all -j <id>`` run inside cluster2's root (24.11 lists a finished job only with -t all)."""
    out = subprocess.run(
        ["env", "-i", "PATH=/usr/sbin:/usr/bin:/sbin:/bin", "chroot", ROOT, "squeue", "--json", "-t", "all", "-j", str(job_id)],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout
    return json.loads(out)


def submit(gw: SlurmGateway, user: str, options: list[str], script: str) -> tuple[int, str, str]:
    """Submit through the helper as ``user``: (job id, its comment, its output file)."""
    home = f"/home/{user}"
    outdir = f"{home}/gpuportal-tests"
    comment = f"portal:{uuid.uuid4()}"
    argv = [settings.PORTAL_SBATCH_HELPER, outdir, "--", "--parsable", f"--chdir={home}", f"--comment={comment}"]
    argv += [f"--output={outdir}/cluster2-%j.out", *options]
    out = gw.run(argv, as_user=user, stdin=script).out.strip()
    return int(out.split(";")[0]), comment, f"{outdir}/cluster2-{out.split(';')[0]}.out"


def wait_ended(job_id: int, timeout: float = 90) -> dict:
    """The job's squeue entry once its base state is a final one and its epilog is done: 24.11 lists
    a job whose script has ended but whose node is still cleaning up as e.g. ``["FAILED", "COMPLETING"]``
    (base state, then the COMPLETING flag) for a moment before ``["FAILED"]``."""
    states: list = []  # squeue's job_state at each look

    def ended():
        (job,) = squeue_in_root(job_id)["jobs"]
        states.append(job["job_state"])
        final = job["job_state"][0] in {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "OUT_OF_MEMORY", "NODE_FAIL"}
        return job if final and "COMPLETING" not in job["job_state"][1:] else None

    return wait_for(
        f"job {job_id} on cluster2 to end, its COMPLETING flag cleared",
        ended,
        timeout=timeout,
        every=1,
        seen=lambda: f"squeue job_state: {states[-1:]}\n{scontrol_show_job(job_id, cluster='cluster2')}",
    )


def test_alice_submits_a_gpu_job_over_ssh_and_squeue_reads_it_back_in_24_11_shapes(cluster2):
    script = '#!/bin/bash\necho "user=$(id -un) cluster=$SLURM_CLUSTER_NAME node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES"\n'
    job_id, comment, output = submit(cluster2, "alice", ["-p", "gpu", "--gres=gpu:h100:1", "-t", "2", "--mem=100M"], script)

    doc = squeue_in_root(job_id)
    assert doc["meta"]["plugin"]["data_parser"] == "data_parser/v0.0.42"
    assert doc["meta"]["slurm"]["version"]["major"] == "24" and doc["meta"]["slurm"]["version"]["minor"] == "11"
    assert doc["meta"]["slurm"]["cluster"] == "cluster2"
    (job,) = doc["jobs"]
    assert isinstance(job["job_state"], list) and job["job_state"][0] in {
        "PENDING",
        "CONFIGURING",
        "RUNNING",
        "COMPLETING",
        "COMPLETED",
    }
    assert (job["user_name"], job["account"], job["partition"], job["comment"]) == ("alice", "vision", "gpu", comment)
    assert job["tres_per_node"] == "gres/gpu:h100:1"
    assert job["time_limit"] == {"set": True, "infinite": False, "number": 2}  # minutes
    for field in ("priority", "submit_time", "cpus", "node_count", "memory_per_node"):
        assert set(job[field]) == NUMBER_KEYS, (field, job[field])
    assert job["submit_time"]["set"] and job["submit_time"]["number"] > 0

    job = wait_ended(job_id)
    assert job["job_state"] == ["COMPLETED"]
    assert job["exit_code"]["status"] == ["SUCCESS"]
    assert job["exit_code"]["return_code"] == {"set": True, "infinite": False, "number": 0}
    assert job["nodes"] == "g1"
    printed = cluster2.run(["cat", output], as_user="alice").out.strip()
    assert printed.startswith("user=alice cluster=cluster2 node=g1 gpus=") and printed[-1].isdigit(), printed


def test_exit_code_3_reads_as_failed_with_its_return_code(cluster2):
    job_id, _, _ = submit(cluster2, "bob", ["-p", "small", "-t", "1", "--mem=100M"], "#!/bin/bash\nexit 3\n")
    job = wait_ended(job_id)
    assert job["job_state"] == ["FAILED"]
    assert job["account"] == "nlp"
    assert job["exit_code"]["status"] == ["ERROR"]  # 24.11 says ERROR for a non-zero exit (SIGNALED for a signal)
    assert job["exit_code"]["return_code"] == {"set": True, "infinite": False, "number": 3}


def test_cluster2_host_key_is_its_own_pin(tmp_path):
    """The portal's known_hosts pins 2223 by its own line: with only the host cluster's line, the same
    key file is refused on 2223 (the root's sshd has its own host key)."""
    known = open(settings.PORTAL_SLURM_GATEWAY["ssh_known_hosts"]).read().splitlines()
    assert any(line.startswith(f"[127.0.0.1]:{PORT} ") for line in known)
    only_host = tmp_path / "known_hosts"
    only_host.write_text("".join(f"{line}\n" for line in known if not line.startswith(f"[127.0.0.1]:{PORT} ")))
    with pytest.raises(SlurmUnreachable, match="not known"):
        SlurmGateway(cluster2_transport(ssh_known_hosts=str(only_host))).run(["true"])
