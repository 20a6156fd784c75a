"""Per-person caps and the small-job pool on the real cluster1 (Slurm 22.05).

The caps are kept on a QOS of the test's own (``it-caps-<random>``, ``PORTAL_USER_CAPS_QOS``): the sync
creates it (absent -> create), alice is given it and submits with ``--qos``, so only these jobs are
capped and the other tests on the shared cluster are not (on a site the caps live on ``normal``, every
job's QOS; the sync code is the same). In ``finally``: the jobs are cancelled by id, the caps set to
``unlimited`` and synced (Slurm's limits cleared by the sync itself), then alice's access to the QOS is
removed by hand. The QOS itself is kept, without limits: Slurm 22.05's ``sacct --json`` stops at a job
whose QOS was deleted, so deleting it cut every later read of the month short (the usage and accounting
tests that ran after this one failed; cluster/up.sh repairs a lab that has such records). The pool tests use the pool as cluster/up.sh makes it (bigger jobs are accepted and held, never started there)."""

from __future__ import annotations

import re
import uuid

import pytest

from audit.models import AuditEvent
from jobs.models import Job
from jobs.submit.policy import JobRequest, SitePolicy
from jobs.submit.submit import job_check
from jobs.worker.services import snapshot_refresh
from slurm import get_gateway
from slurm.clusters import cluster_names
from slurm.states import JobState
from teams.sync.associations import teams_sync
from tests.waiting import scontrol_show_job, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(300)]


@pytest.fixture
def alice(django_user_model, clean_cache):
    return django_user_model.objects.create(username="alice", slurm_accounts=["vision"])


def on_cluster1(line: str) -> str:
    """A teams sync line of cluster1 as the report words it: after "cluster1: " when several clusters are
    configured, alone when cluster1 is the only one (make test's serial tier configures it alone)."""
    return f"cluster1: {line}" if len(cluster_names()) > 1 else line


def sacctmgr(*args: str) -> None:
    get_gateway("cluster1").run(["sacctmgr", "-i", *args])


def qos_line(name: str) -> str:
    out = (
        get_gateway("cluster1")
        .run(["sacctmgr", "--noheader", "--parsable2", "show", "qos", name, "format=Name,MaxTRESPerUser,MaxSubmitJobsPerUser"])
        .out
    )
    return out.strip()


def sbatch(*options: str, script: str = "#!/bin/bash\nsleep 120\n", check: bool = True, cluster: str = "cluster1"):
    """``sbatch --parsable`` as alice on ``cluster``; the job id (``check``) or the result."""
    result = get_gateway(cluster).run(
        ["sbatch", "--parsable", "--chdir=/tmp", "--mem=100M", *options], as_user="alice", stdin=script, check=False
    )
    if not check:
        return result
    assert result.returncode == 0, result.err
    return int(result.out.strip().split(";")[0])


def sbatch_in_qos(qos: str, *options: str, **kw):
    """As :func:`sbatch` with ``--qos``; retried while slurmctld has not yet got alice's new QOS access
    from slurmdbd ("Invalid qos specification", seconds after ``sacctmgr modify user``)."""
    tried = []

    def sent():
        tried.append(sbatch(f"--qos={qos}", *options, check=False, **kw))
        return tried[-1] if "Invalid qos specification" not in tried[-1].err else None

    return wait_for(
        f"sbatch --qos={qos} taken past 'Invalid qos specification' (alice's QOS access reaching slurmctld)",
        sent,
        timeout=30,
        every=1,
        seen=lambda: tried and tried[-1].err,
    )


def poll(job_id: int, predicate, what: str, timeout: float = 90, cluster: str = "cluster1") -> Job:
    """The job's row once a poll of ``cluster`` shows it as ``predicate`` wants (``what``)."""
    job = None

    def reached():
        nonlocal job
        snapshot_refresh(cluster=cluster)
        job = Job.objects.filter(slurm_cluster=cluster, slurm_job_id=job_id).first()
        return job if job is not None and predicate(job) else None

    return wait_for(
        f"job {job_id} on {cluster}: {what}",
        reached,
        timeout=timeout,
        every=1,
        seen=lambda: f"portal: {job and (job.state, job.reason)}\n{scontrol_show_job(job_id, cluster=cluster)}",
    )


