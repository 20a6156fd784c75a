"""Batch jobs: ``gpuportal submit``, ``ls``, ``show``, ``cancel``, ``hold`` and ``release``."""

from __future__ import annotations

import argparse
import os
import re
import time

from .args import add_overrides, job_reference, positive_float
from .base import Commands, Context, UsageError, err, list_out, out, read_text
from .errors import ApiError
from .figures import billed_text, cost_text, energy_text, idle_text
from .jobshow import shown
from .logs import CLUSTER_HELP, REF_HELP, follow_log
from .output import duration, gpus, key_values

#: Slurm's name of one array task, ``123_7``: cancel takes it as ``123 --task 7``.
TASK_REF = re.compile(r"(\d+)_(\d+)")
#: How long ``submit`` waits for Slurm's job id (the portal sends the job in the background), seconds.
ID_WAIT_S = 10.0

_JOB_FIELDS = [
    "id",
    "slurm_ref",
    "origin",
    "key",
    "name",
    "state",
    "state_label",
    "reason",
    "explanation",
    "priority",
    "position",
    "estimated_start",
    "partition",
    "account",
    "gpu_type",
    "gpu_count",
    "cpus",
    "memory_mb",
    "time_limit_min",
    "created_at",
    "start_at",
    "end_at",
    "elapsed_s",
    "gpu_hours",
    "billed_units",
    "cost",
    "exit_code",
    "signal",
    "submit_error",
    "profile_id",
    "url",
]


def add_commands(commands: Commands) -> None:
    """Register ``submit``, ``ls``, ``show``, ``cancel``, ``hold`` and ``release``."""
    p = commands.add("submit", cmd_submit, "submit a job from a profile YAML file")
    p.add_argument("file", metavar="FILE.yaml")
    add_overrides(p, "override a profile field (repeatable), e.g. --set gpus=4")
    p.add_argument("-f", "--follow", action="store_true", help="then follow the job's output until it ends")
    p.add_argument(
        "--check",
        action="store_true",
        help="check the file as submitting it would and say whether the job fits the team's quota (GPU-hours or billed units); submit nothing",
    )
    p.add_argument("--interval", type=positive_float, default=2.0, help=argparse.SUPPRESS)
    p.add_argument(
        "--cluster", metavar="NAME", help="the cluster to run it on (see `gpuportal clusters`); same as --set cluster=NAME"
    )
    p.add_argument(
        "--image",
        metavar="NAME",
        help="the site image to run it in (see `gpuportal images`), or none for the node's own system; over the profile's image:",
    )

    p = commands.add("ls", cmd_ls, "list your jobs (running, queued and ended in the last hour)")
    p.add_argument("--cluster", metavar="NAME", help="only this cluster's jobs")
    scope = p.add_mutually_exclusive_group()
    scope.add_argument("--all", dest="scope", action="store_const", const="all", help="all jobs")
    scope.add_argument("--history", dest="scope", action="store_const", const="history", help="ended jobs")
    p.add_argument(
        "-n", "--limit", type=int, metavar="N", help="at most N jobs, newest first (default: every job; the CLI reads every page)"
    )
    _add_ref_commands(commands)


def _add_ref_commands(commands: Commands) -> None:
    """The commands on one job named by REF: ``show``, ``cancel``, ``hold``, ``release``."""
    for name, func, help in (
        ("show", cmd_show, "show one job"),
        ("cancel", cmd_cancel, "cancel a job (every task of an array, every component of a het job)"),
        (
            "hold",
            cmd_hold,
            "hold a pending job, or an array's pending tasks: they do not start until you release them (scontrol hold as you)",
        ),
        ("release", cmd_release, "release a job you held, so that it can start (scontrol release as you)"),
    ):
        p = commands.add(name, func, help)
        ref_help = REF_HELP + ("; 123_7 is task 7 of array 123, as --task 7" if name == "cancel" else "")
        p.add_argument("ref", metavar="REF", type=job_reference, help=ref_help)
        p.add_argument("--cluster", metavar="NAME", help=CLUSTER_HELP)
        if name == "cancel":
            p.add_argument("--task", type=int, metavar="N", help="an array's task: cancel only it (scancel <id>_<N>)")


def job_ref(job: dict) -> str:
    """How the CLI names a job: its Slurm id, else its key."""
    return str(job["id"]) if job.get("id") is not None else str(job.get("key", "?"))


def _with_slurm_id(ctx: Context, job: dict, interval: float) -> dict:
    """``job`` again once Slurm has given it an id (``GET /jobs/{key}``), for at most
    :data:`ID_WAIT_S` seconds; as it was if the id does not come (then the key names it)."""
    deadline = time.monotonic() + ID_WAIT_S
    while job.get("id") is None and job.get("state") == "SUBMITTING" and time.monotonic() < deadline:
        time.sleep(min(0.5, interval))
        job = ctx.client().get_job(str(job["key"]))
    return job


