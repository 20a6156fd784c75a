"""What a finished job cost and what it left unused, as the CLI prints it (``ls --history``,
``show``, ``team-figures``): billed units (Slurm's billing TRES x run hours, from accounting) with
the cost where the site set a price, GPU energy (Wh, the GPU exporters' energy counter) and idle
GPU-hours (GPUs below the site's low-use threshold); "not measured" where a GPU job has no GPU
usage figures, never 0."""

from __future__ import annotations

from .args import non_blank
from .base import Commands, Context, out
from .output import table


def add_commands(commands: Commands) -> None:
    """Register ``team-figures``."""
    p = commands.add("team-figures", cmd_team_figures, "a team's billed units, cost, GPU energy and idle GPU-hours per member")
    p.add_argument(
        "team",
        metavar="TEAM",
        type=non_blank("team", "give the team's name (its Slurm account)"),
        help="the team (Slurm account); its leads and portal admins only",
    )


def cost_text(cost: dict | None) -> str:
    """``{"amount": 1.5, "currency": "EUR"}`` -> ``1.50 EUR``; ``""`` for none (no price set)."""
    return f"{cost['amount']:.2f} {cost['currency']}" if cost else ""


def billed_text(units: float | None, cost: dict | None) -> str:
    """``1.25``, ``1.25 (0.15 EUR)`` with a cost, ``-`` when not billed yet."""
    if units is None:
        return "-"
    return f"{units:.2f} ({cost_text(cost)})" if cost else f"{units:.2f}"


def energy_text(job: dict) -> str:
    """A job's GPU energy (``gpu_summary.energy_wh``): ``12.5 Wh``, ``not measured``, ``-`` without GPUs."""
    return _measured(job, "energy_wh", lambda wh: f"{wh:.1f} Wh")


def idle_text(job: dict) -> str:
    """A job's idle GPU-hours (``gpu_summary.idle_gpu_hours``): ``0.50``, ``not measured``, ``-`` without GPUs."""
    return _measured(job, "idle_gpu_hours", lambda h: f"{h:.2f}")


def _measured(job: dict, key: str, shown) -> str:
    if not job.get("gpu_count"):
        return "-"
    summary = job.get("gpu_summary") or {}
    value = summary.get(key) if summary.get("state") == "measured" else None
    return "not measured" if value is None else shown(value)


def _hours(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def cmd_team_figures(ctx: Context) -> int:
    """``team-figures TEAM``: ``GET /teams/{TEAM}/figures`` as a table, one row per member and the team's;
    a billed sum that leaves out jobs accounting has not billed yet says how many (``billed_missing``)."""
    doc = ctx.client().team_figures(ctx.args.team)
    if ctx.json:
        ctx.emit(doc)
        return 0
    rows = []
    for s in [*doc.get("members", []), {**doc.get("total", {}), "username": "(team)"}]:
        gpu_jobs = s.get("gpu_jobs") or 0
        energy = "-" if not gpu_jobs else ("not measured" if s.get("energy_wh") is None else f"{s['energy_wh']:.1f} Wh")
        idle = "-" if not gpu_jobs else ("not measured" if s.get("idle_gpu_hours") is None else _hours(s["idle_gpu_hours"]))
        billed = billed_text(s.get("billed_units"), s.get("cost"))
        if s.get("billed_missing"):  # left out of billed_units: the sum is partial, as the web table says
            billed += f" ({s['billed_missing']} not billed yet)"
        rows.append(
            (
                s.get("username"),
                s.get("jobs"),
                _hours(s.get("gpu_hours")),
                billed,
                energy,
                idle,
                f"{s.get('not_measured', 0)} of {gpu_jobs}",
            )
        )
    headers = ["MEMBER", "JOBS", "GPU-H", "BILLED", "GPU ENERGY", "IDLE GPU-H", "NOT MEASURED"]
    out(f"Jobs of {doc.get('team')} that ended in the last {doc.get('days')} days:\n" + table(headers, rows))
    return 0
