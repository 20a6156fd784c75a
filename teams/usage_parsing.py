"""Parsers for the team usage refresh: ``scontrol show config``, ``sshare -P``, ``scontrol show
assoc_mgr`` and the accounting period (recorded outputs: ``tests/fixtures/slurm/22.05/``)."""
from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

SSHARE_FIELDS = ("Account", "User", "GrpTRESMins", "GrpTRESRaw")

# --- parsing -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ClusterConfig:
    """From ``scontrol show config``: ``tracked`` (``gres/gpu`` in ``AccountingStorageTRES``),
    ``reset_period`` (``PriorityUsageResetPeriod`` upper-cased), ``calc_period_s``
    (``PriorityCalcPeriod``) and ``decay_half_life_s`` (``PriorityDecayHalfLife``), seconds."""

    tracked: bool
    reset_period: str = "MONTHLY"
    calc_period_s: int | None = None
    decay_half_life_s: int | None = None


_CONFIG_LINE = re.compile(r"^(\w+)\s*=\s*(.*?)\s*$", re.MULTILINE)
_DURATION = re.compile(r"(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)")


def _duration_s(text: str | None) -> int | None:
    """Seconds from Slurm's ``[D-]HH:MM:SS``, ``MM:SS`` or plain minutes; ``None`` otherwise."""
    text = (text or "").strip()
    if text.isdigit():
        return int(text) * 60
    match = _DURATION.fullmatch(text)
    if not match:
        return None
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def parse_config(config_text: str) -> ClusterConfig:
    """The parts of ``scontrol show config`` that usage needs (see :class:`ClusterConfig`)."""
    values = dict(_CONFIG_LINE.findall(config_text))
    return ClusterConfig(
        tracked="gres/gpu" in {item.strip() for item in values.get("AccountingStorageTRES", "").split(",")},
        reset_period=(values.get("PriorityUsageResetPeriod") or "MONTHLY").upper(),
        calc_period_s=_duration_s(values.get("PriorityCalcPeriod")),
        decay_half_life_s=_duration_s(values.get("PriorityDecayHalfLife")),
    )


def gpu_tracked(config_text: str) -> bool:
    """True when ``scontrol show config`` lists ``gres/gpu`` in ``AccountingStorageTRES`` (typed
    entries alone, ``gres/gpu:a100``, do not count). When False, show :data:`GPU_NOT_TRACKED`."""
    return parse_config(config_text).tracked


def parse_tres(text: str | None) -> dict[str, int]:
    """``cpu=1000,gres/gpu=60`` -> ``{"cpu": 1000, "gres/gpu": 60}``; ``N(5)`` values (assoc_mgr)
    give the part before the parenthesis, ``N`` (no limit) is left out; empty text gives ``{}``."""
    tres: dict[str, int] = {}
    for item in (text or "").split(","):
        key, _, value = item.strip().partition("=")
        value = value.split("(", 1)[0]
        if key and value.isdigit():
            tres[key] = int(value)
    return tres


@dataclass(frozen=True)
class ShareRow:
    """One sshare line: ``user`` ``""`` for the account's own row; GPU-minutes, ``None`` when absent."""

    account: str
    user: str
    gpu_minutes_limit: int | None
    gpu_minutes_used: int | None


def parse_sshare(text: str) -> list[ShareRow]:
    """Rows of ``sshare -a -P -o Account,User,GrpTRESMins,GrpTRESRaw`` (header line first, as
    asked). Slurm indents ``Account`` by its depth in the tree (``" vision"``, ``"  vision"``); the
    spaces are stripped. The ``root`` account is left out. ``ValueError`` when the header is not
    the fields asked for or a line has another number of fields."""
    lines = [line for line in text.splitlines() if line.strip()]
    if not lines or tuple(h.strip() for h in lines[0].split("|")) != SSHARE_FIELDS:
        raise ValueError(f"sshare header is not {'|'.join(SSHARE_FIELDS)}: {lines[:1]!r}")
    rows = []
    for line in lines[1:]:
        fields = line.split("|")
        if len(fields) != len(SSHARE_FIELDS):
            raise ValueError(f"sshare line has {len(fields)} fields, not {len(SSHARE_FIELDS)}: {line!r}")
        account, user, limits, used = (f.strip() for f in fields)
        if account != "root":
            rows.append(ShareRow(account, user, parse_tres(limits).get("gres/gpu"), parse_tres(used).get("gres/gpu")))
    return rows


_ASSOC_FIELD = re.compile(r"(\w+)=(\S*)")


def parse_assoc_mgr(text: str) -> dict[tuple[str, str], tuple[int | None, int | None]]:
    """``scontrol show assoc_mgr flags=assoc`` -> (account, user) -> (GPU limit, GPUs in use) from
    ``GrpTRES=...gres/gpu=4(1)...`` (``N`` = no limit -> ``None``; user ``""`` for the account's row,
    ``alice(1001)`` -> ``alice``)."""
    result: dict[tuple[str, str], tuple[int | None, int | None]] = {}
    key = None
    for line in text.splitlines():
        fields = dict(_ASSOC_FIELD.findall(line))
        if "ClusterName" in fields:
            key = (fields.get("Account", ""), fields.get("UserName", "").split("(", 1)[0])
            result[key] = (None, None)
        elif key and "GrpTRES" in fields:
            gpu = next((v for k, _, v in (i.partition("=") for i in fields["GrpTRES"].split(",")) if k == "gres/gpu"), "")
            limit, _, used = gpu.partition("(")
            result[key] = (int(limit) if limit.isdigit() else None, int(used.rstrip(")")) if used.rstrip(")").isdigit() else None)
    return result


# --- periods ---------------------------------------------------------------------------------------


def period_start(now: datetime, reset_period: str = "MONTHLY") -> datetime:
    """Start of the accounting period containing ``now`` (aware, UTC), following Slurm's
    ``PriorityUsageResetPeriod``: DAILY midnight, WEEKLY Sunday 00:00, MONTHLY the 1st, QUARTERLY
    the 1st of Jan/Apr/Jul/Oct, YEARLY Jan 1st. Slurm resets at 00:00 in slurmctld's time zone;
    this uses UTC. NONE/NOW (never reset) fall back to the month: history is read for a month."""
    day = now.astimezone(UTC).replace(hour=0, minute=0, second=0, microsecond=0)
    if reset_period == "DAILY":
        return day
    if reset_period == "WEEKLY":
        return day - timedelta(days=(day.weekday() + 1) % 7)
    if reset_period == "QUARTERLY":
        return day.replace(month=(day.month - 1) // 3 * 3 + 1, day=1)
    if reset_period == "YEARLY":
        return day.replace(month=1, day=1)
    return day.replace(day=1)


def period_end(start: datetime, reset_period: str = "MONTHLY") -> datetime | None:
    """When the period that began at ``start`` ends (next reset); ``None`` when Slurm never resets."""
    months = {"MONTHLY": 1, "QUARTERLY": 3, "YEARLY": 12}.get(reset_period)
    if reset_period in {"DAILY", "WEEKLY"}:
        return start + timedelta(days=1 if reset_period == "DAILY" else 7)
    if months is None:
        return None
    month = start.month - 1 + months
    return start.replace(year=start.year + month // 12, month=month % 12 + 1, day=1)