def submitted(ctx: Context, job: dict, follow: bool, interval: float) -> int:
    """Report a job just submitted (``POST /jobs`` or ``POST /profiles/{id}/submit``'s answer
    ``job``), once Slurm has its id; then follow its output when ``follow``. Returns 1 when the
    submission failed (or the followed job did not complete), else 0."""
    # Only the submit's answer has them (already on stderr: Context.warnings); --json keeps them.
    warnings, quota = list(job.get("warnings") or []), job.get("quota")
    job = _with_slurm_id(ctx, job, interval)
    ref = job_ref(job)
    if ctx.json:
        ctx.emit({**job, "warnings": warnings, "quota": quota})
    else:
        out(f'Submitted job {ref} "{job.get("name", "")}" ({job.get("state", "?")})')
        if quota:
            out(quota["sentence"])
    if job.get("state") == "SUBMIT_FAILED":
        err(f"error: the submission failed: {job.get('submit_error') or job.get('explanation') or 'no reason given'}")
        return 1
    if not ctx.json:
        out(f"Follow it: gpuportal logs -f {ref}")
        if job.get("url"):
            out(job["url"])
    if follow:
        return follow_log(ctx, ref, stream="out", interval=interval)
    return 0


def cmd_submit(ctx: Context) -> int:
    """``submit FILE [--set K=V ...] [-f] [--check]``: ``POST /jobs`` with the file's text; returns 1
    when the submission failed (or, with ``-f``, the job did not complete). With ``--check``:
    ``POST /profiles/validate`` instead, nothing submitted (:func:`checked`). Raises
    :class:`UsageError` for an unreadable file."""
    text = read_text(ctx.args.file)
    client = ctx.client()
    overrides = dict(ctx.args.overrides)
    if ctx.args.cluster:
        overrides["cluster"] = ctx.args.cluster
    if ctx.args.check:  # the image as POST /jobs takes it: an override of the profile's image:
        with_image = overrides if ctx.args.image is None else {**overrides, "image": ctx.args.image}
        return checked(ctx, client.validate_profile(text, with_image))
    job = client.submit_job(text, os.path.basename(ctx.args.file), overrides, image=ctx.args.image)
    return submitted(ctx, job, ctx.args.follow, ctx.args.interval)


def checked(ctx: Context, answer: dict) -> int:
    """Report ``submit --check``'s answer (``POST /profiles/validate``): the profile is valid and
    the quota sentence when there is one, then 0; not valid: raises :class:`ApiError` with its
    errors (each with its field and line), so it reads as a refused submission (exit 1)."""
    if not answer.get("valid"):
        raise ApiError(400, "The profile is not valid; nothing was submitted.", errors=answer.get("errors") or [])
    if ctx.json:
        ctx.emit(answer)
        return 0
    out("The profile is valid; nothing was submitted (drop --check to submit it).")
    if answer.get("quota"):
        out(answer["quota"]["sentence"])
    return 0


def _job_time(job: dict) -> str:
    if job.get("elapsed_s") is not None:
        return duration(job["elapsed_s"])
    if job.get("time_limit_min"):
        return f"limit {duration(job['time_limit_min'] * 60)}"
    return "-"


def _job_note(job: dict) -> str:
    """The NOTE column: "submitted outside the portal" for such a job, an array's tasks by state
    ("3 running, 12 pending"), then the queue line or the submit error."""
    parts = ["submitted outside the portal"] if job.get("origin") == "outside" else []
    tasks = ", ".join(f"{t.get('count')} {t.get('group')}" for t in job.get("tasks") or [])
    parts += [tasks] if tasks else []
    parts += [job.get("explanation") or job.get("submit_error") or ""]
    return "; ".join(p for p in parts if p)


def cmd_ls(ctx: Context) -> int:
    """``ls [--all|--history] [-n N]``: ``GET /jobs``, every page (or the first ``N`` jobs), as a
    table (ID, CLUSTER when the jobs listed are on more than one, NAME, STATE, PARTITION, GPUS, TIME,
    NOTE); with ``-n``, a note on stderr when more jobs remain."""
    limit = ctx.args.limit
    if limit is not None and limit < 1:
        raise UsageError(f"-n/--limit takes a number of jobs, 1 or more (got {limit}).")
    doc = ctx.client().list_jobs(ctx.args.scope or "active", ctx.args.cluster or "", most=limit)
    if doc.get("more") and not ctx.json:
        err(f"(the newest {limit} jobs; more match: raise -n, or leave it out for every job)")
    ended = ctx.args.scope == "history"
    # Slurm's job ids are per cluster: the same id on two clusters reads twice without its cluster
    several = len({j.get("cluster") for j in doc.get("items") or []}) > 1
    return list_out(
        ctx,
        doc,
        empty="No jobs.",
        headers=[
            "ID",
            *(["CLUSTER"] if several else []),
            "NAME",
            "STATE",
            "PARTITION",
            "GPUS",
            "TIME",
            *(_ENDED if ended else ()),
            "NOTE",
        ],
        row=lambda j: (
            # a job Slurm has no id for goes by its whole key: what this column prints, show/cancel/logs take
            _short_ref(j.get("slurm_ref"), j.get("id")) or (str(j["id"]) if j.get("id") is not None else str(j.get("key", ""))),
            *([j.get("cluster") or ""] if several else []),
            j.get("name"),
            j.get("state"),
            j.get("partition"),
            gpus(j.get("gpu_count"), j.get("gpu_type")),
            _job_time(j),
            *(_ended(j) if ended else ()),
            _job_note(j),
        ),
    )


