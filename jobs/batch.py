"""The batch script a job is submitted with (rendered only from validated values).

Every ``#SBATCH`` value is double-quoted the way sbatch reads it (backslash escapes ``"`` and
``\\``), so a job name like ``$(id)`` or ``a "b"`` reaches Slurm exactly as typed and is never
interpreted. A no-op line follows the portal's ``#SBATCH`` block: sbatch stops reading directives
at the first command, so nothing in the user's script can override them.
"""

from __future__ import annotations

import re

from .models import Job

_SHEBANG = re.compile(r"^#!.*\n?")


def sbatch_quote(value: str) -> str:
    """Quote one ``#SBATCH`` option value. Raises ``ValueError`` on a newline, carriage return or NUL
    (they would end the directive line); the policy refuses them earlier with a message."""
    if any(c in value for c in "\r\n\x00"):
        raise ValueError("#SBATCH values must be one line")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def gres_option(gpu_type: str, gpu_count: int) -> str | None:
    """``gpu:a100:2`` / ``gpu:2``, or ``None`` for no GPUs."""
    if not gpu_count:
        return None
    return f"gpu:{gpu_type}:{gpu_count}" if gpu_type else f"gpu:{gpu_count}"


def render_batch_script(job: Job) -> str:
    """The whole script sent to ``sbatch`` on stdin. Requires ``job.workdir``, ``job.output_path``
    and ``job.error_path`` to be set. Options: name, partition, account (when known), GRES,
    CPUs per task, memory (MiB), time (minutes), chdir, output/error files, ``--comment=portal:<key>``,
    and ``--requeue`` or ``--no-requeue`` (``job.requeue``)."""
    options: list[tuple[str, str]] = [
        ("job-name", job.name),
        ("partition", job.partition),
    ]
    if job.account:
        options.append(("account", job.account))
    gres = gres_option(job.gpu_type, job.gpu_count)
    if gres:
        options.append(("gres", gres))
    options += [
        ("nodes", "1"),
        ("ntasks", "1"),
        ("cpus-per-task", str(job.cpus)),
        ("mem", f"{job.memory_mb}M"),
        ("time", str(job.time_limit_min)),
        ("chdir", job.workdir),
        ("output", job.output_path),
        ("error", job.error_path),
        ("comment", job.comment),
    ]
    header = ["#!/bin/bash"] + [f"#SBATCH --{name}={sbatch_quote(value)}" for name, value in options]
    header.append("#SBATCH --requeue" if job.requeue else "#SBATCH --no-requeue")
    body = _SHEBANG.sub("", job.script.lstrip("\ufeff"), count=1) if job.script.startswith(("#!", "\ufeff#!")) else job.script
    body = body.replace("\r\n", "\n")
    if not body.endswith("\n"):
        body += "\n"
    return (
        "\n".join(header)
        + "\n: portal-job-script-begins  # directives above are the portal's; the user's script follows\n"
        + body
    )
