"""Slurm's accounting and fairshare commands, which have no JSON in 22.05: ``scontrol show config``,
``sshare -P``, ``scontrol show assoc_mgr`` and ``sacctmgr --parsable2``.

Each ``read_*`` runs one command through the gateway (its argv is a constant here, with the fields
asked for by name) and returns plain records; ``parse_*`` reads that command's text. The values
inside (TRES lists, durations) are read by :mod:`slurm.values`. What is done with the records (team
usage, the teams sync) is the apps' business. Recorded outputs: ``tests/fixtures/slurm/22.05/``
(``scontrol_config_*.txt``, ``sshare_*.txt``, ``assoc_mgr_*.txt``, ``sacctmgr_*.txt``).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from .gateway import SlurmGateway
from .times import parse_time_limit
from .transports.base import CommandResult
from .tres import BILLING_TRES, GPU_TRES, parse_tres, parse_tres_limit_used, tres_items

logger = logging.getLogger(__name__)

# --- scontrol show config ------------------------------------------------------------------------

SHOW_CONFIG = ["scontrol", "show", "config"]
#: The first line of :data:`SHOW_CONFIG`'s answer: what follows is the configuration slurmctld sent.
CONFIG_HEADER = "Configuration data as of "
#: A line of :data:`SHOW_CONFIG`'s closing ping, for a controller that did not answer.
_PING_DOWN = re.compile(r"Slurmctld\((?:primary|backup\d*)\) at \S+ is DOWN")
#: ``PriorityUsageResetPeriod`` values after which Slurm clears the usage it enforces quotas with.
RESET_PERIODS = frozenset({"DAILY", "WEEKLY", "MONTHLY", "QUARTERLY", "YEARLY"})


@dataclass(frozen=True)
class ClusterConfig:
    """From ``scontrol show config``: ``tracked`` (``gres/gpu`` in ``AccountingStorageTRES``),
    ``reset_period`` (``PriorityUsageResetPeriod`` upper-cased), ``calc_period_s``
    (``PriorityCalcPeriod``) and ``decay_half_life_s`` (``PriorityDecayHalfLife``), seconds;
    ``max_tres``: ``PriorityFlags`` holds ``MAX_TRES`` (a job's billing is then the largest of its
    weighted per-node TRES, :func:`slurm.tres.billable_tres`)."""

    tracked: bool
    reset_period: str = "MONTHLY"
    calc_period_s: int | None = None
    decay_half_life_s: int | None = None
    max_tres: bool = False


_CONFIG_LINE = re.compile(r"^(\w+)\s*=\s*(.*?)\s*$", re.MULTILINE)


def _seconds(text: str | None) -> int | None:
    """Seconds of a config duration (``00:05:00``, ``7-00:00:00``, plain minutes); ``None`` when
    absent or not a Slurm time."""
    try:
        return parse_time_limit(text or "")
    except ValueError:
        return None


def parse_config(config_text: str) -> ClusterConfig:
    """The parts of ``scontrol show config`` (``Name = value`` lines) that usage needs (see
    :class:`ClusterConfig`). Never raises: what is missing takes the default."""
    values = dict(_CONFIG_LINE.findall(config_text))
    return ClusterConfig(
        tracked=GPU_TRES in {key for key, _ in tres_items(values.get("AccountingStorageTRES"))},
        reset_period=(values.get("PriorityUsageResetPeriod") or "MONTHLY").upper(),
        calc_period_s=_seconds(values.get("PriorityCalcPeriod")),
        decay_half_life_s=_seconds(values.get("PriorityDecayHalfLife")),
        max_tres="MAX_TRES" in {flag.strip().upper() for flag in (values.get("PriorityFlags") or "").split(",")},
    )


def gpu_tracked(config_text: str) -> bool:
    """True when ``scontrol show config`` lists ``gres/gpu`` in ``AccountingStorageTRES`` (typed
    entries alone, ``gres/gpu:a100``, do not count): without it Slurm records no GPU usage."""
    return parse_config(config_text).tracked


def show_config(gateway: SlurmGateway) -> str:
    """The text of :data:`SHOW_CONFIG`: ``Name = value`` lines, after :data:`CONFIG_HEADER`; then a blank
    line and a ping of the controllers (exit 1 when none answered). slurmctld's RPC rate limit tells a
    ping to back off, which the client does not resend: a service user with a nearly spent bucket got
    the whole configuration, "is DOWN" and exit 1 (``tests/fixtures/slurm/24.11/rate_limit/``). That
    answer is read, logged and counted as ok. Raises :class:`~slurm.SlurmError` for any other failure:
    no configuration (slurmctld unreachable), a cut one (no exit status), a command that could not run."""
    result = gateway.run(SHOW_CONFIG, accepted=_only_ping_refused)  # any other non-zero exit raises
    if result.returncode:  # the ping's lines name each controller that did not answer
        pings = result.out.rstrip("\n").rpartition("\n\n")[2].replace("\n", "; ")
        logger.info("%s: scontrol show config read; its closing ping got no answer: %s", gateway.cluster or "slurmctld", pings)
    return result.out


def _only_ping_refused(result: CommandResult) -> bool:
    """:func:`show_config`'s readable failure: exit 1, the configuration, then only "is DOWN" lines."""
    _, blank, pings = result.out.rstrip("\n").rpartition("\n\n")
    down = result.out.startswith(CONFIG_HEADER) and bool(blank) and all(map(_PING_DOWN.fullmatch, pings.split("\n")))
    return result.returncode == 1 and down


