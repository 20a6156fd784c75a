"""Running a finished job again: "Run again" submits the same settings at once (a
portal job: the request stored on its row); "Run again with changes" opens the New job form filled
in. A job submitted outside the portal has no stored request: its resources come from the row the
poller made and its batch script is read as the owner on request (:func:`jobs.reads.logs.job_batch_script`),
so both of its buttons open the filled form, ready to submit with one click. Refusals (a partition
that no longer exists, a team the user left) come from the normal checks, :func:`jobs.submit.submit.job_check`.
"""

from __future__ import annotations

import posixpath

from django.core.exceptions import PermissionDenied

from accounts.models import User
from portal.refusals import Problem, Refused
from portal.units import memory_text

from ..models import Job
from .policy import JobRequest
from .submit import job_check, job_create


def run_again_request(job: Job) -> JobRequest:
    """The :class:`JobRequest` a portal job was submitted with, read from its row: name, cluster,
    team, partition, GPU type and count, CPUs, memory (MiB), time limit (minutes), script, requeue, image,
    and the working directory the user chose (``""`` when it was the job's own per-job directory,
    so the copy gets a new one)."""
    return JobRequest(
        name=job.name,
        partition=job.partition,
        gpu_type=job.gpu_type,
        gpu_count=job.gpu_count,
        cpus=job.cpus,
        memory_mb=job.memory_mb,
        time_limit_min=job.time_limit_min,
        script=job.script,
        workdir=_chosen_workdir(job),
        account=job.account,
        requeue=job.requeue,
        priority=job.priority_class,
        cluster=job.cluster,
        image=job.image_name,
    )


def _chosen_workdir(job: Job) -> str:
    """``job.workdir`` unless it is the per-job directory the portal made for it (where its
    output went); ``""`` then."""
    if not job.workdir or (job.output_path and posixpath.dirname(job.output_path) == job.workdir):
        return ""
    return job.workdir


def job_run_again(*, job: Job, by: User) -> Job:
    """Submit a finished portal job again with the same settings (:func:`run_again_request`, and its
    profile when it came from one), checked as any submission. Returns the new :class:`Job`.
    Raises ``PermissionDenied`` for anyone but the owner; :class:`Refused` for a job that has not
    ended or was submitted outside the portal (field ``job``), or with the policy's problems (named
    by :class:`JobRequest` field) when the settings are no longer allowed."""
    if by.pk != job.user_id:
        raise PermissionDenied("Only the job's owner can run it again.")
    if job.is_outside:
        raise Refused(
            Problem("job", "It was submitted outside the portal: use Run again with changes, which reads its script as you.")
        )
    if not job.is_final:
        raise Refused(Problem("job", "It has not ended yet: use Run again with changes to submit a copy now."))
    checked = job_check(user=by, request=run_again_request(job))
    return job_create(checked=checked, profile=job.profile, profile_spec=job.profile_spec or None)


def without_directives(script: str) -> tuple[str, list[str]]:
    """``script`` without the ``#SBATCH`` lines sbatch would read (those before its first command:
    the form's fields decide partition, GPUs, CPUs, memory and time, and the policy refuses them),
    and the lines taken out, as written."""
    lines = script.split("\n")
    kept, removed = [], []
    for number, line in enumerate(lines):
        text = line.strip()
        if text and not text.startswith("#"):
            kept.extend(lines[number:])
            break
        (removed if text.startswith("#SBATCH") else kept).append(line)
    return "\n".join(kept), removed


def run_again_initial(job: Job, *, script: str | None = None) -> dict:
    """The New job form's initial values for a copy of ``job`` (form field names): cluster, team,
    name, partition, GPU type and count, CPUs, memory (``4000M``), time limit (minutes), working
    directory, requeue, image and script (a portal job's own; for an outside job ``script``, read by the
    caller, left out when ``None``)."""
    values = {
        "cluster": job.cluster,
        "account": job.account,
        "name": job.name,
        "partition": job.partition,
        "gpu_type": job.gpu_type,
        "gpu_count": job.gpu_count,
        "cpus": job.cpus,
        "memory_gb": memory_text(job.memory_mb or None),
        "time_limit": str(job.time_limit_min) if job.time_limit_min else "",
        "workdir": job.workdir if job.is_outside else _chosen_workdir(job),
        "script": script if job.is_outside else job.script,
    }
    if not job.is_outside:
        values["requeue"] = job.requeue
        values["priority"] = job.priority_class
        values["image"] = job.image_name
    return {k: v for k, v in values.items() if v not in ("", None)}