#: The most characters of a Slurm ref ``ls`` prints: a longer one (an array whose ids Slurm cannot write
#: short) is printed as the job's Slurm id.
REF_SHOWN = 30


def _short_ref(ref: str | None, slurm_id: int | None) -> str:
    """``ref`` (``123_[1-400:3%5]``) as the ID column prints it, which show, cancel and logs take: one
    longer than :data:`REF_SHOWN` characters is the job's Slurm id alone (``123``: the whole array, as
    its ref names it; ``show`` prints the whole ref)."""
    ref = ref or ""
    if len(ref) <= REF_SHOWN:
        return ref
    return str(slurm_id) if slurm_id is not None else ""  # "": the row's key is printed instead


#: ``ls --history``'s columns of what an ended job cost and left unused (:mod:`gpuportal.figures`).
_ENDED = ("GPU-H", "BILLED", "GPU ENERGY", "IDLE GPU-H")


def _ended(job: dict) -> tuple[str, ...]:
    hours = job.get("gpu_hours")
    billed = billed_text(job.get("billed_units"), job.get("cost"))
    return ("-" if hours is None else f"{hours:.2f}", billed, energy_text(job), idle_text(job))


def cmd_show(ctx: Context) -> int:
    """``show REF``: ``GET /jobs/{ref}`` as key/value lines; objects and lists as :mod:`gpuportal.jobshow`
    writes them (a list one item a line)."""
    job = ctx.client().get_job(ctx.args.ref, ctx.args.cluster or "")
    if ctx.json:
        ctx.emit(job)
        return 0
    keys = [k for k in _JOB_FIELDS if k in job] + sorted(k for k in job if k not in _JOB_FIELDS and k != "freshness")
    pairs = []
    for k in keys:
        value = job[k]
        if k == "elapsed_s" and value is not None:
            value = f"{duration(value)} ({value} s)"
        elif k == "time_limit_min" and value:
            value = f"{duration(value * 60)} ({value} min)"
        elif k == "priority" and isinstance(value, dict):
            value = value.get("text", "")  # why it waits: the priority's parts and the jobs ahead
        elif k == "cost":
            value = cost_text(value) or "no price set (billed units only)"
        else:  # an array's tasks, a het job's components, the GPU figures: readable, long lists cut short
            value = shown(k, value, ctx.args.ref)
        pairs.append((k, value))
    out(key_values(pairs, lines=True))
    return 0


def cmd_cancel(ctx: Context) -> int:
    """``cancel REF [--task N]``: ``POST /jobs/{ref}/cancel`` (``?task=N``: one task of an array;
    Slurm's ``123_7`` is ``123 --task 7``); prints the answer's ``message`` (an older portal's answer
    has none: then whether the job had ended). Raises :class:`UsageError` for a ``123_7`` with another
    ``--task``."""
    ref, task = ctx.args.ref, getattr(ctx.args, "task", None)
    if named := TASK_REF.fullmatch(ref.strip()):
        if task is not None and task != int(named[2]):
            raise UsageError(f"{ref} names task {named[2]} but --task {task} was given; give one of them.")
        ref, task = named[1], int(named[2])
    job = ctx.client().cancel_job(ref, ctx.args.cluster or "", task=task)
    if ctx.json:
        ctx.emit(job)
    elif job.get("message"):  # what was sent to Slurm, or why nothing was (a portal that says it)
        out(job["message"])
    elif job.get("final"):
        out(f'Job {ref} "{job.get("name", "")}" has already ended ({job.get("state")}); nothing to cancel.')
    else:
        what = f"task {task} of {ref}" if task is not None else ref
        out(f'Cancelling {what} "{job.get("name", "")}"')
    return 0


def cmd_hold(ctx: Context) -> int:
    """``hold REF``: ``POST /jobs/{ref}/hold``; prints the answer's ``message`` (an array whose tasks
    are partly running: how many pending tasks are held, and that the running ones go on)."""
    job = ctx.client().hold_job(ctx.args.ref, ctx.args.cluster or "")
    if ctx.json:
        ctx.emit(job)
    else:
        message = job.get("message") or f'Holding {ctx.args.ref} "{job.get("name", "")}": it will not start until released.'
        out(f"{message} Release with `gpuportal release {ctx.args.ref}`.")
    return 0


def cmd_release(ctx: Context) -> int:
    """``release REF``: ``POST /jobs/{ref}/release``; prints the answer's ``message``."""
    job = ctx.client().release_job(ctx.args.ref, ctx.args.cluster or "")
    if ctx.json:
        ctx.emit(job)
    else:
        out(job.get("message") or f'Releasing {ctx.args.ref} "{job.get("name", "")}": it starts when Slurm can run it.')
    return 0