def read_config(gateway: SlurmGateway) -> ClusterConfig:
    """:func:`show_config`, parsed. Raises :class:`~slurm.SlurmError`."""
    return parse_config(show_config(gateway))


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


# --- sshare ----------------------------------------------------------------------------------------

#: The columns asked of sshare: the quota and its use, then the fair-share figures (Slurm's names).
SSHARE_FIELDS = ("Account", "User", "GrpTRESMins", "GrpTRESRaw", "NormShares", "EffectvUsage", "FairShare", "LevelFS")
#: The columns asked for before the fair-share ones: an output of those alone (recorded before) is
#: read too, its fair-share figures ``None``.
_SSHARE_NEEDED = SSHARE_FIELDS[:4]
SHOW_SHARES = ["sshare", "-a", "-P", "-o", ",".join(SSHARE_FIELDS)]


@dataclass(frozen=True)
class ShareRow:
    """One sshare line: ``user`` ``""`` for the account's own row. ``grp_tres_mins``: the quota
    (``GrpTRESMins``), ``grp_tres_raw``: the usage this period (``GrpTRESRaw``), both TRES ->
    TRES-minutes (:func:`slurm.tres.parse_tres`). The fair-share figures (``None`` when sshare
    printed none, as for the account rows' ``FairShare`` under Fair Tree):

    - ``norm_shares``: ``NormShares``, the association's shares over its siblings' (0-1);
    - ``effective_usage``: ``EffectvUsage``, its usage over its siblings' (0-1; decayed by
      ``PriorityDecayHalfLife`` and cleared at ``PriorityUsageResetPeriod``);
    - ``fairshare``: ``FairShare``, a user's fair-share factor (0-1, 1 the best), which
      ``PriorityWeightFairshare`` multiplies into a job's priority;
    - ``level_fs``: ``LevelFS`` (Fair Tree), ``norm_shares / effective_usage``: above 1, the
      association used less than its share; ``inf`` when it used nothing."""

    account: str
    user: str
    grp_tres_mins: dict[str, int] = field(default_factory=dict)
    grp_tres_raw: dict[str, int] = field(default_factory=dict)
    norm_shares: float | None = None
    effective_usage: float | None = None
    fairshare: float | None = None
    level_fs: float | None = None

    @property
    def gpu_minutes_limit(self) -> int | None:
        """``GrpTRESMins`` ``gres/gpu``: the GPU-minute quota; ``None`` = none."""
        return self.grp_tres_mins.get(GPU_TRES)

    @property
    def gpu_minutes_used(self) -> int | None:
        """``GrpTRESRaw`` ``gres/gpu``: GPU-minutes used this period; ``None`` when not tracked."""
        return self.grp_tres_raw.get(GPU_TRES)

    @property
    def billing_minutes_limit(self) -> int | None:
        """``GrpTRESMins`` ``billing``: a quota in billed unit-minutes; ``None`` = none."""
        return self.grp_tres_mins.get(BILLING_TRES)

    @property
    def billing_minutes_used(self) -> int | None:
        """``GrpTRESRaw`` ``billing``: billed unit-minutes used this period (Slurm always tracks
        ``billing``); ``None`` when sshare printed none."""
        return self.grp_tres_raw.get(BILLING_TRES)


