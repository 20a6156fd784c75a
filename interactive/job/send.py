"""A session's Slurm job, on the same road as a batch job's: the hub's spawner asks
(``/hub-internal/session-*``), the portal renders the script (:mod:`interactive.job.script`) and runs
``sbatch``, ``scancel`` and ``tail`` through the session's cluster's gateway (:mod:`slurm.gateway`:
host keys, slurmctld's rate limit, the command metrics) as the session's owner; the job's state
comes from that cluster's snapshot (``squeue --json``, refreshed by the poller).

Who: the session is found by its key *and* the hub user it was asked for; the job runs as the
Session row's owner (the portal account the hub's user was named after, issuer + ``sub``), never
as a name the request carries. A key of another user's session is refused.
"""

from __future__ import annotations

import logging
import time

from django.core.exceptions import ValidationError
from django.db import transaction
from django.utils import timezone as djtz

from audit.services import audit
from jobs.reads.selectors import snapshot_status
from jobs.worker.send import HELPER_PREFIX, parse_sbatch_parsable, user_home
from portal.refusals import Problem, Refused
from slurm import SlurmError, SlurmTimeout, SlurmUnreachable, get_gateway
from slurm.clusters import cluster_get
from slurm.errors import controller_unreachable
from slurm.snapshot import positions_load, snapshot_load
from slurm.states import FINAL_STATES

from ..models import Session, SessionState
from .script import HubPart, session_log_path, session_script

log = logging.getLogger(__name__)

#: Lines of the job's log an ended start quotes.
LOG_TAIL_LINES = 15


class SessionSlurmUnavailable(Exception):
    """The session's cluster could not be asked (unreachable, timed out, rate-limited): try again."""


def hub_session(*, username: str, key: str) -> Session:
    """The session ``key`` of the hub user ``username``. Raises :class:`Refused` when there is
    none, or when it is another user's (the hub may act only for the user it asks for)."""
    try:
        session = Session.objects.select_related("user").filter(key=key).first()
    except ValidationError:  # a malformed key is a refusal, not a 500
        session = None
    if session is None:
        raise Refused(Problem("key", "No session has this key; start the session from the portal."))
    if session.user.username != username:
        log.warning("the hub asked for session %s as %r; it is %s's", key, username[:40], session.user.username)
        raise Refused(Problem("user", "This session belongs to another user; the hub may act only for its owner."))
    return session


def session_submit(*, username: str, key: str, hub: HubPart) -> dict:
    """Send the session's job (once: a session that has one answers with it) and return
    ``{"job_id", "cluster", "submitted_at": Unix seconds, "log_path"}``. The cluster's sbatch
    helper (``PORTAL_SBATCH_HELPER``) makes the log directory and runs ``sbatch --parsable`` as the
    owner, the script on stdin. Raises :class:`Refused` (not the owner, the session no longer
    starting, Slurm's refusal in its words) or :class:`SessionSlurmUnavailable`."""
    session = hub_session(username=username, key=key)
    if session.slurm_job_id:
        return _submitted(session, home="")
    if session.state != SessionState.STARTING:
        raise Refused(Problem("key", f"This session is {session.get_state_display()}; start a new one from the portal."))
    cluster = session.on_cluster
    owner = session.user.username
    try:
        home = user_home(owner, cluster=cluster)
        script = session_script(session, home=home, hub=hub, username=owner)
        argv = [cluster_get(cluster).sbatch_helper, session_log_path(session, home).rsplit("/", 1)[0], "--", "--parsable"]
        result = get_gateway(cluster).run(argv, as_user=owner, stdin=script, check=False)
    except (SlurmTimeout, SlurmUnreachable) as exc:
        raise SessionSlurmUnavailable(f"The cluster {cluster} could not be reached: {exc.message}") from exc
    except SlurmError as exc:
        raise Refused(Problem("user", f"Your home directory on the cluster could not be found: {exc.message}.")) from exc
    if result.returncode != 0:
        words = "\n".join(line for line in (result.err or result.out).strip().splitlines() if HELPER_PREFIX not in line)
        if controller_unreachable(result.err):
            raise SessionSlurmUnavailable(f"Slurm's controller on {cluster} did not answer: {words[-300:]}")
        raise Refused(Problem("slurm", words or f"sbatch exited with {result.returncode}"))
    try:
        job_id, _ = parse_sbatch_parsable(result.out)
    except ValueError as exc:
        raise SessionSlurmUnavailable(str(exc)) from exc
    with transaction.atomic():
        before = {"cluster": session.cluster, "slurm_job_id": session.slurm_job_id}
        Session.objects.filter(pk=session.pk).update(cluster=cluster, slurm_job_id=job_id, submitted_at=djtz.now())
        session.refresh_from_db()
        audit(
            actor=None,
            action="session.submitted",
            target=f"session:{session.key}",
            old=before,
            new={"cluster": cluster, "slurm_job_id": job_id},
        )
    return _submitted(session, home=home)


def _submitted(session: Session, *, home: str) -> dict:
    return {
        "job_id": session.slurm_job_id,
        "cluster": session.cluster,
        "submitted_at": session.submitted_at.timestamp() if session.submitted_at else time.time(),
        "log_path": session_log_path(session, home) if home else "",
    }


