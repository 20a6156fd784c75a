"""Maintenance reservations: the staff's services that create and delete them.

``reservation_create`` runs ``env TZ=UTC scontrol create reservation ReservationName=<name>
StartTime=<start> EndTime=<end> Nodes=<nodes> Users=root Flags=MAINT[,IGNORE_JOBS]`` on the cluster as
the service user; ``reservation_delete`` ``scontrol delete ReservationName=<name>``. Times are given
to Slurm as UTC wall-clock text with ``TZ=UTC`` in the command's environment, since scontrol reads an
absolute time in the zone of the process that runs it (the submit host's, which the portal does not
know; :mod:`slurm.times`). The reservation itself lives in Slurm; the snapshot reads it back
(:attr:`slurm.snapshot.ClusterSnapshot.reservations`) at the next poll, which :func:`reserve` asks to
do at once (:func:`slurm.snapshot.reread_soon`). Each action is audited ``reservation.create`` /
``reservation.delete`` with what it was and what it is.

A reservation left unnamed gets ``maint_<start>``, with ``_2``, ``_3``... added when the cluster already
has that name: in the snapshot, or made by the portal (its audit rows) and perhaps not read back yet
(:func:`free_name`).

Refused with a sentence and nothing made: a window in the past, an end not after its start, a start or
end more than :data:`AHEAD_MAX` ahead, an end and a duration both given, a node the snapshot does not
list, a node list naming more nodes than can be written out (said with how many), a name that is too
long or has other characters; and when Slurm refuses, Slurm's own words. A window over running jobs
without *ignore running jobs* is refused by Slurm ("Requested nodes are busy"); the refusal adds when
those jobs end at the latest (their time limits, from the snapshot), so the admin can tick the box or
start after that. A name the cluster already has is refused by Slurm ("Duplicate reservation name"); the
refusal says to choose another.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from django.db import transaction
from django.utils import timezone as djtz

from audit.models import AuditEvent
from audit.services import audit
from portal.formats import unix_time
from portal.refusals import Problem, Refused
from slurm.queue_index import ON_NODE_STATES
from slurm.records import Reservation
from slurm.snapshot import reread_soon, snapshot_load
from slurm.values import expand_nodes

from .scontrol import configured, current_snapshot, run_scontrol, staff_only

#: Longest reservation name the portal passes to Slurm (the form's limit too, in the same words).
NAME_MAX = 64
#: A reservation name the portal passes to Slurm: letters, digits, ``_``, ``.``, ``-``; at most :data:`NAME_MAX`.
NAME_RE = re.compile(rf"^[A-Za-z0-9_.-]{{1,{NAME_MAX}}}$")
#: The refusal of a name over :data:`NAME_MAX` characters (a Django ``max_length`` message: the form's too).
NAME_TOO_LONG = "The name is %(show_value)d characters long: keep it to %(limit_value)d."
#: An end and a duration both given: which one was meant is not known.
END_AND_DURATION = "You gave both an end and a duration: give one of them and leave the other empty."
#: How far in the past a start may be (clock skew, the time to fill in the form); earlier is refused.
START_GRACE = timedelta(minutes=1)
#: How far ahead a window may reach: maintenance is planned months ahead, not decades (a typo's year 9999
#: would reach scontrol, or overflow the end's arithmetic).
AHEAD_MAX = timedelta(days=2 * 365)
AHEAD_WORDS = "2 years"
#: Who may run jobs in a maintenance reservation the portal makes: root only (the usual MAINT form).
USERS = "root"


@dataclass(frozen=True)
class ReservationAction:
    """What an action did: ``cluster``, ``name``, ``argv`` the scontrol command, ``old``/``new`` as
    audited, ``said`` Slurm's stdout (``Reservation created: maint_...``)."""

    cluster: str
    name: str
    argv: list[str]
    old: dict
    new: dict
    said: str = ""

    def window(self) -> str:
        """``2026-12-07 20:59 UTC to 2026-12-07 21:44 UTC``: the window of the reservation made (``new``),
        its times written as the portal's pages and messages write them."""
        start, end = (datetime.fromisoformat(self.new[key]) for key in ("start", "end"))
        return f"{_utc(start)} to {_utc(end)}"


