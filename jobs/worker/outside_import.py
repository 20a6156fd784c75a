"""Jobs of the portal's users that ended without the portal ever seeing them queued (submitted and
finished between two polls, while the portal was down, or before the user first signed in), read
from accounting.

At most once per :data:`IMPORT_EVERY_S` per cluster, the poller (:func:`jobs.worker.services.snapshot_refresh`)
asks ``sacct --json -D -X -S <since> -u <every linked user>`` (one call, whatever the number of
users: ``-X`` leaves out job steps, which the rows do not need), from :data:`IMPORT_MARGIN_S` before
the last import; users linked since then have their last :data:`FIRST_LOOKBACK_S` read once. Every ended job in it without a
``portal:`` comment (sessions and portal jobs carry one) that no row holds yet by (cluster, job id,
submit time) becomes a finished outside row, in bulk; arrays and het jobs are folded first
(:mod:`slurm.entries`). Jobs still running or pending are left to the queue's path (:mod:`jobs.worker.outside`).
"""

from __future__ import annotations

import logging
import time
from datetime import UTC, datetime, timedelta

from django.core.cache import cache
from django.db import transaction

from accounts.models import LinkState, User
from audit.services import audit_many
from portal.dates import to_datetime
from slurm import SlurmError, SlurmGateway, paths
from slurm.adapters import adapter_for
from slurm.entries import ARRAY, HET, AccountingEntry, accounting_entries, derive_state, fold_accounting
from slurm.health import accounting_answered, accounting_failed
from slurm.records import billed_unit_minutes
from slurm.states import FINAL_STATES, JobState
from slurm.times import start_bound

from ..arrays import array_fields
from ..models import Job, JobKind, JobOrigin, memory_asked_mb, on_cluster, slurm_memory_fields
from .finish import _latest, exit_codes, exit_hidden, with_exits
from .identity import ID_REUSE_MARGIN_S, REQUEUE_STATES
from .outside import SMALL_MAX, _gpus, clean

logger = logging.getLogger(__name__)

#: Seconds between two imports of one cluster.
IMPORT_EVERY_S = 60
#: Seconds before the last import the next one reads from (jobs whose record arrived late).
IMPORT_MARGIN_S = 600
#: How far back the first import of a cluster reads (seconds): the last week.
FIRST_LOOKBACK_S = 7 * 86400


def _key(cluster: str) -> str:
    return f"cluster:{cluster}:outside-import"


def outside_import(gateway: SlurmGateway, *, cluster: str, now: float | None = None, force: bool = False) -> int | None:
    """Import the ended outside jobs of ``cluster``'s linked users from accounting (see the module
    docstring), unless the last import was less than :data:`IMPORT_EVERY_S` ago (``force``: anyway).
    A user linked since the last import has their last :data:`FIRST_LOOKBACK_S` read once (one more
    call, for the new users only). Returns the number of rows made, ``None`` when skipped or when
    accounting did not answer (recorded in :mod:`slurm.health`; the next poll tries again). Never
    raises for Slurm's sake."""
    now = time.time() if now is None else now
    last = cache.get(_key(cluster)) or {}
    if not force and now - last.get("at", 0) < IMPORT_EVERY_S:
        return None
    names = sorted(User.objects.filter(link_state=LinkState.LINKED).exclude(username="").values_list("username", flat=True))
    known = set(last.get("users", ()))
    fresh = [n for n in names if n not in known]
    windows = []  # (since, users)
    if last.get("at") and known & set(names):
        windows.append((last["at"] - IMPORT_MARGIN_S, [n for n in names if n in known]))
    if fresh:
        windows.append((now - FIRST_LOOKBACK_S, fresh))
    made = 0
    for since, users in windows:
        records = _read(gateway, cluster=cluster, since=since, users=users)
        if records is None:
            return None
        made += import_records(records, cluster=cluster, exits=_hidden_exits(gateway, records))
    cache.set(_key(cluster), {"at": now, "users": names}, timeout=None)
    return made


