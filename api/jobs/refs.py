"""The job a ``/jobs/{ref}`` address names (:func:`job_task_by_ref`, :func:`job_by_ref`), and the words
of a cancel's answer (:func:`cancel_answer`): what was sent to Slurm, or why nothing was."""

from __future__ import annotations

from datetime import datetime
from http import HTTPStatus
from typing import Literal

from jobs.models import Job
from jobs.reads.job_refs import job_for_ref
from jobs.submit.policy import unknown_cluster
from portal.refusals import Problem, Refused
from slurm.clusters import cluster_names
from slurm.states import JobState

from ..base import utc_text

#: The endpoints that act on a whole job (:func:`job_by_ref`).
WholeJobAction = Literal["show", "log", "hold", "release"]


def job_task_by_ref(request, ref: str, cluster: str = "") -> tuple[Job, int | None]:
    """:func:`jobs.reads.job_refs.job_for_ref` for the request's user (what ``ref`` may be is said
    there): the job and, for Slurm's ``<id>_<task>``, the task. 404 when not visible; 400 for a
    cluster that is not configured or a part of a job."""
    if cluster and cluster not in cluster_names():
        raise Refused(unknown_cluster(cluster))
    return job_for_ref(user=request.user, ref=ref, cluster=cluster)


def _whole_array(action: WholeJobAction, array_id: int) -> str:
    """What ``action`` does with an array instead of one task, and where the task's facts are."""
    if action == "show":
        return f"the API shows the whole array: use {array_id} (its `tasks` lists every task's id by state)"
    if action == "log":
        return (
            f"the API reads the whole array's log, the one of its latest task to start: use {array_id} (every task's state "
            f"is in `tasks` of GET /api/v1/jobs/{array_id})"
        )
    if action == "hold":
        return f"hold holds the whole array (every task that has not started): use {array_id}"
    return f"release releases the whole array (every task you held): use {array_id}"


def job_by_ref(request, ref: str, cluster: str = "", *, action: WholeJobAction) -> Job:
    """:func:`job_task_by_ref` for an endpoint on a whole job (``action``: show, log, hold or
    release): Slurm's one-task ``<id>_<task>`` is refused (400) with the array's id and what
    ``action`` does with the array. Only cancel takes one task, and says so itself."""
    job, task = job_task_by_ref(request, ref, cluster)
    if task is not None:
        raise Refused(
            Problem(
                "ref",
                f"'{ref.strip()}' is task {task} of array job {job.slurm_job_id}, and {_whole_array(action, job.slurm_job_id)}.",
            )
        )
    return job


def cancel_answer(job: Job, *, asked_before: datetime | None, task: int | None) -> tuple[HTTPStatus, str]:
    """The status and ``message`` of ``POST /jobs/{ref}/cancel`` for ``job`` as
    :func:`jobs.submit.submit.job_cancel` left it (``asked_before``: its ``cancel_requested_at``
    before the call; ``task``: the one task asked for). 202 when a cancel was sent or is still being
    sent; 200 when nothing was sent: the job had already ended, or its state is one the portal
    cannot cancel from (unknown, or a Slurm state it does not know)."""
    name = f"{job.slurm_job_id or job.key} “{job.name}”"
    if task is not None:  # a pending or running task of the array (job_cancel refuses any other)
        return HTTPStatus.ACCEPTED, (
            f"Cancelling task {task} of array job {name} (scancel {job.slurm_job_id}_{task} as you); its other tasks go on."
        )
    state = JobState(job.state).label
    if job.state == JobState.SUBMIT_FAILED:
        return HTTPStatus.OK, f"Job {name} was never submitted to Slurm ({state}): there is nothing to cancel."
    if job.is_final:
        ended = f" on {utc_text(job.end_at)}" if job.end_at else ""
        return HTTPStatus.OK, f"Job {name} has already ended ({state}{ended}): nothing was sent to Slurm."
    if not job.is_active:
        return HTTPStatus.OK, (
            f"Nothing was sent to Slurm: the portal does not know whether job {name} still runs (state: {state}). If it "
            f"does, cancel it on the cluster with scancel {job.slurm_job_id}."
        )
    if asked_before is not None and job.cancel_requested_at == asked_before:
        return HTTPStatus.ACCEPTED, (
            f"A cancel of job {name} was already sent at {utc_text(asked_before)}; Slurm has not reported it ended yet. "
            "Nothing more was sent."
        )
    return HTTPStatus.ACCEPTED, f"Cancelling job {name} (scancel as you): its state becomes Cancelled once Slurm reports it."