def _share_figure(text: str, column: str, line: str) -> float | None:
    """A fair-share column's number (``0.250000``, ``inf``); ``None`` when empty. ``ValueError``
    naming the column otherwise."""
    if not text:
        return None
    try:
        return float(text)  # sshare prints inf for a LevelFS of no usage
    except ValueError:
        raise ValueError(f"sshare {column} {text!r} is not a number: {line!r}") from None


def parse_sshare(text: str) -> list[ShareRow]:
    """Rows of :data:`SHOW_SHARES` (header line first, as asked; or the first four columns alone,
    whose fair-share figures are then ``None``). Slurm indents ``Account`` by its depth in the tree
    (``" vision"``, ``"  vision"``); the spaces are stripped. The ``root`` account is left out.
    ``ValueError`` when the header is not the columns asked for, a line has another number of fields
    than the header or a fair-share figure is not a number."""
    lines = [line for line in text.splitlines() if line.strip()]
    header = [h.strip() for h in lines[0].split("|")] if lines else []
    if tuple(header) not in (SSHARE_FIELDS, _SSHARE_NEEDED):
        raise ValueError(f"sshare header is not {'|'.join(SSHARE_FIELDS)}: {lines[:1]!r}")
    rows = []
    for line in lines[1:]:
        values = [f.strip() for f in line.split("|")]
        if len(values) != len(header):
            raise ValueError(f"sshare line has {len(values)} fields, not {len(header)}: {line!r}")
        row = dict(zip(header, values, strict=True))
        if row["Account"] == "root":
            continue
        figures = {
            name: _share_figure(row.get(column, ""), column, line)
            for name, column in (
                ("norm_shares", "NormShares"),
                ("effective_usage", "EffectvUsage"),
                ("fairshare", "FairShare"),
                ("level_fs", "LevelFS"),
            )
        }
        rows.append(
            ShareRow(row["Account"], row["User"], parse_tres(row["GrpTRESMins"]), parse_tres(row["GrpTRESRaw"]), **figures)
        )
    return rows


def read_shares(gateway: SlurmGateway) -> list[ShareRow]:
    """:data:`SHOW_SHARES`, parsed. Raises :class:`~slurm.SlurmError` or ``ValueError``."""
    return parse_sshare(gateway.run(SHOW_SHARES).out)


# --- scontrol show assoc_mgr ---------------------------------------------------------------------

SHOW_ASSOC_MGR = ["scontrol", "show", "assoc_mgr", "flags=assoc"]
_ASSOC_FIELD = re.compile(r"(\w+)=(\S*)")