def reservation_target(cluster: str, name: str) -> str:
    """The audit rows' ``target`` of a reservation: ``reservation:<cluster>/<name>``."""
    return f"reservation:{cluster}/{name}"


def _utc(moment: datetime) -> str:
    return f"{unix_time(moment.timestamp())} UTC"


def _slurm_time(moment: datetime) -> str:
    """``2026-12-03T12:00:00``: the UTC wall clock, read as UTC by scontrol under ``TZ=UTC``."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S")


def default_name(start: datetime) -> str:
    """``maint_20261203_1200``: the name of a reservation left unnamed (its start, UTC)."""
    return "maint_" + start.astimezone(UTC).strftime("%Y%m%d_%H%M")


def free_name(cluster: str, known: list[str], start: datetime, *, read_at: float) -> str:
    """:func:`default_name` of ``start``, or it with ``_2``, ``_3``... when taken: by a reservation in
    ``known`` (the snapshot's, taken at ``read_at``, Unix seconds) or by one the portal made on
    ``cluster`` since then (its ``reservation.create`` audit rows: not in the snapshot yet). One made
    before and deleted since frees its name."""
    base = default_name(start)
    made = AuditEvent.objects.filter(
        action="reservation.create",
        target__startswith=reservation_target(cluster, base),
        at__gte=datetime.fromtimestamp(read_at, UTC),
    )
    taken = set(known) | {target.split("/", 1)[1] for target in made.values_list("target", flat=True)}
    name, suffix = base, 1
    while name in taken:
        suffix += 1
        name = f"{base}_{suffix}"
    return name


def _nodes(text: str, known: list[str], label: str) -> list[str]:
    """The node list ``text`` (``node[1-3],gpu7``, or ``ALL``) expanded and checked against the
    snapshot's nodes; :class:`Refused` naming the unknown ones, saying the list names more nodes than
    can be written out (python-hostlist's limit, 100,000) or that it is malformed."""
    text = (text or "").strip()
    if not text:
        raise Refused(Problem("nodes", "Name the nodes to reserve: a Slurm node list such as node[1-3], or ALL."))
    if text.upper() == "ALL":
        return sorted(known)
    try:
        names = expand_nodes(text)
    except ValueError as exc:
        if "too large" not in str(exc.__cause__ or ""):  # python-hostlist's "range/results too large"
            raise Refused(
                Problem("nodes", f"{text[:60]!r} is not a Slurm node list; write e.g. node3 or node[1-3],gpu7.")
            ) from None
        raise Refused(
            Problem(
                "nodes",
                f"{text[:60]!r} names more than 100,000 nodes; {label} has {len(known)}. Name the ones to reserve, "
                "e.g. node[1-3], or write ALL.",
            )
        ) from None
    unknown = [n for n in names if n not in set(known)]
    if unknown:
        raise Refused(
            Problem("nodes", f"{label} has no node {', '.join(unknown[:10])}; its nodes are {', '.join(sorted(known)[:12])}.")
        )
    return names


def _window(start: datetime | None, end: datetime | None, now: datetime, *, duration: int | None = None) -> None:
    """:class:`Refused` naming what is missing (a start; an end, unless a ``duration`` was given) or
    wrong with the window."""
    problems = []
    if start is None:
        problems.append(Problem("start", "Give the start of the window (date and time, UTC)."))
    if end is None and not duration:
        problems.append(Problem("end", "Give the end of the window (date and time, UTC), or a duration."))
    if start is not None and end is not None and end <= start:
        problems.append(
            Problem("end", f"The end ({_utc(end)}) is not after the start ({_utc(start)}): give an end after the start.")
        )
    elif start is not None and start < now - START_GRACE:
        problems.append(Problem("start", f"The start ({_utc(start)}) has passed; give a start from now ({_utc(now)}) on."))
    elif start is not None and start > now + AHEAD_MAX:
        problems.append(Problem("start", f"The start ({_utc(start)}) is {_too_far(now)}"))
    elif end is not None and end > now + AHEAD_MAX:
        problems.append(Problem("end", f"The end ({_utc(end)}) is {_too_far(now)}"))
    if problems:
        raise Refused(*problems)


def _too_far(now: datetime) -> str:
    return f"more than {AHEAD_WORDS} ahead; plan a window that ends by {_utc(now + AHEAD_MAX)}."


def _busy_until(cluster: str, nodes: list[str], start: datetime) -> int | None:
    """The latest end (Unix seconds: squeue ``end_time``, its start plus time limit) of the jobs
    running on ``nodes`` at the last poll that are still running at ``start``; ``None`` when unknown."""
    snapshot = snapshot_load(cluster=cluster)
    if snapshot is None:
        return None
    wanted, ends = set(nodes), []
    for job in snapshot.jobs:
        if job.state in ON_NODE_STATES and job.nodes:
            try:
                on = set(expand_nodes(job.nodes))
            except ValueError:
                continue
            if on & wanted and job.end_time and job.end_time > start.timestamp():
                ends.append(job.end_time)
    return max(ends) if ends else None


def _end_of(start: datetime | None, end: datetime | None, duration: int | None) -> datetime | None:
    """``end``, or ``start`` plus ``duration`` minutes when only a duration was given (``None``
    without a start). :class:`Refused` (:data:`END_AND_DURATION`) when both were given."""
    if end is not None and duration:
        raise Refused(Problem("duration", END_AND_DURATION))
    if end is not None or start is None or not duration:
        return end
    try:
        return start + timedelta(minutes=duration)
    except OverflowError:  # a start in the year 9999: refused as too far ahead by _window
        return datetime.max.replace(tzinfo=UTC)


def _checked_name(name: str) -> str:
    """``name`` stripped (empty: the portal picks one, :func:`free_name`). Raises :class:`Refused`
    (field ``name``) for a name over :data:`NAME_MAX` characters (:data:`NAME_TOO_LONG`) or one
    :data:`NAME_RE` does not match."""
    name = (name or "").strip()
    if len(name) > NAME_MAX:
        raise Refused(Problem("name", NAME_TOO_LONG % {"show_value": len(name), "limit_value": NAME_MAX}))
    if name and not NAME_RE.fullmatch(name):
        raise Refused(
            Problem(
                "name",
                f"A reservation name has letters, digits, '_', '.' or '-' only (at most {NAME_MAX}); leave it empty for "
                "maint_<start>.",
            )
        )
    return name


def _create_argv(name: str, start: datetime, end: datetime, node_list: str, flags: list[str]) -> list[str]:
    """The ``scontrol create reservation`` argv, times written in UTC (``TZ=UTC`` set for scontrol),
    ``node_list`` a comma-separated node list, for :data:`USERS`."""
    return [
        "env",
        "TZ=UTC",
        "scontrol",
        "create",
        "reservation",
        f"ReservationName={name}",
        f"StartTime={_slurm_time(start)}",
        f"EndTime={_slurm_time(end)}",
        f"Nodes={node_list}",
        f"Users={USERS}",
        f"Flags={','.join(flags)}",
    ]


def _busy_refusal(refused: Refused, cluster: str, names: list[str], start: datetime) -> Refused:
    """Slurm's "nodes busy" refusal (``refused``) with the two ways out: ignore running jobs, or start
    after the last job on ``names`` reaches its time limit (from the snapshot: :func:`_busy_until`,
    said in UTC; "start later" when unknown). Field ``nodes``."""
    until = _busy_until(cluster, names, start)
    after = f"start after {unix_time(until)} UTC, when the last of them reaches its time limit" if until else "start later"
    return Refused(
        Problem(
            "nodes",
            f"{refused}. Jobs are running on these nodes during the window: tick 'ignore running jobs' (they keep "
            f"running into the maintenance) or {after}.",
        )
    )


def _slurm_refusal(
    refused: Refused, found, name: str, names: list[str], start: datetime, ignore_jobs: bool, *, picked: bool
) -> Refused:
    """Slurm's refusal with the way out: for busy nodes :func:`_busy_refusal`; for a name the cluster
    already has, "choose another name" (field ``name``), or, for a name the portal picked (``picked``:
    one made meanwhile outside the portal, or by another admin), "submit again"; else as Slurm said it."""
    words = str(refused).lower()
    if "busy" in words and not ignore_jobs:
        return _busy_refusal(refused, found.name, names, start)
    if "duplicate reservation name" in words:
        way_out = "submit again, and the portal picks the next free name" if picked else "choose another name"
        return Refused(Problem("name", f"{refused}. {found.label} already has a reservation named {name}: {way_out}."))
    return refused


def reservation_create(
    *,
    cluster: str,
    start: datetime | None,
    end: datetime | None = None,
    nodes: str,
    duration: int | None = None,
    ignore_jobs: bool = False,
    name: str = "",
    by,
) -> ReservationAction:
    """A maintenance reservation on ``cluster`` from ``start`` to ``end`` (aware datetimes; or, for
    ``end``, ``duration`` minutes from ``start``, not both: :data:`END_AND_DURATION`) for ``nodes`` (a
    Slurm node list or ``ALL``, checked against the snapshot), ``Users=root``, ``Flags=MAINT`` plus
    ``IGNORE_JOBS`` when ``ignore_jobs`` (it may then overlap running jobs). ``name``: default
    :func:`free_name`. Audit ``reservation.create``. Raises ``PermissionDenied`` for anyone but a portal
    admin, :class:`Refused` for bad input or Slurm's refusal."""
    staff_only(by, "Planning maintenance")
    found = configured(cluster)
    now = djtz.now()
    end = _end_of(start, end, duration)
    _window(start, end, now, duration=duration)
    name = _checked_name(name)
    snapshot = current_snapshot(found)
    names = _nodes(nodes, [n.name for n in snapshot.nodes], found.label)
    picked = not name
    name = name or free_name(found.name, [r.name for r in snapshot.reservations], start, read_at=snapshot.taken_at)
    flags = ["MAINT", *(["IGNORE_JOBS"] if ignore_jobs else [])]
    node_list = ",".join(names)
    argv = _create_argv(name, start, end, node_list, flags)
    try:
        said = run_scontrol(found, argv, field="nodes")
    except Refused as refused:
        raise _slurm_refusal(refused, found, name, names, start, ignore_jobs, picked=picked) from None
    new = {
        "name": name,
        "start": start.astimezone(UTC).isoformat(),
        "end": end.astimezone(UTC).isoformat(),
        "nodes": node_list,
        "users": USERS,
        "flags": ",".join(flags),
    }
    with transaction.atomic():
        audit(actor=by, action="reservation.create", target=reservation_target(found.name, name), old={}, new=new)
    reread_soon(found.name)
    return ReservationAction(found.name, name, argv, {}, new, said)


def _as_audit(record: Reservation) -> dict:
    return {
        "name": record.name,
        "start": datetime.fromtimestamp(record.start, UTC).isoformat(),
        "end": datetime.fromtimestamp(record.end, UTC).isoformat(),
        "nodes": ",".join(record.nodes),
        "users": ",".join(record.users),
        "accounts": ",".join(record.accounts),
        "flags": ",".join(record.flags),
    }


def reservation_delete(*, cluster: str, name: str, by) -> ReservationAction:
    """Delete reservation ``name`` of ``cluster`` (``scontrol delete ReservationName=<name>``; one
    not yet in the snapshot, made seconds ago, is asked of Slurm too). Audit ``reservation.delete``
    with what the snapshot knew of it. Raises as :func:`reservation_create`; Slurm's answer for a
    name it does not know is its refusal."""
    staff_only(by, "Deleting a reservation")
    found = configured(cluster)
    name = (name or "").strip()
    if not NAME_RE.fullmatch(name):
        raise Refused(Problem("name", f"{name[:40]!r} is not a reservation name (letters, digits, '_', '.', '-')."))
    snapshot = current_snapshot(found)
    known = next((r for r in snapshot.reservations if r.name == name), None)
    argv = ["scontrol", "delete", f"ReservationName={name}"]
    said = run_scontrol(found, argv, field="name")
    old = _as_audit(known) if known else {"name": name}
    with transaction.atomic():
        audit(actor=by, action="reservation.delete", target=reservation_target(found.name, name), old=old, new={})
    reread_soon(found.name)
    return ReservationAction(found.name, name, argv, old, {}, said)
