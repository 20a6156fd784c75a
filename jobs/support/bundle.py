"""The support bundle of a job or a session, as a zip, from what was gathered (:mod:`.gather`): a
pure function of its inputs, so a test builds it from recorded outputs and opens it.

Only the inputs of :class:`Gathered` go in. They hold the owner's own things (the settings they
submitted, their script, their logs, Slurm's record of their job as Slurm shows it to them), the
portal's rows about that one job, the state of the nodes it ran on (a drain's reason, not who
set it) and two version strings. Nothing
the portal itself keeps secret (API tokens, OIDC client secrets, SSH keys, settings' values) and no
other person's data (other jobs on the node, other people's names in the audit rows) is an input.
"""

from __future__ import annotations

import io
import json
import zipfile
from dataclasses import dataclass, field
from datetime import datetime

from slurm.job_view import SlurmJobText
from slurm.records import Node

from ..reads.logs import LogTail

#: The bytes of each log the bundle keeps: its last 256 KiB.
BUNDLE_LOG_BYTES = 256 * 1024


@dataclass(frozen=True)
class Log:
    """One log: ``stream`` (``stdout``/``stderr``), ``path`` on the cluster, ``tail`` what was read
    (:func:`jobs.reads.logs.log_tail_read`, at most :data:`BUNDLE_LOG_BYTES`)."""

    stream: str
    path: str
    tail: LogTail


@dataclass(frozen=True)
class Gathered:
    """What a bundle is made of. ``title``: "job 123 “resnet” on cluster2"; ``settings``: what was
    submitted and the portal's state of it (JSON-ready); ``script``: the batch script (``None``: left
    out, ``script_note`` says why); ``sbatch``: the exact command it was sent with (``None``: left
    out, ``sbatch_note`` why); ``history``: the portal's audit rows about it, oldest first
    (``at`` ISO time, ``actor``, ``action``, ``old``, ``new``); ``scontrol``/``sacct``: Slurm's view
    (``None``: not asked, ``slurm_note`` why); ``logs``; ``nodes``: the snapshot's records of the
    nodes it ran on; ``node_note``: why there are none; ``portal_version``, ``slurm_version`` (the
    poller's ``sinfo``/``squeue`` ``meta``; "" unknown); ``left_out``: more (what, why) lines for
    README.txt."""

    title: str
    settings: dict
    script: str | None = None
    script_note: str = ""
    sbatch: list[str] | None = None
    sbatch_note: str = ""
    history: list[dict] = field(default_factory=list)
    scontrol: SlurmJobText | None = None
    sacct: SlurmJobText | None = None
    slurm_note: str = ""
    logs: list[Log] = field(default_factory=list)
    nodes: list[Node] = field(default_factory=list)
    node_note: str = ""
    portal_version: str = ""
    slurm_version: str = ""
    left_out: list[tuple[str, str]] = field(default_factory=list)


def _slurm_member(name: str, read: SlurmJobText, left_out: list) -> tuple[str, str, str] | None:
    command = " ".join(read.argv)
    if read.error:
        left_out.append((f"{name} ({command})", f"Slurm could not be asked: {read.error}"))
        return None
    if read.gone:
        left_out.append(
            (f"{name} ({command})", "the job is no longer in Slurm's memory (slurmctld keeps it MinJobAge seconds after its end)")
        )
        return None
    if not read.records:
        left_out.append((f"{name} ({command})", "Slurm answered with no record of this job (accounting may not have it yet)"))
        return None
    return name, f"$ {command}\n{read.text}", f"Slurm's view: {command}, as the owner"


def _node_text(nodes: list[Node]) -> str:
    lines = []
    for n in nodes:
        gpus = ",".join(f"{t}:{c}" for t, c in sorted(n.gpus.items())) or "none"
        used = ",".join(f"{t}:{c}" for t, c in sorted(n.gpus_used.items())) or "none"
        lines += [
            f"NodeName={n.name} State={n.state_text} Partitions={','.join(n.partitions)}",
            f"   CPUs={n.cpus} CPUsAllocated={n.alloc_cpus} RealMemoryMiB={n.real_memory} AllocatedMemoryMiB={n.alloc_memory}",
            f"   GPUs={gpus} GPUsUsed={used}",
            f"   Reason={n.reason or 'none'}",
            "",
        ]
    return "\n".join(lines)


