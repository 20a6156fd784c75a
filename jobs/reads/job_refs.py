"""The job a reference names, written as people copy it (the API's ``/jobs/{ref}``, and so the CLI).

Accepted: the portal's job key (a UUID), or the job as Slurm names it and ``gpuportal ls`` prints it
(:attr:`jobs.models.Job.slurm_ref`): ``123``, ``123_[1-500%20]`` for an array, ``123+0-1`` for a
heterogeneous job. Slurm's name of one array task, ``123_7``, names the array and that task: the
caller acts on the task where it can (a cancel) or says what to write instead. An array or het form
that is not the job's own name (``123_[1-5]`` of ``123_[1-500]``, one component ``123+1``) is
refused: the portal acts on whole jobs, and a cancel must not reach more than was named."""

from __future__ import annotations

import re
import uuid

from django.http import Http404

from portal.refusals import Problem, Refused

from ..models import Job, on_cluster
from .selectors import job_for_viewer

#: A Slurm job id (at most 18 digits: a bigint), then one task (``_7``), an array's tasks
#: (``_[1-500%20]``; the job's ``array_spec`` holds up to 255 characters) or a het job's components (``+0-1``).
SLURM_REF = re.compile(r"(?P<id>\d{1,18})(?:_(?P<task>\d{1,9})|(?P<part>_\[[^\]]{1,255}\]|\+\d{1,9}(?:-\d{1,9})?))?")


def _by_slurm_id(*, user, slurm_id: int, cluster: str) -> Job | None:
    """``user``'s newest job with Slurm id ``slurm_id`` (on ``cluster`` when given: ids are per
    cluster); for a portal admin with none of their own, anyone's."""
    jobs = Job.objects.select_related("user").filter(slurm_job_id=slurm_id)
    if cluster:
        jobs = jobs.filter(on_cluster(cluster))
    job = jobs.filter(user=user).order_by("-created_at").first()
    if job is None and user.is_staff:
        job = jobs.order_by("-created_at").first()
    return job


def job_for_ref(*, user, ref: str, cluster: str = "") -> tuple[Job, int | None]:
    """The job ``ref`` names that ``user`` may see, and for Slurm's ``<id>_<task>`` the array task
    (else ``None``). Raises ``Http404`` when there is none or ``ref`` is no job reference, and
    :class:`Refused` for an array or het form other than the job's own name, or a task of a job
    that is not an array."""
    ref = ref.strip()
    match = SLURM_REF.fullmatch(ref) if ref.isascii() else None
    if match:
        job = _by_slurm_id(user=user, slurm_id=int(match["id"]), cluster=cluster)
    else:
        try:
            key = uuid.UUID(ref)
        except ValueError:
            raise Http404(f"'{ref[:40]}' is neither a Slurm job id (123, 123_[1-50], 123+0-1, 123_7) nor a job key.") from None
        job = job_for_viewer(key=key, user=user)
    if job is None:
        raise Http404("No such job, or it is not yours.")
    if match and match["part"] and ref != job.slurm_ref:
        raise Refused(
            Problem(
                "ref",
                f"'{ref[:60]}' is not job {job.slurm_job_id} as Slurm names it ({job.slurm_ref}), and the portal acts on "
                f"whole jobs: use {job.slurm_job_id}.",
            )
        )
    if match and match["task"] and not job.is_array:
        raise Refused(
            Problem(
                "ref",
                f"'{ref}' names task {match['task']} of an array, but job {job.slurm_job_id} is not an array job: use {job.slurm_job_id}.",
            )
        )
    return job, int(match["task"]) if match and match["task"] else None
