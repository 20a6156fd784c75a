"""Slurm 22.05's ``sacct --json`` cut short (docs/clusters.md): 22.05 stops writing at a job whose QOS
has since been deleted (stderr ``_parser_dump: failed on field qos``). That job's record ends at
``"qos"``, with no ``state``; every later job is missing; sacct exits 0 and ``errors`` is empty.

Read by :mod:`.v0_0_38`: ``parse_sacct_jobs`` reads up to the cut (with a warning), and
``sacct_job_by_comment`` cannot answer "not there" for a key it did not find before the cut
(:func:`cut_short_error`). No I/O."""

from __future__ import annotations

from ..errors import SlurmError


def sacct_read_to_cut(doc: dict) -> tuple[list[dict], dict | None]:
    """(the job records of the ``sacct --json`` document ``doc`` before the cut, the cut record or
    ``None`` when the document is whole). Records are ``jobs[]``'s dicts, steps (entries carrying a
    ``step`` key) left out; the cut record is the first one without ``state``. Its fields before
    ``qos`` (``array``, ``comment``, ``job_id`` among them) are written as for any job."""
    jobs = [raw for raw in doc.get("jobs") or [] if isinstance(raw, dict) and "step" not in raw]
    cut = next((i for i, raw in enumerate(jobs) if "state" not in raw), None)
    return (jobs, None) if cut is None else (jobs[:cut], jobs[cut])


def cut_short_error(cut: dict, comment: str) -> SlurmError:
    """The :class:`SlurmError` (return code 0: sacct's own) of a key look-up for ``comment`` (the
    portal's ``portal:<key>``) that a document cut at record ``cut`` could not answer: the job may be
    among the ones left out, so "not there" would be a guess (and a retried submission would be sent
    twice). Its message names the job of the cut (``cut``'s ``job_id``), why, and what the site's
    admin does about it."""
    return SlurmError(
        ["sacct", "--json"],
        0,
        message=(
            f"accounting's JSON (sacct --json) was cut short at job {cut.get('job_id')}, a job whose QOS was "
            f"deleted (Slurm 22.05 cannot write such a job, nor any after it), so whether {comment} reached Slurm "
            "is unknown; never delete a QOS that jobs ran in: re-create it, or move those jobs' records to "
            "another QOS (docs/clusters.md)"
        ),
    )