@pytest.fixture
def caps_qos(settings):
    """The test's caps QOS name; afterwards its limits are cleared by a sync and alice loses access to
    it. It is never deleted: its jobs' records name it (see the module docstring)."""
    name = f"it-caps-{uuid.uuid4().hex[:6]}"
    settings.PORTAL_USER_CAPS_QOS = name
    jobs: list[int] = []
    try:
        yield name, jobs
    finally:
        for job_id in jobs:
            get_gateway("cluster1").run(["scancel", str(job_id)], as_user="alice", check=False)
        settings.PORTAL_USER_MAX_GPUS = settings.PORTAL_USER_MAX_SUBMIT_JOBS = "unlimited"
        restored = teams_sync(clusters=["cluster1"])
        try:
            assert restored.ok, restored.lines
        finally:
            get_gateway("cluster1").run(
                ["sacctmgr", "-i", "modify", "user", "where", "name=alice", "set", f"qos-={name}"], check=False
            )


def test_a_gpu_cap_of_1_holds_alices_second_gpu_job_and_its_page_says_why(alice, caps_qos, settings, client):
    qos, jobs = caps_qos
    settings.PORTAL_USER_MAX_GPUS = "1"
    report = teams_sync(clusters=["cluster1"])
    assert report.ok and report.lines == [on_cluster1(f"+ add QOS {qos} (MaxTRESPerUser gres/gpu=1)")], report.lines
    assert qos_line(qos) == f"{qos}|gres/gpu=1|"
    row = AuditEvent.objects.get(action="slurm.sync.add_qos", target=f"qos:{qos}")
    assert row.new == {"max_gpus_per_user": 1, "cluster": "cluster1"}
    assert teams_sync(dry_run=True, clusters=["cluster1"]).lines == []  # same -> nothing
    sacctmgr("modify", "user", "where", "name=alice", "set", f"qos+={qos}")

    options = ("-p", "train", "--gres=gpu:a100:1", "-t", "5", "--job-name=it-cap-first")
    first = sbatch_in_qos(qos, *options)
    assert first.returncode == 0, first.err
    jobs.append(int(first.out.strip().split(";")[0]))
    poll(jobs[0], lambda j: j.state == JobState.RUNNING, "first job running")
    second = sbatch_in_qos(qos, "-p", "train", "--gres=gpu:a100:1", "-t", "5", "--job-name=it-cap-second")
    assert second.returncode == 0, second.err  # a GPU cap holds a job, it does not refuse it
    jobs.append(int(second.out.strip().split(";")[0]))
    held = poll(jobs[1], lambda j: j.state == JobState.PENDING and j.reason == "QOSMaxGRESPerUser", "QOSMaxGRESPerUser")

    client.force_login(alice)
    page = client.get(f"/jobs/{held.key}/").content.decode()
    # alice's other jobs on cluster1 (other tests') count in the portal's figure too: at least the first one
    assert re.search(r"You already use [1-9]\d* of your 1 GPU at once on cluster1 \(the site allows at most 1 GPU", page), page
    assert "it starts when one of your jobs ends" in page


def test_a_pending_jobs_cap_refuses_the_extra_submission_with_slurms_words(alice, caps_qos, settings):
    qos, jobs = caps_qos
    settings.PORTAL_USER_MAX_SUBMIT_JOBS = "2"
    report = teams_sync(clusters=["cluster1"])
    assert report.ok and report.lines == [on_cluster1(f"+ add QOS {qos} (MaxSubmitJobsPerUser 2)")], report.lines
    sacctmgr("modify", "user", "where", "name=alice", "set", f"qos+={qos}")
    for n in range(2):  # held: they stay pending and count, nothing runs
        result = sbatch_in_qos(qos, "-p", "small", "-t", "2", "--hold", f"--job-name=it-submit-cap-{n}")
        assert result.returncode == 0, result.err
        jobs.append(int(result.out.strip().split(";")[0]))
    refused = sbatch_in_qos(qos, "-p", "small", "-t", "2", "--hold", "--job-name=it-submit-cap-extra")
    assert refused.returncode == 1
    assert "QOSMaxSubmitJobPerUserLimit" in refused.err and "Job violates accounting/QOS policy" in refused.err
    # lowered from 2 to 3: the sync modifies only that limit, and the third is accepted
    settings.PORTAL_USER_MAX_SUBMIT_JOBS = "3"
    assert teams_sync(clusters=["cluster1"]).lines == [on_cluster1(f"~ set QOS {qos} MaxSubmitJobsPerUser 3 (was 2)")]
    assert AuditEvent.objects.get(action="slurm.sync.set_qos", target=f"qos:{qos}").old == {"max_submit_per_user": 2}
    third = sbatch_in_qos(qos, "-p", "small", "-t", "2", "--hold", "--job-name=it-submit-cap-third")
    assert third.returncode == 0, third.err
    jobs.append(int(third.out.strip().split(";")[0]))


