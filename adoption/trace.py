"""The anonymized job trace: every user's jobs of a window, read from accounting,
one row per job record, with users and accounts replaced by keyed hashes, so that a site can share
its trace for scheduling research without names.

Source: ``sacct --json -a -D -X -S <since> -E <until>`` through the cluster's gateway as the
service user (``-a`` every user, ``-D`` every run of a requeued job, ``-X`` allocations only, not
steps), read by the cluster's adapter (:mod:`slurm.adapters`, ``parse_sacct_jobs`` ->
:class:`slurm.records.FinishedJob`). Accounting, not the portal's Job rows: it holds every user's
jobs, whether the portal knows the user or not. Jobs whose submit time (``time.submission``) falls
in ``[since, until)`` are kept.

What a row holds (:data:`FIELDS`): the cluster, job id (array job id and task id, het job id and
offset), ``user`` and ``account`` as keyed hashes (:func:`pseudonym`), submit/start/end times (ISO
8601 UTC, "" when it never started or has not ended), partition, GPUs by type (allocated, or asked
for when it never ran), CPUs (``required.CPUs``), memory in MiB per node or per CPU
(``memory_per``: ``node`` / ``cpu``), time limit in minutes ("" unlimited), state (the base state,
``CANCELLED``: not Slurm's ``CANCELLED by <uid>`` text), exit code and signal, and the node list.
Node names are kept: they name machines, not people, and schedulers' traces need them (placement,
node failures). Left out: the job name, comment, working directory, stdout/stderr paths, the user
who cancelled it, QOS and every other free text.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import io
import json
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime

from django.conf import settings
from django.utils.crypto import salted_hmac

from jobs.worker.finish import exit_codes, exit_hidden
from slurm import SlurmGateway
from slurm.adapters import adapter_for
from slurm.records import FinishedJob
from slurm.states import FINAL_STATES
from slurm.times import START_MARGIN, start_bound

#: Hex digits kept of each HMAC-SHA256 (64 bits: no collision among a site's users and accounts).
HASH_LENGTH = 16
#: The row's fields, in the order of the CSV's columns.
FIELDS = (
    "cluster",
    "job_id",
    "array_job_id",
    "array_task_id",
    "het_job_id",
    "het_job_offset",
    "user",
    "account",
    "submit",
    "start",
    "end",
    "partition",
    "gpus",
    "cpus",
    "memory_mib",
    "memory_per",
    "time_limit_min",
    "state",
    "exit_code",
    "signal",
    "nodes",
)
#: Seconds one sacct call of the export may take (a long window of a busy cluster is a big answer).
SACCT_TIMEOUT_S = 300
#: Job ids per ``sacct -j`` call when reading the exit codes 22.05's JSON hides.
EXIT_BATCH = 500


def trace_key() -> bytes:
    """The HMAC key: ``PORTAL_TRACE_SECRET`` as UTF-8, or, when that is empty, a key derived from
    ``SECRET_KEY`` (Django's ``salted_hmac`` with the salt ``adoption.trace``: SECRET_KEY itself is
    never the key, so a hash gives nothing about it)."""
    secret = getattr(settings, "PORTAL_TRACE_SECRET", "")
    if secret:
        return secret.encode()
    return salted_hmac("adoption.trace", "trace-export-key", algorithm="sha256").digest()


def pseudonym(kind: str, name: str, *, key: bytes) -> str:
    """The keyed hash standing for ``name`` (a user or account name; ``kind`` ``user`` or
    ``account``, so that a user and an account of the same name get different hashes): the first
    :data:`HASH_LENGTH` hex digits of HMAC-SHA256(``key``, ``kind:name``). The same key and name give
    the same hash in every export; without the key a name cannot be checked against it. ``""``
    stays ``""``."""
    if not name:
        return ""
    return hmac.new(key, f"{kind}:{name}".encode(), hashlib.sha256).hexdigest()[:HASH_LENGTH]


def _iso(seconds: int | None) -> str:
    return datetime.fromtimestamp(seconds, UTC).isoformat().replace("+00:00", "Z") if seconds else ""


def _gpus(f: FinishedJob) -> dict[str, int]:
    gpus = f.gpus if f.start else (f.gpus_requested or f.gpus)
    return {t or "gpu": n for t, n in sorted(gpus.items()) if n}


def trace_row(f: FinishedJob, *, cluster: str, key: bytes, exit: tuple[int | None, int | None] | None = None) -> dict:
    """One row (:data:`FIELDS`) of a sacct record; ``exit``: (exit code, signal) read apart where
    22.05's JSON hides them. Values: ints, ``None`` for what Slurm did not report, ISO 8601 UTC text
    for times (``""`` none), ``gpus`` a dict type -> count (``gpu`` for untyped GPUs)."""
    code, signal = exit if exit is not None else (f.exit_code, f.signal)
    memory, per = (f.memory_per_cpu, "cpu") if f.memory_per_cpu else (f.memory_per_node, "node")
    return {
        "cluster": cluster,
        "job_id": f.job_id,
        "array_job_id": f.array_job_id or None,
        "array_task_id": f.array_task_id,
        "het_job_id": f.het_job_id or None,
        "het_job_offset": f.het_job_offset,
        "user": pseudonym("user", f.user, key=key),
        "account": pseudonym("account", f.account, key=key),
        "submit": _iso(f.submit),
        "start": _iso(f.start),
        "end": _iso(f.end),
        "partition": f.partition,
        "gpus": _gpus(f),
        "cpus": f.cpus,
        "memory_mib": memory,
        "memory_per": per if memory is not None else "",
        "time_limit_min": f.time_limit,
        "state": f.state.value,
        "exit_code": code,
        "signal": signal,
        "nodes": f.nodes,
    }


def trace_read(gateway: SlurmGateway, *, since: datetime, until: datetime, now: datetime | None = None) -> list[FinishedJob]:
    """Every user's job records submitted in ``[since, until)`` (aware datetimes) from one ``sacct
    --json -a -D -X`` call as the service user (bounds as ``now-<N>seconds``,
    :func:`slurm.times.start_bound`, right in any zone; the records are then kept by their own
    submit time). Raises :class:`slurm.SlurmError` (Slurm refused or did not answer) or
    ``ValueError`` / :class:`slurm.errors.SlurmVersionUnknown` (a document no adapter reads)."""
    now = now or datetime.now(UTC)
    argv = ["sacct", "--json", "-a", "-D", "-X", "-S", start_bound(since, now=now)]
    if until < now:
        # The end bound a margin later than asked (clock skew); the submit-time filter below is exact.
        later = max(0, int((now - until - START_MARGIN).total_seconds()))
        argv += ["-E", f"now-{later}seconds"]
    doc = gateway.run_json(argv, timeout=SACCT_TIMEOUT_S)
    records = adapter_for(doc, argv=argv).parse_sacct_jobs(doc)
    lo, hi = since.timestamp(), until.timestamp()
    return [f for f in records if f.submit is not None and lo <= f.submit < hi]


def hidden_exits(gateway: SlurmGateway, records: Iterable[FinishedJob]) -> dict[int, tuple[int | None, int | None]]:
    """Exit codes that 22.05's sacct JSON hides (a failed job written as return code 0) of the
    plain, ended jobs among ``records``, from ``sacct -P -o JobIDRaw,Comment,ExitCode`` in batches
    of :data:`EXIT_BATCH` (:func:`jobs.worker.finish.exit_codes`); {} when none is hidden. The comments are
    used only to pick each job's own record and never reach the output."""
    hidden = {
        f.job_id: f.comment
        for f in records
        if not (f.array_job_id or f.het_job_id) and f.state in FINAL_STATES and exit_hidden(f)
    }
    ids = sorted(hidden)
    codes: dict[int, tuple[int | None, int | None]] = {}
    for n in range(0, len(ids), EXIT_BATCH):
        codes.update(exit_codes(gateway, {i: hidden[i] for i in ids[n : n + EXIT_BATCH]}))
    return codes


def csv_lines(rows: Iterable[dict]) -> Iterator[str]:
    """The rows as CSV text, a header of :data:`FIELDS` first; ``gpus`` written ``a100:2;v100:1``
    ("" none), ``None`` as an empty cell."""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(FIELDS)
    yield out.getvalue()
    for row in rows:
        out.seek(0)
        out.truncate()
        values = {**row, "gpus": ";".join(f"{t}:{n}" for t, n in row["gpus"].items())}
        writer.writerow(["" if values[k] is None else values[k] for k in FIELDS])
        yield out.getvalue()


def jsonl_lines(rows: Iterable[dict]) -> Iterator[str]:
    """The rows as JSON Lines: one object per line, keys :data:`FIELDS`, ``null`` for ``None``."""
    for row in rows:
        yield json.dumps({k: row[k] for k in FIELDS}, separators=(",", ":")) + "\n"