def _read(gateway: SlurmGateway, *, cluster: str, since: float, users: list[str]) -> list | None:
    """sacct's ended-or-not jobs of ``users`` since ``since`` (Unix s), ``None`` when accounting did
    not answer. sacct refuses a ``-u`` list naming a user the cluster does not know ("Invalid user
    id"): then every user's jobs are read (``-a``) and the others left out."""
    base = ["sacct", "--json", "-D", "-X", "-S", start_bound(datetime.fromtimestamp(since, UTC))]
    for argv in (base + ["-u", ",".join(users)], base + ["-a"]):
        try:
            doc = gateway.run_json(argv, timeout=60)
            records = adapter_for(doc, argv=argv).parse_sacct_jobs(doc)
        except SlurmError as exc:
            if "-u" in argv and "Invalid user" in (exc.stderr or "") + str(exc):
                continue
            logger.warning("outside-jobs import of %s failed: %s", cluster, exc)
            accounting_failed(exc, cluster=cluster)
            return None
        except ValueError as exc:
            logger.warning("outside-jobs import of %s failed: %s", cluster, exc)
            accounting_failed(exc, cluster=cluster)
            return None
        accounting_answered(cluster=cluster)
        wanted = set(users)
        return [f for f in records if f.user in wanted]
    return None


def _chains(records: list) -> list[list]:
    """A plain job id's records split into jobs: runs that follow a requeue stay with their job
    (:data:`jobs.worker.identity.REQUEUE_STATES`); any other record after an ended one is another job that
    Slurm gave the same id."""
    chains: list[list] = []
    for f in sorted(records, key=lambda f: (f.submit or 0, f.start or 0, f.end or 0)):
        if chains and chains[-1][-1].state in REQUEUE_STATES:
            chains[-1].append(f)
        else:
            chains.append([f])
    return chains


def _hidden_exits(gateway: SlurmGateway, records: list) -> dict[int, tuple[int | None, int | None]]:
    """Exit codes 22.05's JSON hides (a failed job written as return code 0) among ``records``, by
    each record's own job id (``JobIDRaw``: a plain job's, an array task's, a het component's), from
    one ``sacct -P -o JobIDRaw,Comment,ExitCode`` call (:func:`jobs.worker.finish.exit_codes`); {} when
    none is hidden. Of an array or het job only the record whose code its row takes is asked for
    (:func:`_first_failed`): an array with thousands of failed tasks is one id, not thousands."""
    hidden = {}
    for key, group in accounting_entries(f for f in records if not f.comment.startswith("portal:")).items():
        if group[0].array_job_id or group[0].het_job_id:
            worst = _first_failed(fold_accounting(key, sorted(group, key=_order)))
            group = [worst] if worst is not None else []
        hidden.update({f.job_id: f.comment for f in group if f.state in FINAL_STATES and exit_hidden(f)})
    return exit_codes(gateway, hidden) if hidden else {}


def _order(f) -> tuple:
    """How :func:`_row` orders one job's records: by submit, start and end."""
    return (f.submit or 0, f.start or 0, f.end or 0)


def _last_runs(entry: AccountingEntry) -> list:
    """The latest run of each task of an array or component of a het job (``entry``, folded from its
    records in :func:`_order`), in :func:`_order`: sacct lists every run of a requeued task, and an
    earlier one (PREEMPTED, REQUEUED, NODE_FAIL) is not how the task ended."""
    return sorted(_latest(entry), key=_order)


def _ended(key: int, kind: str, records: list) -> bool:
    """Whether the job of ``records`` (one entry of :func:`import_records`) has ended: the latest run
    of each task or component (:func:`_last_runs`), or a plain job's last run, is final with an end
    time. An earlier run requeued (``REQUEUED``, not final) is not how the job ended."""
    latest = records[-1:] if kind == "job" else _last_runs(fold_accounting(key, sorted(records, key=_order)))
    return all(f.state in FINAL_STATES and f.end for f in latest)


def _first_failed(entry: AccountingEntry):
    """The record of an array's or het job's ``entry`` whose exit code and signal its row takes: of
    :func:`_last_runs`, the first that neither completed nor was cancelled; ``None`` when there is none."""
    return next((f for f in _last_runs(entry) if f.state not in (JobState.COMPLETED, JobState.CANCELLED)), None)


