"""Submitting and cancelling batch jobs: the user's side (a request is a row before it is a Slurm
job: docs/decisions.md#a-request-is-a-row-before-it-is-a-slurm-job).

``job_check`` checks a request against site policy and the user's teams; ``job_create`` takes only
what it returns, writes the row and on commit sends it at once from the same process
(``jobs.tasks.job_submit_now``; the Celery task ``job_submit_task`` is the fallback and the retry);
``job_cancel`` records the request and enqueues ``jobs.tasks.job_cancel_task``. What those tasks run
(the idempotent send, the key look-up, scancel) is in :mod:`jobs.worker.send`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from django.core.exceptions import PermissionDenied
from django.db import transaction
from django.utils import timezone as djtz

from accounts.models import User
from audit.services import audit
from images.models import Image
from images.services import image_choice_check
from portal.refusals import Problem, Refused
from runtimes import Bind, runtime_get
from slurm.clusters import cluster_get
from slurm.states import ACTIVE_STATES
from slurm.tasksets import TaskSet

from ..arrays import load_tasks
from ..models import Job
from ..reads.cap_reasons import pool_problems
from ..tasks import enqueue, job_cancel_task, job_submit_now
from .policy import JobRequest, SitePolicy, unknown_cluster


@dataclass(frozen=True)
class CheckedRequest:
    """A :class:`JobRequest` that passed site policy and the team check for ``user``, billed to
    ``account``. Made by :func:`job_check` only; :func:`job_create` takes nothing else, so every
    submission (form, API, profile, CLI) is checked, and checked once."""

    user: User
    request: JobRequest
    account: str
    cluster: str = ""
    #: The image it runs in (checked by :func:`images.services.image_check`), ``None``: the node's own system.
    image: Image | None = None


def job_check(*, user: User, request: JobRequest, policy: SitePolicy | None = None) -> CheckedRequest:
    """Check ``request`` against its cluster's site policy (``policy`` when it is that cluster's,
    else :meth:`SitePolicy.for_cluster`, from the stored snapshots) and the user's teams. Returns the
    :class:`CheckedRequest` to give :func:`job_create`, with the request's image (``request.image``,
    :func:`images.services.image_choice_check`). Raises :class:`Refused` with every problem,
    named by :class:`JobRequest` field (``cluster`` for a cluster that is not configured)."""
    cluster = cluster_get(request.cluster)
    if cluster is None:
        raise Refused(unknown_cluster(request.cluster))
    if policy is None or (policy.cluster and policy.cluster != cluster.name):
        policy = SitePolicy.for_cluster(cluster.name)
    account, account_problems = account_for(user=user, requested=request.account)
    problems = policy.check(request) + account_problems
    problems += [p for p in pool_problems(request) if p.field not in {q.field for q in problems}]  # the small-job pool
    image = None
    try:  # from the registry and the availability cache only (never a cluster call)
        image = image_choice_check(request.image, cluster=cluster.name, partition=request.partition)
    except Refused as refused:
        problems += refused.problems
    if image is not None:
        problems += _image_workdir_problems(image, request.workdir)
    if problems:
        raise Refused(*problems)
    return CheckedRequest(user=user, request=request, account=account, cluster=cluster.name, image=image)


def job_create(*, checked: CheckedRequest, profile=None, profile_spec: dict | None = None, key: uuid.UUID | None = None) -> Job:
    """Write the Job row of a checked request (state SUBMITTING) and send it on commit
    (:func:`jobs.tasks.job_submit_now`: here, or through the worker when that fails). ``profile``/``profile_spec``: the saved profile and the document it was run from (jobs
    from a profile file). ``key``: the row's key when the caller chose it (the New job form's, so that
    the same form sent twice makes one job); a key already taken raises ``django.db.IntegrityError``
    and writes nothing."""
    user, request = checked.user, checked.request
    with transaction.atomic():
        job = Job.objects.create(
            **({"key": key} if key else {}),
            user=user,
            account=checked.account,
            name=request.name,
            partition=request.partition,
            gpu_type=request.gpu_type if request.gpu_count else "",
            gpu_count=request.gpu_count,
            cpus=request.cpus,
            memory_mb=request.memory_mb,
            time_limit_min=request.time_limit_min,
            script=request.script,
            workdir=request.workdir,
            requeue=request.requeue,
            priority_class=request.priority,
            slurm_cluster=checked.cluster,
            profile=profile,
            profile_spec=profile_spec or {},
            image_name=checked.image.name if checked.image else "",
            image_path=checked.image.path if checked.image else "",
            image_digest=checked.image.digest if checked.image else "",
        )
        audit(
            actor=user,
            action="job.create",
            job=job,
            new={
                "cluster": job.slurm_cluster,
                "partition": job.partition,
                "gpus": job.gpu_count,
                "gpu_type": job.gpu_type,
                **({"profile": profile_spec.get("name", "")} if profile_spec else {}),
                **({"image": job.image_name} if job.image_name else {}),
            },
        )
        transaction.on_commit(lambda: job_submit_now(job.id, cluster=job.cluster))
    return job


def _image_workdir_problems(image: Image, workdir: str) -> list[Problem]:
    """An absolute working directory is bound into the image at the same path: refused when the
    image's runtime cannot take it as one bind (a ``:`` for ch-run's ``-b SRC:DST``, a ``,`` for
    Apptainer's and pyxis' lists), before anything is sent. Relative ones lie in the home, bound as a whole."""
    if not workdir.startswith("/"):
        return []
    try:
        runtime_get(image.runtime).exec_argv(image.path, ["/bin/true"], binds=[Bind(workdir, workdir)], workdir=workdir)
    except ValueError as exc:
        return [Problem("workdir", f"This working directory cannot be used in the image {image.name}: {exc}.")]
    return []


def account_for(*, user: User, requested: str, billed: str = "jobs") -> tuple[str, list[Problem]]:
    """The Slurm account (team) a batch job or a session of ``user`` is billed to: ``requested``, else
    their first team (``user.slurm_accounts``, from sacctmgr at their last sign-in), and the
    refusals (field ``account``) when they are in no team or not in that one. ``billed``: what the
    no-team sentence says cannot be billed ("jobs", "sessions"). Returns ``(account, problems)``;
    ``account`` is "" for a user in no team."""
    account = requested or (user.slurm_accounts[0] if user.slurm_accounts else "")
    if not user.slurm_accounts:
        return account, [
            Problem(
                "account",
                f"You are not in any team (Slurm account), so {billed} cannot be billed to one. Ask your team lead to add you.",
            )
        ]
    if account not in user.slurm_accounts:
        return account, [
            Problem("account", f"You are not in the team '{account[:60]}'. Your teams: {', '.join(user.slurm_accounts)}.")
        ]
    return account, []


def job_cancel(*, job: Job, by: User, task: int | None = None) -> Job:
    """The owner asks to cancel. Records the request (audit) and enqueues ``scancel`` on commit:
    the whole job (every task of an array, every component of a het job), or with ``task`` one task
    of an array (``scancel <id>_<task>``; audit ``job.task_cancel_requested``). Raises
    ``PermissionDenied`` for anyone but the owner, :class:`Refused` for a task that is not a pending
    or running task of this array."""
    if by.pk != job.user_id:
        raise PermissionDenied("Only the job's owner can cancel it.")
    if task is not None:
        return _task_cancel(job=job, by=by, task=task)
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=job.pk)
        if not job.is_active or job.cancelling:
            return job
        asked = job.cancel_requested_at  # None, or a cancel of over an hour ago that did not end the job
        old = {"state": job.state, "cancel_requested_at": asked.isoformat() if asked else None}
        job.cancel_requested_at = djtz.now()
        job.save(update_fields=["cancel_requested_at", "updated_at"])
        audit(
            actor=by,
            action="job.cancel_requested",
            job=job,
            old=old,
            new={"state": job.state, "cancel_requested_at": job.cancel_requested_at.isoformat()},
        )
        transaction.on_commit(lambda: enqueue(job_cancel_task, job.id))
    return job


def _task_cancel(*, job: Job, by: User, task: int) -> Job:
    active = [ids for state, ids in load_tasks(job.array_tasks).items() if state in ACTIVE_STATES]
    if not job.is_array or not job.is_active or not any(task in ids for ids in active):
        raise Refused(
            Problem(
                "task",
                f"Task {task} is not a pending or running task of this job"
                + (f" (array {job.slurm_ref})." if job.is_array else ": it is not an array job."),
            )
        )
    with transaction.atomic():
        row = Job.objects.select_for_update().get(pk=job.pk)
        row.tasks_cancel_requested = (TaskSet.parse(row.tasks_cancel_requested or "") | TaskSet.parse(str(task))).text
        row.save(update_fields=["tasks_cancel_requested", "updated_at"])
        job.tasks_cancel_requested = row.tasks_cancel_requested
        audit(actor=by, action="job.task_cancel_requested", job=job, new={"task": task, "scancel": f"{job.slurm_job_id}_{task}"})
        transaction.on_commit(lambda: enqueue(job_cancel_task, job.id, task))
    return job