def parse_assoc_mgr(text: str, tres: str = GPU_TRES) -> dict[tuple[str, str], tuple[int | None, int | None]]:
    """``scontrol show assoc_mgr flags=assoc`` -> (account, user) -> (limit, in use) of ``tres``
    from ``GrpTRES=...gres/gpu=4(1)...`` (``N`` = no limit -> ``None``; user ``""`` for the
    account's row, ``alice(1001)`` -> ``alice``)."""
    result: dict[tuple[str, str], tuple[int | None, int | None]] = {}
    key = None
    for line in text.splitlines():
        fields = dict(_ASSOC_FIELD.findall(line))
        if "ClusterName" in fields:
            key = (fields.get("Account", ""), fields.get("UserName", "").split("(", 1)[0])
            result[key] = (None, None)
        elif key and "GrpTRES" in fields:
            result[key] = parse_tres_limit_used(fields["GrpTRES"], tres)
    return result


def parse_assoc_run_minutes(text: str, tres: str = GPU_TRES) -> dict[tuple[str, str], int | None]:
    """``scontrol show assoc_mgr flags=assoc`` -> (account, user) -> the TRES-minutes of ``tres``
    that the association's running jobs still hold: the count in brackets of
    ``GrpTRESRunMins=...gres/gpu=N(16)...`` (Slurm's ``grp_used_tres_run_secs`` / 60: for each
    running job, its TRES count x its time limit less its run time, lowered every
    ``PriorityCalcPeriod``; an account's row includes its sub-accounts' and users' jobs). This is
    the figure ``AccountingStorageEnforce=safe`` adds to the used TRES-minutes before it lets a job
    start under ``GrpTRESMins``. ``None`` when the line or the TRES is missing (user ``""`` for the
    account's row, ``alice(1001)`` -> ``alice``)."""
    result: dict[tuple[str, str], int | None] = {}
    key = None
    for line in text.splitlines():
        fields = dict(_ASSOC_FIELD.findall(line))
        if "ClusterName" in fields:
            key = (fields.get("Account", ""), fields.get("UserName", "").split("(", 1)[0])
            result[key] = None
        elif key and "GrpTRESRunMins" in fields:
            result[key] = parse_tres_limit_used(fields["GrpTRESRunMins"], tres)[1]
    return result


def read_assoc_mgr(gateway: SlurmGateway) -> dict[tuple[str, str], tuple[int | None, int | None]]:
    """:data:`SHOW_ASSOC_MGR`, parsed for ``gres/gpu``. Raises :class:`~slurm.SlurmError`."""
    return parse_assoc_mgr(gateway.run(SHOW_ASSOC_MGR).out)


def read_assoc_mgr_text(gateway: SlurmGateway) -> str:
    """:data:`SHOW_ASSOC_MGR`'s text, for :func:`parse_assoc_mgr` and :func:`parse_assoc_run_minutes`
    from one call. Raises :class:`~slurm.SlurmError`."""
    return gateway.run(SHOW_ASSOC_MGR).out


# --- sacctmgr --------------------------------------------------------------------------------------

_SACCTMGR_SHOW = ["sacctmgr", "--noheader", "--parsable2", "show"]
#: Field order matters: lines are split on ``|`` by position (no field asked for can hold a ``|``).
SHOW_ASSOCIATIONS = [*_SACCTMGR_SHOW, "association", "format=Account,User,ParentName,GrpTRES,GrpTRESMins"]
SHOW_USERS = [*_SACCTMGR_SHOW, "user", "format=User,DefaultAccount,AdminLevel"]
#: Descriptions may hold ``|``: the description is the last field and the line is split once.
SHOW_ACCOUNTS = [*_SACCTMGR_SHOW, "account", "format=Account,Description"]


@dataclass(frozen=True)
class AssociationRow:
    """One line of :data:`SHOW_ASSOCIATIONS`: ``user`` ``""`` for the account's own association
    (``parent``: ``ParentName``, set on that one only). ``grp_tres``/``grp_tres_mins``: the TRES
    lists as sacctmgr prints them (``cpu=10,gres/gpu=4``; read one with
    :func:`slurm.tres.parse_tres_count`, which refuses a count it cannot read)."""

    account: str
    user: str
    parent: str
    grp_tres: str
    grp_tres_mins: str


