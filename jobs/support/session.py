"""What a session's support bundle is made of (:class:`.bundle.Gathered`). A session is a Slurm job
JupyterHub's spawner submitted with ``--comment=portal:<session key>``; the portal keeps no job id
for it, so its job is found by that comment: in the stored snapshot while Slurm holds it, else in
``sacct --json`` for the owner since the session was asked for.

The spawner's batch script is never in it: the hub writes the session's JupyterHub API token into
it. In the log's tail, a value after ``token=`` or ``token:`` is replaced too (a server may print a
URL with its token). ``session`` is an ``interactive.models.Session`` (this package sits below the
sessions app, so it reads the row's fields and imports nothing of it)."""

from __future__ import annotations

import re

from audit.models import AuditEvent
from slurm import SlurmError, get_gateway
from slurm.adapters import adapter_for
from slurm.snapshot import snapshot_load
from slurm.times import start_bound

from ..reads.logs import LogTail, log_tail_read
from .bundle import BUNDLE_LOG_BYTES, Gathered, Log
from .gather import history_rows, node_records, portal_version, slurm_view

#: The session's fields in its settings.json (the model's names; times as ISO 8601).
SESSION_FIELDS = (
    "key server_name ide account partition gpu_type gpu_count cpus memory_mb time_limit_min image_name state "
    "message created_at started_at give_up_at ended_at"
).split()

_TOKEN = re.compile(r"(?i)(token[=:]\s*)[^\s&\"']+")

SCRIPT_NOTE = "the session's batch script is JupyterHub's; the hub writes the session's API token into it"


def redact_tokens(text: str) -> str:
    """``text`` with every value after ``token=``/``token:`` (any case) replaced by ``[left out]``."""
    return _TOKEN.sub(r"\1[left out]", text)


def session_job_id(session, cluster: str) -> tuple[int | None, str]:
    """``(Slurm job id, why none)`` of ``session``'s job on ``cluster``: the one the portal sent
    (``Session.slurm_job_id``, sbatch's answer), else (a session the hub's spawner sent before the
    portal did) the snapshot's job whose ``comment`` is ``portal:<key>``, else (an ended session)
    ``sacct --json -D -u <owner> -S <asked>`` read by its version's adapter. Never raises: Slurm's
    failure, or an answer that cannot tell (an unknown version; 22.05's accounting cut short at a job
    whose QOS was deleted, :mod:`slurm.adapters.sacct_cut`), comes back as the reason."""
    if session.slurm_job_id:
        return session.slurm_job_id, ""
    comment = f"portal:{session.key}"
    snapshot = snapshot_load(cluster=cluster)
    for job in snapshot.jobs if snapshot else []:
        if job.comment == comment:
            return job.array_job_id or job.job_id, ""
    argv = ["sacct", "--json", "-D", "-u", session.user.username, "-S", start_bound(session.created_at)]
    try:
        document = get_gateway(cluster).run_json(argv)
    except SlurmError as exc:
        return None, f"Slurm could not be asked for the session's job: {exc.message}"
    try:
        found = adapter_for(document, argv=argv).sacct_job_by_comment(document, comment)
    except SlurmError as exc:
        return None, f"Slurm's accounting answered, but cannot tell which job is the session's: {exc.message}"
    if found is None:
        return None, "Slurm has no job of this session (it may never have been submitted)"
    return found[0], ""


def _log(cluster: str, scontrol, owner: str) -> list[Log]:
    records = scontrol.records if scontrol is not None else []
    path = records[0].get("StdOut", "") if records else ""
    if not path:
        return [Log("stdout", "", LogTail(missing=True, where_unknown=True))]
    tail = log_tail_read(cluster, path, as_user=owner, limit=BUNDLE_LOG_BYTES)
    return [Log("stdout", path, LogTail(**{**tail.__dict__, "text": redact_tokens(tail.text)}))]


def session_gathered(session, *, cluster: str) -> Gathered:
    """The bundle's inputs for ``session`` on ``cluster`` (its own: ``Session.on_cluster``): its settings, its
    audit rows (``target`` ``session:<key>``), Slurm's view of its job, the last
    :data:`BUNDLE_LOG_BYTES` of its log (tokens replaced), its nodes' state and the versions."""
    owner = session.user.username
    settings = {name: getattr(session, name) for name in SESSION_FIELDS}
    settings.update(owner=owner, cluster=cluster)
    job_id, slurm_note = session_job_id(session, cluster)
    scontrol = sacct = None
    node_list = ""
    if job_id is not None:
        settings["slurm_job_id"] = job_id
        scontrol, sacct = slurm_view(cluster, str(job_id), as_user=owner, ended=not session.is_active)
        for read in (scontrol, sacct):
            if read is not None and read.records and not node_list:
                node_list = read.records[0].get("NodeList", "")
    nodes, node_note, slurm_version = node_records(cluster, node_list)
    history = AuditEvent.objects.filter(target=f"session:{session.key}").select_related("actor")
    return Gathered(
        title=f"{session.ide_label} session {job_id or '(no Slurm job)'} on {cluster}",
        settings=settings,
        script_note=SCRIPT_NOTE,
        sbatch_note="JupyterHub's spawner sent it, not the portal",
        history=history_rows(history, owner_id=session.user_id),
        scontrol=scontrol,
        sacct=sacct,
        slurm_note=slurm_note,
        logs=_log(cluster, scontrol, owner) if job_id is not None else [],
        nodes=nodes,
        node_note=node_note,
        portal_version=portal_version(),
        slurm_version=slurm_version,
    )
