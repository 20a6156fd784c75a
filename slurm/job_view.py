"""Slurm's own view of one job, as text a person reads (the support bundle): ``scontrol show job``
while slurmctld holds the job, ``sacct`` fields after. Both run as the job's owner, so Slurm shows
only what the owner may see, and neither asks for the job's environment (``scontrol show job``
prints it only with ``--details``/``-dd``, which is never passed) nor its batch script.

The text is kept as Slurm printed it; the readers below only pick out what the caller checks (is it
this job, which nodes). Recorded outputs: ``tests/fixtures/slurm/<release>/bundle/``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from .errors import SlurmError
from .gateway import SlurmGateway

#: The ``sacct --format`` fields of the bundle's accounting member (Slurm's names; ``--parsable2``:
#: ``|`` between fields, a heading line first). Times are Slurm's local ``YYYY-MM-DDTHH:MM:SS``,
#: ``Elapsed`` is ``[D-]HH:MM:SS``, ``ReqMem`` as Slurm writes it (e.g. ``1000M``), TRES lists as
#: ``cpu=1,mem=1000M,node=1,billing=1``.
SACCT_FIELDS = (
    "JobID",
    "JobName",
    "User",
    "Account",
    "Partition",
    "State",
    "ExitCode",
    "DerivedExitCode",
    "Reason",
    "Submit",
    "Eligible",
    "Start",
    "End",
    "Elapsed",
    "Timelimit",
    "NodeList",
    "ReqTRES",
    "AllocTRES",
    "ReqMem",
    "MaxRSS",
    "WorkDir",
)

#: What ``scontrol show job`` writes on stderr for an id slurmctld no longer holds (after
#: ``MinJobAge``) or never had: ``slurm_load_jobs error: Invalid job id specified`` (22.05 and 24.11).
_GONE = "Invalid job id specified"

#: One ``Key=Value`` of ``scontrol show job``'s text: a value runs to the next `` Key=`` or the line's end.
_PAIR = re.compile(r"(?:^|\s)([A-Za-z][A-Za-z0-9_:/]*)=(.*?)(?=\s+[A-Za-z][A-Za-z0-9_:/]*=|\s*$)")


@dataclass(frozen=True)
class SlurmJobText:
    """What one read gave: ``text`` Slurm's output as printed (UTF-8, invalid bytes replaced; "" when
    there was none), ``argv`` the command, ``gone`` True when slurmctld no longer holds the job
    (``scontrol`` only), ``error`` why it could not be read ("" when fine), ``records`` the text read
    into one ``{field: value}`` per job record (``scontrol``: per array task or het component;
    ``sacct``: per line, the job and its steps)."""

    argv: tuple[str, ...]
    text: str = ""
    gone: bool = False
    error: str = ""
    records: list[dict[str, str]] = field(default_factory=list)


def scontrol_records(text: str) -> list[dict[str, str]]:
    """``scontrol show job`` text -> one ``{Key: Value}`` per job record (records are separated by a
    blank line). A value is everything up to the next `` Key=`` on its line, so
    ``Reason=None Dependency=(null)`` gives two fields; a value that itself holds `` Word=`` is cut there
    (Slurm quotes none). ``[]`` for empty text."""
    records: list[dict[str, str]] = []
    for block in re.split(r"\n\s*\n", text.strip()):
        fields = {key: value for line in block.splitlines() for key, value in _PAIR.findall(line)}
        if fields:
            records.append(fields)
    return records


def sacct_records(text: str) -> list[dict[str, str]]:
    """``sacct --parsable2 --format=...`` text -> one ``{Field: value}`` per line after the heading
    (the heading names the fields). A job name holding ``|`` shifts the fields after it; the heading's
    count is kept and the rest joined into the last. ``[]`` for empty text."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines:
        return []
    heading = lines[0].split("|")
    rows = []
    for line in lines[1:]:
        values = line.split("|", len(heading) - 1)
        rows.append(dict(zip(heading, values + [""] * (len(heading) - len(values)), strict=True)))
    return rows


def scontrol_show_job(gateway: SlurmGateway, job_id: str, *, as_user: str, timeout: float = 10) -> SlurmJobText:
    """``scontrol show job <job_id>`` as ``as_user`` (``job_id``: ``123``, or ``123_4`` for one array
    task). ``gone`` when slurmctld answers that it does not hold the id (the job ended more than
    ``MinJobAge`` seconds ago). Never raises: a failure to run comes back in ``error``."""
    argv = ("scontrol", "show", "job", job_id)
    try:
        result = gateway.run(list(argv), as_user=as_user, check=False, timeout=timeout)
    except SlurmError as exc:
        return SlurmJobText(argv, error=exc.message)
    if result.returncode != 0:
        gone = _GONE in result.err
        return SlurmJobText(argv, gone=gone, error="" if gone else (result.err.strip() or f"exit {result.returncode}")[:300])
    return SlurmJobText(argv, text=result.out, records=scontrol_records(result.out))


def sacct_job(gateway: SlurmGateway, job_id: str, *, as_user: str, timeout: float = 10) -> SlurmJobText:
    """``sacct -j <job_id> --parsable2 --format=<SACCT_FIELDS>`` as ``as_user``: the job's line and its
    steps' (``123.batch``, ``123.extern``) from slurmdbd. Empty ``records`` when accounting has no
    such job yet. Never raises: a failure (slurmdbd down) comes back in ``error``."""
    argv = ("sacct", "-j", job_id, "--parsable2", "--format=" + ",".join(SACCT_FIELDS))
    try:
        result = gateway.run(list(argv), as_user=as_user, check=False, timeout=timeout)
    except SlurmError as exc:
        return SlurmJobText(argv, error=exc.message)
    if result.returncode != 0:
        return SlurmJobText(argv, error=(result.err.strip() or f"exit {result.returncode}")[:300])
    return SlurmJobText(argv, text=result.out, records=sacct_records(result.out))