@dataclass(frozen=True)
class UserRow:
    """One line of :data:`SHOW_USERS`: ``default_account`` ``""`` when Slurm has none."""

    name: str
    default_account: str
    admin_level: str


def _fields(line: str, count: int, command: list[str]) -> list[str]:
    parts = line.split("|")
    if len(parts) != count:
        raise ValueError(f"{' '.join(command[4:])}: expected {count} fields, got {line!r}")
    return parts


def parse_associations(text: str) -> list[AssociationRow]:
    """The lines of :data:`SHOW_ASSOCIATIONS`; ``ValueError`` on a line without the fields asked for."""
    return [AssociationRow(*_fields(line, 5, SHOW_ASSOCIATIONS)) for line in filter(None, text.splitlines())]


def parse_users(text: str) -> list[UserRow]:
    """The lines of :data:`SHOW_USERS`; ``ValueError`` on a line without the fields asked for."""
    return [UserRow(*_fields(line, 3, SHOW_USERS)) for line in filter(None, text.splitlines())]


def parse_descriptions(text: str) -> dict[str, str]:
    """:data:`SHOW_ACCOUNTS` -> account name -> description (Slurm stores it lower-cased); the
    description may hold ``|``."""
    return dict(line.split("|", 1) for line in text.splitlines() if "|" in line)


def read_associations(gateway: SlurmGateway) -> list[AssociationRow]:
    """Every association in slurmdbd. Raises :class:`~slurm.SlurmError` or ``ValueError``."""
    return parse_associations(gateway.run(SHOW_ASSOCIATIONS).out)


def read_users(gateway: SlurmGateway) -> list[UserRow]:
    """Every Slurm user record. Raises :class:`~slurm.SlurmError` or ``ValueError``."""
    return parse_users(gateway.run(SHOW_USERS).out)


def read_descriptions(gateway: SlurmGateway) -> dict[str, str]:
    """Account name -> description. Raises :class:`~slurm.SlurmError`."""
    return parse_descriptions(gateway.run(SHOW_ACCOUNTS).out)


# --- QOS (site policy: per-person caps and the small-job pool, teams/site_policy.py) ---------------
#: Field order matters (split on ``|`` by position). Names both 22.05 and 24.11 accept (22.05 does not
#: know the short ``MaxTRESPJ``); Flags is a comma list (``DenyOnLimit,NoDecay``).
QOS_FIELDS = ("Name", "MaxTRESPerUser", "MaxSubmitJobsPerUser", "MaxTRESPerJob", "MaxWallDurationPerJob", "Flags")
SHOW_QOS = [*_SACCTMGR_SHOW, "qos", "format=" + ",".join(QOS_FIELDS)]


@dataclass(frozen=True)
class QosRow:
    """One line of :data:`SHOW_QOS`: ``max_tres_per_user`` / ``max_tres_per_job`` TRES lists as
    sacctmgr prints them (``gres/gpu=4``), ``max_submit_per_user`` a number or ``""``, ``max_wall``
    a Slurm time (``01:00:00``, ``2-00:00:00``) or ``""``, ``flags`` their names."""

    name: str
    max_tres_per_user: str
    max_submit_per_user: str
    max_tres_per_job: str
    max_wall: str
    flags: frozenset[str]


def parse_qos(text: str) -> list[QosRow]:
    """The lines of :data:`SHOW_QOS`; ``ValueError`` on a line without the fields asked for."""
    rows = []
    for line in filter(None, text.splitlines()):
        name, per_user, submit, per_job, wall, flags = _fields(line, len(QOS_FIELDS), SHOW_QOS)
        rows.append(QosRow(name, per_user, submit, per_job, wall, frozenset(f for f in flags.split(",") if f)))
    return rows


def read_qos(gateway: SlurmGateway) -> list[QosRow]:
    """Every QOS in slurmdbd. Raises :class:`~slurm.SlurmError` or ``ValueError``."""
    return parse_qos(gateway.run(SHOW_QOS).out)
