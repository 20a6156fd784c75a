"""A batch job's stdout/stderr file, from what Slurm's job record says (squeue's ``standard_output``,
``standard_error``, ``current_working_directory``).

Slurm 22.05's ``squeue --json`` writes the ``--output``/``--error`` pattern as given
(``/tmp/portal-it-%j.out``) and ``""`` when none was given; 24.11 writes the path with its
placeholders already filled in for that record (``/home/alice/gpuportal-fixtures/fx-exit3-17.out``,
recorded in ``tests/fixtures/slurm/24.11/squeue_all.json``). :func:`output_path` gives the file in both
cases, filling in the placeholders as slurmstepd does for a batch step (``src/slurmd/slurmstepd/fname.c``).
"""

from __future__ import annotations

import re

#: Slurm's NO_VAL, which ``%a`` stands for in a job that is not an array task.
NO_VAL = 4294967294
#: slurmstepd's widest zero padding (``%9999a`` pads to 10).
MAX_WIDTH = 10

_PLACEHOLDER = re.compile(r"%(\d*)([%AabJjNnstux])")
_SLASHES = re.compile(r"/{2,}")


def expand_pattern(
    pattern: str,
    *,
    job_id: int,
    array_job_id: int = 0,
    array_task_id: int | None = None,
    user: str = "",
    name: str = "",
    node: str = "",
) -> str:
    """``pattern`` with Slurm's filename placeholders filled in for a batch step: ``%%`` ``%``,
    ``%A`` the array's job id (the job id when not an array task), ``%a`` the task id (4294967294 when
    not an array task), ``%b`` the task id modulo 10, ``%j``/``%J`` the job id, ``%N`` the first node,
    ``%n``/``%s``/``%t`` 0 (node, step and task of the batch script), ``%u`` the user, ``%x`` the job
    name; a number after ``%`` pads with zeros (``%3a`` -> ``007``, at most 10). A pattern holding
    ``\\\\`` is not expanded (Slurm then only drops the backslashes). Any other ``%`` is left as is."""
    if "\\" in pattern:
        return pattern.replace("\\", "")
    task = array_task_id if array_task_id is not None else NO_VAL
    values = {
        "%": "%",
        "A": str(array_job_id if array_task_id is not None and array_job_id else job_id),
        "a": str(task),
        "b": str(task % 10),
        "J": str(job_id),
        "j": str(job_id),
        "N": node,
        "n": "0",
        "s": "0",
        "t": "0",
        "u": user,
        "x": name,
    }

    def fill(match: re.Match) -> str:
        width, letter = match.group(1), match.group(2)
        value = values[letter]
        if letter == "%":
            return "%"
        if width and value.isdigit():
            return value.zfill(min(int(width), MAX_WIDTH))
        return value

    return _PLACEHOLDER.sub(fill, pattern)


def output_path(
    written: str,
    *,
    cwd: str,
    job_id: int,
    array_job_id: int = 0,
    array_task_id: int | None = None,
    user: str = "",
    name: str = "",
    node: str = "",
    fallback: str = "",
) -> str:
    """The file a batch job's stream goes to, from the path its record gives (``written``: squeue's
    ``standard_output``/``standard_error``, expanded or not). ``""`` uses ``fallback`` (stderr: the
    stdout path, where Slurm sends it without ``--error``), else sbatch's default: ``slurm-%j.out``
    (``slurm-%A_%a.out`` for an array task) in the working directory ``cwd``. A relative path is
    taken in ``cwd``. ``""`` when neither the path nor ``cwd`` is known. Runs of ``/`` are one, as
    Linux reads them: 24.11 joins a job submitted from ``/`` as ``//slurm-130.out``."""
    if not written:
        if fallback:
            return fallback
        written = "slurm-%A_%a.out" if array_task_id is not None else "slurm-%j.out"
    if not written.startswith("/"):
        if not cwd:
            return ""
        written = cwd.rstrip("/") + "/" + written
    return _SLASHES.sub(
        "/",
        expand_pattern(
            written, job_id=job_id, array_job_id=array_job_id, array_task_id=array_task_id, user=user, name=name, node=node
        ),
    )
