"""What a job's support bundle is made of (:class:`.bundle.Gathered`), read from the portal's rows,
the stored snapshot and Slurm (through the gateway, as the job's owner). Never raises for Slurm:
what could not be read is left out, and README.txt says why, so the bundle downloads while the
cluster is unreachable."""

from __future__ import annotations

from importlib import metadata

from audit.models import AuditEvent
from slurm import SlurmError, get_gateway
from slurm.clusters import cluster_get
from slurm.job_view import sacct_job, scontrol_show_job
from slurm.snapshot import snapshot_load
from slurm.values import expand_nodes
from teams.selectors import team_for_viewer

from ..models import Job
from ..reads.logs import LogTail, job_batch_script, log_path, log_tail_read
from ..worker.batch import render_batch_script
from ..worker.send import sbatch_argv, user_home
from .bundle import BUNDLE_LOG_BYTES, Gathered, Log

#: The job's fields that are what was submitted and what the portal knows of its run (the
#: ``Job`` model's names; times as ISO 8601).
JOB_FIELDS = (
    "key name origin kind account partition gpu_type gpu_count cpus memory_mb time_limit_min requeue workdir "
    "output_path error_path image_name image_path image_digest profile_spec array_spec het_parts state slurm_state "
    "slurm_job_id slurm_cluster reason reason_description nodes submit_error created_at submitted_at start_at end_at "
    "exit_code signal elapsed_s gpu_hours restart_count runs slurm_memory_mb slurm_memory_per gpu_summary"
).split()


def portal_version() -> str:
    """The portal's version: the installed ``gpu-portal`` distribution's (pyproject.toml's
    ``version``); "" when it is not installed as a distribution."""
    try:
        return metadata.version("gpu-portal")
    except metadata.PackageNotFoundError:
        return ""


def history_rows(rows, *, owner_id: int) -> list[dict]:
    """Audit rows (``AuditEvent``) as the bundle writes them, oldest first: ``at`` (ISO 8601),
    ``actor`` (the owner's user name, "portal" for the portal itself, "another person" for anyone
    else: an admin's or a lead's name is theirs), ``action``, ``old``, ``new``."""
    out = []
    for row in sorted(rows, key=lambda r: (r.at, r.pk)):
        if row.actor_id is None:
            actor = "portal"
        elif row.actor_id == owner_id:
            actor = row.actor.username
        else:
            actor = "another person"
        out.append({"at": row.at.isoformat(), "actor": actor, "action": row.action, "old": row.old, "new": row.new})
    return out


def slurm_view(cluster: str, job_id: str, *, as_user: str, ended: bool) -> tuple:
    """``(scontrol, sacct)`` of one Slurm job (:mod:`slurm.job_view`, as ``as_user``): ``scontrol
    show job`` always; ``sacct`` when slurmctld no longer holds the job, could not be asked, or the
    job has ``ended`` (``None`` otherwise)."""
    gateway = get_gateway(cluster)
    scontrol = scontrol_show_job(gateway, job_id, as_user=as_user)
    sacct = sacct_job(gateway, job_id, as_user=as_user) if ended or scontrol.gone or scontrol.error else None
    return scontrol, sacct


def node_records(cluster: str, node_list: str) -> tuple[list, str, str]:
    """``(nodes, note, slurm_version)``: the stored snapshot's records of the nodes in ``node_list``
    (a Slurm node list, ``g[1-2]``), why there are none, and the Slurm version the poller last read."""
    snapshot = snapshot_load(with_jobs=False, cluster=cluster)
    if snapshot is None:
        return [], "the portal has not polled this cluster yet", ""
    try:
        names = set(expand_nodes(node_list))
    except ValueError:
        names = set()
    nodes = [n for n in snapshot.nodes if n.name in names]
    note = "" if nodes else ("it has run on no node" if not names else f"the last poll has no record of {node_list}")
    return nodes, note, snapshot.slurm_version


def _script(job: Job) -> tuple[str | None, str, list[str] | None, str]:
    """(script, why not, sbatch argv, why not) of ``job``."""
    if job.is_outside:
        script = job_batch_script(job)
        why = "it was submitted outside the portal, so the portal did not send it"
        return (script.text or None), script.error, None, why
    if not job.output_path:
        return job.script, "", None, "the job was never sent to Slurm"
    try:
        home = user_home(job.user.username, cluster=job.cluster) if job.image_name else ""
        sent = render_batch_script(job, home=home)
    except (SlurmError, ValueError) as exc:
        return job.script, "", None, f"the script as sent could not be made again ({exc}); script.sh is the one typed"
    cluster = cluster_get(job.cluster)
    if cluster is None:
        return sent, "", None, f"the cluster {job.cluster} is no longer configured"
    return sent, "", sbatch_argv(job, cluster.sbatch_helper), ""


def _tail(job: Job, path: str) -> LogTail:
    if not path:
        return LogTail(missing=True, where_unknown=True)
    return log_tail_read(job.cluster, path, as_user=job.user.username, limit=BUNDLE_LOG_BYTES)


def job_gathered(job: Job) -> Gathered:
    """The bundle's inputs for ``job`` (see the module): its fields, the batch script as sent (an
    outside job's from Slurm), the sbatch command, its audit rows, Slurm's view when it has a Slurm
    id, the last :data:`BUNDLE_LOG_BYTES` of each log, its nodes' state and the versions."""
    script, script_note, argv, argv_note = _script(job)
    settings = {name: getattr(job, name) for name in JOB_FIELDS}
    settings.update(owner=job.user.username, cluster=job.cluster, script_typed=job.script)
    scontrol = sacct = None
    slurm_note = ""
    logs = []
    if job.slurm_job_id:
        scontrol, sacct = slurm_view(job.cluster, str(job.slurm_job_id), as_user=job.user.username, ended=job.is_final)
        streams = [("stdout", log_path(job, "out")), ("stderr", log_path(job, "err"))]
        if streams[0][1] == streams[1][1]:
            streams = streams[:1]  # one file for both
        logs = [Log(s, p, _tail(job, p)) for s, p in streams]
    else:
        slurm_note = "the job has no Slurm job id (it never reached Slurm)"
    nodes, node_note, slurm_version = node_records(job.cluster, job.nodes)
    return Gathered(
        title=f"job {job.slurm_job_id or '(not in Slurm)'} “{job.name}” on {job.cluster}",
        settings=settings,
        script=script,
        script_note=script_note,
        sbatch=argv,
        sbatch_note=argv_note,
        history=history_rows(AuditEvent.objects.filter(job=job).select_related("actor"), owner_id=job.user_id),
        scontrol=scontrol,
        sacct=sacct,
        slurm_note=slurm_note,
        logs=logs,
        nodes=nodes,
        node_note=node_note,
        portal_version=portal_version(),
        slurm_version=slurm_version,
    )


def may_download(user, *, owner_id: int, account: str) -> bool:
    """Whether ``user`` may download the bundle of a job or session of ``owner_id`` charged to
    ``account`` (a team's Slurm account): its owner, a portal admin, or a lead of that team (those who
    may open the team's page, :func:`teams.selectors.team_for_viewer`)."""
    if not user.is_authenticated:
        return False
    if user.pk == owner_id:
        return True
    return user.is_staff or (bool(account) and team_for_viewer(name=account, user=user) is not None)
