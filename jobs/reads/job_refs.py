"""The job a reference names, written as people copy it (the API's ``/jobs/{ref}``, and so the CLI).

Accepted: the portal's job key (a UUID), or the job as Slurm names it and ``gpuportal ls`` prints it
(:attr:`jobs.models.Job.slurm_ref`): ``123``, ``123_[1-500%20]`` for an array, ``123+0-1`` for a
heterogeneous job. An array's tasks may be written any way that names the same ids (``1-400:3`` as
squeue prints it, or ``1,4,7,...,400``; the ``%`` limit aside). Slurm's name of one array task,
``123_7``, names the array and that task: the caller acts on the task where it can (a cancel) or says
what to write instead. An array or het form that names less than the whole job (``123_[1-5]`` of
``123_[1-500]``, one component ``123+1``) is refused: the portal acts on whole jobs, and a cancel must
not reach more than was named."""

from __future__ import annotations

import re
import uuid

from django.http import Http404

from portal.refusals import Problem, Refused
from slurm.tasksets import TaskSet

from ..arrays import load_tasks
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


def _array_ids(job: Job) -> TaskSet | None:
    """Every task id of an array row: from ``array_tasks`` (every state), else its ``array_spec``
    (a row stored before its tasks were); ``None`` when neither says (a spec cut short with ``...``)."""
    every = TaskSet()
    for ids in load_tasks(job.array_tasks).values():
        every = every | ids
    if every:
        return every
    try:
        return TaskSet.parse(job.array_spec.partition("%")[0]) or None
    except ValueError:
        return None


def _cut(text: str, most: int = 60) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _check_part(job: Job, ref: str, part: str) -> None:
    """Refuses ``ref``, whose array (``_[...]``) or het (``+N``, ``+N-M``) ``part`` is not written as
    ``job.slurm_ref`` is, unless it names the same whole job: every task id of the array however
    written (``1-400:3`` or ``1,4,...,400``; the ``%`` limit aside), or every component of the het job."""
    jid, whole = job.slurm_job_id, f"the portal acts on whole jobs: use {job.slurm_job_id}"
    if part.startswith("+"):
        low, _, high = part[1:].partition("-")
        count = len(job.het_parts or []) if job.is_het else 0
        if not high and count:
            raise Refused(Problem("ref", f"'{ref}' names component {low} of het job {jid}, and {whole}."))
        if count and int(low) == 0 and int(high) == count - 1:
            return
    elif job.is_array:
        try:
            named = TaskSet.parse(part[2:-1].partition("%")[0])
        except ValueError:
            named = None
        own = _array_ids(job)
        if named is not None and named == own:
            return
        if named is not None and own is not None:
            raise Refused(
                Problem(
                    "ref",
                    f"'{_cut(ref)}' names tasks {_cut(named.slurm_text)} of array job {jid}, not all of its tasks "
                    f"({_cut(own.slurm_text)}), and {whole} for the whole array, or `gpuportal cancel {jid} --task N` "
                    "for one task.",
                )
            )
    raise Refused(Problem("ref", f"'{_cut(ref)}' is not job {jid} as Slurm names it ({job.slurm_ref}), and {whole}."))


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
        _check_part(job, ref, match["part"])
    if match and match["task"] and not job.is_array:
        raise Refused(
            Problem(
                "ref",
                f"'{ref}' names task {match['task']} of an array, but job {job.slurm_job_id} is not an array job: use {job.slurm_job_id}.",
            )
        )
    return job, int(match["task"]) if match and match["task"] else None