def import_records(records: list, *, cluster: str, exits: dict | None = None) -> int:
    """Make finished outside rows of ``cluster`` for the ended jobs among sacct ``records`` (see the
    module docstring); ``exits``: a record's own job id -> (exit code, signal) where accounting's JSON
    hides them (:func:`_hidden_exits`).
    Returns how many rows were made. Four queries whatever the number of records."""
    users = {
        u.username: u for u in User.objects.filter(link_state=LinkState.LINKED, username__in={f.user for f in records if f.user})
    }
    jobs = []  # (entry id, kind, records of one job)
    for key, group in accounting_entries(f for f in records if f.user in users and not f.comment.startswith("portal:")).items():
        first = group[0]
        if first.array_job_id or first.het_job_id:
            jobs.append((key, ARRAY if first.array_job_id else HET, group))
        else:
            jobs.extend((key, "job", chain) for chain in _chains(group))
    jobs = [j for j in jobs if _ended(*j)]
    if not jobs:
        return 0
    held = list(
        Job.objects.filter(on_cluster(cluster), slurm_job_id__in={key for key, _, _ in jobs}).values_list(
            "slurm_job_id", "slurm_submit_at", "state", "origin", "submitted_at", "created_at", "end_at", "updated_at"
        )
    )
    active = {row[0] for row in held if row[2] not in FINAL_STATES}
    submitted = {(row[0], row[1]) for row in held if row[1]}
    portal: dict[int, list] = {}  # job id -> (sent, ended) of the portal's rows of that id
    for i, _, state, origin, sent, created, ended, updated in held:
        if origin == JobOrigin.PORTAL:  # a final row without an end time (never ran): ended by its last change
            portal.setdefault(i, []).append((sent or created, ended or (updated if state in FINAL_STATES else None)))
    new = []
    for key, kind, group in jobs:
        first_submit = to_datetime(min((f.submit for f in group if f.submit), default=None))
        # A requeue gives the job a new submit time: the queue's row holds the run it saw, any of them.
        runs = {(key, to_datetime(f.submit)) for f in group if f.submit}
        if key in active or runs & submitted or first_submit is None or _portal_sent(portal.get(key, ()), first_submit):
            continue  # the queue's path has it, or a row already holds this job
        if kind != "job":  # the failed task's or component's code, where 22.05's JSON hid it
            group = with_exits(group, exits or {})
        new.append(_row(key, kind, group, users[group[0].user], cluster, first_submit))
        if kind == "job" and key in (exits or {}):
            new[-1].exit_code, new[-1].signal = exits[key]
    if not new:
        return 0
    with transaction.atomic():
        Job.objects.bulk_create(new, batch_size=500)
        for job in new:
            job.created_at = job.slurm_submit_at
        Job.objects.bulk_update(new, ["created_at"], batch_size=500)
        audit_many(
            actor=None,
            action="job.outside_found",
            changes=[
                (j, {}, {"cluster": j.slurm_cluster, "slurm_job_id": j.slurm_job_id, "state": j.state, "source": "accounting"})
                for j in new
            ],
        )
    return len(new)


def _portal_sent(rows: list | tuple, first_submit: datetime) -> bool:
    """Whether one of the portal's rows of the same job id, given as (sent, ended) (``Job.submitted_at``
    or ``created_at``; ``Job.end_at``, or for a final row without one its ``updated_at``), is this job: Slurm submitted the job's first run no earlier than
    the portal sent it (less :data:`~jobs.worker.identity.ID_REUSE_MARGIN_S` of clock skew, the rule
    the poller's accounting read uses) and no later than the row's job ended. A row whose job ended
    before this one was submitted holds an older job whose id Slurm gave again (ids start over after
    the controller's state is lost)."""
    margin = timedelta(seconds=ID_REUSE_MARGIN_S)
    return any(sent - margin <= first_submit and (ended is None or first_submit <= ended + margin) for sent, ended in rows)