#: Per cluster: the pool's node, the big partition kept off it, and the pool node's GPU type.
POOLS = {"cluster1": ("node3", "train", "t4"), "cluster2": ("g2", "gpu", "l40s")}


@pytest.fixture(params=list(POOLS))
def pool_jobs(request):
    """(cluster, job ids to cancel by id afterwards)."""
    ids: list[int] = []
    yield request.param, ids
    for job_id in ids:
        get_gateway(request.param).run(["scancel", str(job_id)], as_user="alice", check=False)


def test_the_small_job_pool_admits_a_short_1_gpu_job_and_keeps_big_ones_out(alice, pool_jobs, settings, client):
    cluster, ids = pool_jobs
    node, big, gpu = POOLS[cluster]
    snapshot = snapshot_refresh(cluster=cluster)
    parts = {p.name: p for p in snapshot.partitions}
    assert parts["small"].nodes == (node,) and node not in parts[big].nodes  # held back from the big partition
    # a 1-GPU 10-minute job: accepted and runs on the pool's node
    ids.append(
        sbatch(
            "-p",
            "small",
            f"--gres=gpu:{gpu}:1",
            "-t",
            "10",
            "--job-name=it-pool-small",
            script="#!/bin/bash\nsleep 20\n",
            cluster=cluster,
        )
    )
    job = poll(
        ids[-1], lambda j: j.state in (JobState.RUNNING, JobState.COMPLETED), "pool job running", timeout=120, cluster=cluster
    )
    assert job.partition == "small"
    # too big for the pool: accepted, but held (never started there), and its page says why in the pool's figures
    settings.PORTAL_SMALL_POOL_PARTITION = "small"
    client.force_login(alice)
    for options, code, words in (
        ((f"--gres=gpu:{gpu}:2", "-t", "10"), "QOSMaxGRESPerJob", "takes jobs of at most 1 GPU; this one asks for 2."),
        ((f"--gres=gpu:{gpu}:1", "-t", "90"), "PartitionTimeLimit", "takes jobs of at most 1 h; this one asks for 90 min."),
    ):
        ids.append(sbatch("-p", "small", *options, "--job-name=it-pool-big", cluster=cluster))
        held = poll(ids[-1], lambda j, code=code: j.state == JobState.PENDING and j.reason == code, code, cluster=cluster)
        page = client.get(f"/jobs/{held.key}/").content.decode()
        assert f"The small-job pool (partition small) {words}" in page, page
    # and the big partition cannot reach the pool's node
    result = sbatch("-p", big, f"--gres=gpu:{gpu}:1", "-t", "10", check=False, cluster=cluster)
    assert result.returncode == 1 and "Requested node configuration is not available" in result.err, result.err
    # the portal says so before sending, with the pool's figures
    request = JobRequest(
        name="big-in-pool", partition="small", gpu_type=gpu, gpu_count=2, cpus=1, memory_mb=500, time_limit_min=90,
        script="true\n", cluster=cluster,
    )  # fmt: skip
    from portal.refusals import Refused

    with pytest.raises(Refused) as refused:
        job_check(user=alice, request=request, policy=SitePolicy.from_snapshot(snapshot))
    text = " ".join(p.message for p in refused.value.problems)
    assert "The small-job pool (partition small) takes jobs of at most 1 GPU; this one asks for 2." in text
    assert "longer than small's maximum of 1 h" in text  # the partition's MaxTime, said once