def session_cancel(*, username: str, key: str) -> bool:
    """``scancel <job id>`` of the session's job, as its owner, through its cluster's gateway.
    Returns False when the session has no job. Raises :class:`Refused` (not the owner) or
    :class:`SessionSlurmUnavailable` (the hub keeps the server and may try again)."""
    session = hub_session(username=username, key=key)
    if not session.slurm_job_id:
        return False
    try:
        get_gateway(session.on_cluster).run(["scancel", str(session.slurm_job_id)], as_user=session.user.username)
    except SlurmError as exc:
        raise SessionSlurmUnavailable(f"scancel of job {session.slurm_job_id} failed: {exc.message}") from exc
    return True


def session_job_status(*, username: str, key: str, with_log: bool = False, with_node: bool = False) -> dict:
    """The state of the session's job from its cluster's snapshot (:func:`job_status_for_hub`), with
    ``ended`` (a final Slurm state, or ``NOT_FOUND``) and, with ``with_log``, ``log_path`` and
    ``log_tail`` (the job log's last :data:`LOG_TAIL_LINES` lines, ``tail`` run as the owner); with
    ``with_node`` (the server reported its port: the job runs) and no node in the snapshot yet, the
    node from one ``squeue -h -j <id> -o %B`` (the batch host) through the gateway, as the owner.
    Raises :class:`Refused` (not the owner)."""
    session = hub_session(username=username, key=key)
    if not session.slurm_job_id and not _adopt_from_snapshot(session):
        return {"state": "NOT_FOUND", "ended": True}
    since = session.submitted_at.timestamp() if session.submitted_at else 0.0
    status = job_status_for_hub(job_id=session.slurm_job_id, since=since, cluster=session.on_cluster)
    status["ended"] = status["state"] == "NOT_FOUND" or status["state"] in FINAL_STATES
    if with_log:
        status.update(_log_tail(session))
    if with_node and not status.get("node") and not status["ended"]:
        status.update(_batch_host(session))
    return status


def _batch_host(session: Session) -> dict:
    argv = ["squeue", "-h", "-j", str(session.slurm_job_id), "-o", "%B"]
    try:
        out = get_gateway(session.on_cluster).run(argv, as_user=session.user.username, check=False).out.strip()
    except SlurmError as exc:
        return {"message": f"squeue for the node failed: {exc.message}"}
    return {"node": out} if out and " " not in out and out != "n/a" else {}


def _adopt_from_snapshot(session: Session) -> bool:
    """A session whose job the hub's spawner sent itself (before the portal sent them): take its
    job id from the snapshot's ``--comment=portal:<key>``. True when found."""
    snapshot = snapshot_load(with_jobs=True, cluster=session.on_cluster)
    job = next((j for j in snapshot.jobs if j.comment == f"portal:{session.key}"), None) if snapshot else None
    if job is None:
        return False
    Session.objects.filter(pk=session.pk).update(cluster=session.on_cluster, slurm_job_id=job.job_id)
    session.refresh_from_db()
    return True


def _log_tail(session: Session) -> dict:
    owner, cluster = session.user.username, session.on_cluster
    try:
        path = session_log_path(session, user_home(owner, cluster=cluster))
        tail = get_gateway(cluster).run(["tail", "-n", str(LOG_TAIL_LINES), path], as_user=owner).out.strip()
    except SlurmError as exc:
        return {"log_path": "", "log_tail": f"(log not readable: {exc.message})"}
    return {"log_path": path, "log_tail": tail}


def job_status_for_hub(*, job_id: int, since: float, cluster: str, now: float | None = None) -> dict:
    """One job's state from ``cluster``'s snapshot. ``UNKNOWN`` when the snapshot is stale
    (controller unreachable: the hub keeps the server) or was taken before ``since`` (Unix seconds
    of the submission); ``NOT_FOUND`` when a fresh snapshot taken after the submission no longer
    lists the job. ``position``/``in_line`` the queue position, ``estimated_start`` Unix seconds
    (Slurm's ``start_time``), ``exit_code`` "N:S" once ended."""
    now = time.time() if now is None else now
    snapshot = snapshot_load(with_jobs=True, cluster=cluster)
    status = snapshot_status(snapshot, now=now, cluster=cluster)
    if not status.has_data or status.stale:
        return {"state": "UNKNOWN", "message": snapshot.error if snapshot else "no snapshot yet"}
    job = next((j for j in snapshot.jobs if j.job_id == job_id), None)
    if job is None:
        return {"state": "NOT_FOUND" if snapshot.taken_at > since + 1 else "UNKNOWN"}
    position, in_line = positions_load(cluster).get(job_id, (None, None))
    exit_code = f"{job.exit_code}:{job.signal or 0}" if job.exit_code is not None and job.state in FINAL_STATES else ""
    return {
        "state": job.state,
        "node": job.nodes,
        "reason": job.reason,
        "exit_code": exit_code,
        "position": position,
        "in_line": in_line,
        "estimated_start": job.start_time if job.state == "PENDING" and job.start_time > now else None,
    }