def _row(key: int, kind: str, group: list, user: User, cluster: str, submitted) -> Job:
    """A finished outside row from one job's sacct records (the latest run decides a plain job)."""
    group = sorted(group, key=_order)
    last = group[-1]
    fields = _asked_fields(key, last, user, cluster, submitted)
    starts = [f.start for f in group if f.start]
    ends = [f.end for f in group if f.end]
    if kind == "job":
        state, exit_code, signal = last.state, last.exit_code, last.signal
        elapsed, gpu_hours, billed = last.elapsed, last.gpu_hours, last.billed_unit_minutes
        start = last.start
        fields["restart_count"] = min(SMALL_MAX, len(group) - 1)
    else:
        folded = fold_accounting(key, group)
        runs = _last_runs(folded)
        state = derive_state(f.state for f in runs) if kind == HET else derive_state(s for s, ids in folded.tasks.items() if ids)
        worst = _first_failed(folded) or runs[0]
        exit_code, signal = worst.exit_code, worst.signal
        start = min(starts) if starts else None
        elapsed = max(0, max(ends) - start) if start and ends else 0
        gpu_hours, billed = sum(f.gpu_hours for f in group), billed_unit_minutes(group)
        fields.update(_parts_fields(kind, folded, runs))
    return Job(
        **fields,
        state=state,
        slurm_state=clean(last.state_raw if kind == "job" else state.value, 64),
        exit_code=exit_code,
        signal=signal,
        start_at=to_datetime(start),
        end_at=to_datetime(max(ends)) if ends else None,
        elapsed_s=elapsed,
        gpu_hours=gpu_hours,
        billed_unit_minutes=billed,
    )


def _asked_fields(key: int, last, user: User, cluster: str, submitted) -> dict:
    """The row's fields for who submitted job ``key`` on ``cluster``, when (``submitted``, a
    datetime) and what it asked for, as the job's latest sacct record ``last`` has them (texts cut
    to their columns, counts capped at ``SMALL_MAX``, memory in MiB); Job keyword arguments."""
    gpus = last.gpus or last.gpus_requested
    gpu_type, gpu_count = _gpus(gpus)
    return dict(
        user=user,
        origin=JobOrigin.OUTSIDE,
        slurm_cluster=cluster,
        slurm_job_id=key,
        slurm_submit_at=submitted,
        submitted_at=submitted,
        script="",
        requeue=False,
        name=clean(last.name, 200),
        partition=clean(last.partition, 64),
        account=clean(last.account, 64),
        gpu_type=clean(gpu_type, 64),
        gpu_count=gpu_count,
        cpus=min(SMALL_MAX, last.cpus or 1),
        memory_mb=memory_asked_mb(last),
        time_limit_min=last.time_limit or 0,
        workdir=clean(last.cwd, 1024),
        nodes=clean(last.nodes, 1024),
        output_path=clean(_path(last, last.stdout), 1024),
        error_path=clean(_path(last, last.stderr or last.stdout), 1024),
        **slurm_memory_fields(last),
    )


def _parts_fields(kind: str, folded, runs: list) -> dict:
    """The row's fields for the parts of an array (``kind`` ARRAY: its tasks by state, their spec and
    counts, from ``folded``, the records folded by :func:`slurm.entries.fold_accounting`) or of a het job (HET:
    one dict per component, from ``runs``, each component's latest run: :func:`_last_runs`, by offset);
    Job keyword arguments."""
    if kind == ARRAY:
        return dict(kind=JobKind.ARRAY, **array_fields(folded.tasks, None))
    return dict(
        kind=JobKind.HET,
        het_parts=[
            {
                "offset": f.het_job_offset or 0,
                "job_id": f.job_id,
                "state": f.state.value,
                "partition": f.partition,
                "nodes": f.nodes,
                "gpus": f.gpus,
                "cpus": f.cpus,
            }
            for f in sorted(runs, key=lambda f: f.het_job_offset or 0)
        ],
    )


def _path(f, written: str) -> str:
    """A stream's file from a sacct record: 24.11 keeps the path (``stdout_expanded``); 22.05's
    accounting has none, so ``""`` (the page says the log's place is not known)."""
    if not written:
        return ""
    return paths.output_path(
        written, cwd=f.cwd, job_id=f.job_id, array_job_id=f.array_job_id, array_task_id=f.array_task_id, user=f.user, name=f.name
    )
