"""The support bundle on the real clusters (22.05 and 24.11): a small job submitted through the
portal, run and ended, then its bundle downloaded as the owner and opened: Slurm's view names the
job, the log's tail holds its output, the sbatch command is the one it was sent with."""

from __future__ import annotations

import io
import zipfile

import pytest

from jobs.submit.policy import JobRequest, SitePolicy
from jobs.submit.submit import job_check, job_create
from jobs.worker.services import snapshot_refresh
from slurm.clusters import cluster_get
from slurm.states import JobState
from tests.waiting import wait_for, wait_for_job

pytestmark = [pytest.mark.integration, pytest.mark.django_db, pytest.mark.timeout(300)]


@pytest.mark.parametrize("on", ["cluster1", "cluster2"])
def test_a_finished_job_s_bundle_has_slurm_s_view_of_it_and_its_output(
    on, client, django_user_model, clean_cache, django_capture_on_commit_callbacks
):
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    snapshot = snapshot_refresh(cluster=on)
    assert snapshot is not None and not snapshot.error, snapshot and snapshot.error
    request = JobRequest(
        name=f"bundle-it-{on}",
        partition="small",
        gpu_type="",
        gpu_count=0,
        cpus=1,
        memory_mb=200,
        time_limit_min=5,
        script='echo "bundle output from $(id -un) in $SLURM_JOB_ID"\n',
        cluster=on,
    )
    with django_capture_on_commit_callbacks(execute=True):
        job = job_create(checked=job_check(user=alice, request=request, policy=SitePolicy.for_cluster(on)))
    job.refresh_from_db()
    assert job.slurm_job_id, job.submit_error
    done = wait_for_job(job, {JobState.COMPLETED, JobState.FAILED}, timeout=120)
    assert done.state == JobState.COMPLETED
    client.force_login(alice)
    jid = done.slurm_job_id
    ended = f"\n{jid}|bundle-it-{on}|alice|vision|small|COMPLETED|0:0|"

    def bundle() -> dict[str, str]:
        response = client.get(f"/jobs/{job.key}/support-bundle/")
        assert response.status_code == 200
        assert response["Content-Disposition"] == f'attachment; filename="support-{on}-{jid}.zip"'
        with zipfile.ZipFile(io.BytesIO(response.content)) as archive:
            return {name: archive.read(name).decode() for name in archive.namelist()}

    def final_bundle() -> dict[str, str] | None:
        members = bundle()
        return members if ended in members.get("slurm/sacct.txt", "") else None

    # The portal may have the job's end from the queue before slurmdbd has its final record: each
    # download asks sacct afresh, so download until accounting's record says COMPLETED.
    members = wait_for(
        "a bundle whose sacct member has the job's final record",
        final_bundle,
        timeout=60,
        every=2,
        seen=lambda: bundle().get("slurm/sacct.txt", "(no sacct member)")[-600:],
    )
    scontrol, sacct = members.get("slurm/scontrol-show-job.txt", ""), members.get("slurm/sacct.txt", "")
    assert f"JobId={jid} JobName=bundle-it-{on}" in scontrol or f"\n{jid}|bundle-it-{on}|alice|" in sacct, members["README.txt"]
    assert ended in sacct  # ended: sacct is asked too
    assert members["logs/stdout.txt"] == f"bundle output from alice in {jid}\n"
    assert members["sbatch.txt"].startswith(f"{cluster_get(on).sbatch_helper} /home/alice/portal-jobs/")
    assert members["sbatch.txt"].endswith(" -- --parsable\n") and members["script.sh"].startswith(
        "#!/bin/bash\n#SBATCH --job-name="
    )
    assert members["versions.txt"].splitlines()[1].startswith(f"slurm {snapshot.slurm_version}") and snapshot.slurm_version
