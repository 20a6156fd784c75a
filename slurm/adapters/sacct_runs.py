"""sacct's job records as accounting counts them: one :class:`AccountedRun` per ``jobs[]`` entry of
``sacct --json -X -D`` (with ``-D`` a requeued job has one record per run), with what the team
report needs beyond :class:`slurm.records.FinishedJob`: the ``billing`` TRES, the eligible time and the QOS.

Read from the document's version's adapter (the job fields, ``billing`` included: the record's
``tres.allocated`` ``{"type": "billing", "count": N}``, :func:`slurm.tres.tres_list_count`) and from
the same record's ``time.eligible`` and ``qos``, which both 22.05 (``dbv0.0.38``) and 24.11 (``v0.0.42``) write in
this shape (``tests/fixtures/slurm/``). No I/O."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..states import ACTIVE_STATES, JobState, is_failure
from ..times import parse_timestamp
from . import adapter_for


@dataclass(frozen=True)
class AccountedRun:
    """One sacct record (one run of a job). ``gpus``: allocated GPUs, all types (``tres.allocated``
    ``gres/gpu``, :func:`slurm.tres.parse_gpus`); ``billing``: the ``billing`` TRES of
    ``tres.allocated`` (``None`` when the record has none: a job that never started); Unix seconds
    ``submit`` (``time.submission``), ``eligible`` (``time.eligible``; ``None`` unknown), ``start``
    (``None``: never started) and ``end`` (``None``: still running or pending); ``elapsed``:
    ``time.elapsed`` seconds; ``failed``: :func:`slurm.states.is_failure` of the record's state and
    exit code (a run that was requeued is not a failure); ``qos``: the record's ``qos`` (the QOS it
    ran in, a plain string in 22.05's ``dbv0.0.38`` and 24.11's ``v0.0.42`` alike; ``scavenger``: a
    priority class that costs no quota), ``""`` when the record has none."""

    job_id: int
    user: str
    account: str
    state: JobState
    gpus: int
    billing: int | None
    elapsed: int
    submit: int | None
    eligible: int | None
    start: int | None
    end: int | None
    failed: bool
    qos: str = ""

    @property
    def active(self) -> bool:
        """Pending or running when sacct was read (a requeued run's record has its end)."""
        return self.end is None and self.state in ACTIVE_STATES

    def ran(self, now: float) -> tuple[float, float] | None:
        """(start, end) Unix seconds of the time it held its allocation: ``end`` or, while running,
        ``now``, or ``start + elapsed`` when sacct wrote no end; ``None`` for a run that never started."""
        if self.start is None:
            return None
        end = self.end if self.end is not None else (now if self.state in ACTIVE_STATES else self.start + self.elapsed)
        return float(self.start), float(max(self.start, min(end, now)))


def accounted_runs(doc: dict, *, argv: Sequence[str] = ("sacct", "--json")) -> list[AccountedRun]:
    """The records of a ``sacct --json`` document, in its order. Raises
    :class:`~slurm.errors.SlurmVersionUnknown` for a version no adapter reads and ``ValueError``
    for a field Slurm does not write."""
    raws = [raw for raw in doc.get("jobs") or [] if isinstance(raw, dict) and "step" not in raw]
    jobs = adapter_for(doc, argv=argv).parse_sacct_jobs(doc)
    if len(jobs) != len(raws):
        raise ValueError(f"sacct: {len(raws)} records but {len(jobs)} jobs read from them")
    runs = []
    for raw, job in zip(raws, jobs, strict=True):
        times = raw.get("time") or {}
        runs.append(
            AccountedRun(
                job_id=job.job_id,
                user=job.user,
                account=job.account,
                state=job.state,
                gpus=sum(job.gpus.values()),
                billing=job.billing,
                elapsed=job.elapsed,
                submit=job.submit,
                eligible=parse_timestamp(times.get("eligible")),
                start=job.start,
                end=job.end,
                failed=is_failure(job.state, job.exit_code, job.signal),
                qos=str(raw.get("qos") or ""),
            )
        )
    return runs