def _log_members(logs: list[Log], left_out: list) -> list[tuple[str, str, str]]:
    members = []
    for log in logs:
        name = f"logs/{log.stream}.txt"
        if log.tail.missing or log.tail.error:
            why = log.tail.error or (
                "no path is known" if log.tail.where_unknown or not log.path else f"there is no file {log.path}"
            )
            left_out.append((f"{name} (the {log.stream} log)", why))
            continue
        about = f"the {log.stream} log {log.path}: " + (
            f"its last {BUNDLE_LOG_BYTES // 1024} KiB (the file is longer)" if log.tail.truncated else "all of it"
        )
        members.append((name, log.tail.text, about))
    return members


def bundle_members(g: Gathered) -> tuple[list[tuple[str, str, str]], list[tuple[str, str]]]:
    """``(members, left_out)``: each member as ``(name in the zip, text, one line for README.txt)``,
    and what was left out as ``(what, why)``. README.txt itself is not among them."""
    left_out = list(g.left_out)
    members = [
        (
            "settings.json",
            json.dumps(g.settings, indent=2, sort_keys=True, default=str) + "\n",
            "what was submitted, and the portal's state of it",
        )
    ]
    if g.script is not None:
        members.append(("script.sh", g.script, "the batch script"))
    else:
        left_out.append(("script.sh (the batch script)", g.script_note))
    if g.sbatch is not None:
        members.append(("sbatch.txt", " ".join(g.sbatch) + "\n", "the exact command it was sent with (the script on its stdin)"))
    else:
        left_out.append(("sbatch.txt (the sbatch command)", g.sbatch_note))
    history = "".join(json.dumps(row, sort_keys=True, default=str) + "\n" for row in g.history)
    members.append(("history.jsonl", history, f"the portal's audit rows about it, oldest first ({len(g.history)})"))
    for name, read in (("slurm/scontrol-show-job.txt", g.scontrol), ("slurm/sacct.txt", g.sacct)):
        if read is not None and (member := _slurm_member(name, read, left_out)):
            members.append(member)
    if g.slurm_note:
        left_out.append(("Slurm's view", g.slurm_note))
    members += _log_members(g.logs, left_out)
    if g.nodes:
        members.append(("nodes.txt", _node_text(g.nodes), "the state of the nodes it ran on, from the portal's last poll"))
    else:
        left_out.append(("nodes.txt (the nodes' state)", g.node_note or "it has run on no node"))
    versions = f"portal {g.portal_version or 'unknown'}\nslurm {g.slurm_version or 'unknown (no poll of this cluster yet)'}\n"
    members.append(("versions.txt", versions, "the portal's version and the cluster's Slurm version"))
    return members, left_out


_NEVER = (
    "Never in a bundle: the portal's API tokens, OIDC client secrets, SSH keys and settings, the job's\n"
    "environment (scontrol is never asked for it), and other people's data (their jobs on the same\n"
    'nodes, their names in the audit rows: another person who acted is written "another person").\n'
)


def readme_text(g: Gathered, members: list[tuple[str, str, str]], left_out: list[tuple[str, str]], *, made_at: datetime) -> str:
    """README.txt: the title, when it was made (``made_at``, written as ISO 8601), each member with
    its line, what was left out and why, and what never goes in."""
    lines = [f"Support bundle of {g.title}", f"made {made_at.isoformat(timespec='seconds')}", "", "In it:"]
    lines += [f"  {name}: {about}" for name, _text, about in members]
    lines += ["", "Left out:" if left_out else "Left out: nothing."]
    lines += [f"  {what}: {why}" for what, why in left_out]
    return "\n".join(lines) + "\n\n" + _NEVER


def bundle_zip(g: Gathered, *, made_at: datetime) -> bytes:
    """The zip (deflated) of README.txt and :func:`bundle_members`, every member's time ``made_at``."""
    members, left_out = bundle_members(g)
    stamp = made_at.timetuple()[:6]
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, text in [("README.txt", readme_text(g, members, left_out, made_at=made_at))] + [(n, t) for n, t, _ in members]:
            archive.writestr(zipfile.ZipInfo(name, date_time=stamp), text.encode("utf-8"), compress_type=zipfile.ZIP_DEFLATED)
    return buffer.getvalue()
