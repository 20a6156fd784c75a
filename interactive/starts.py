"""The home page's one-click starts: each Start button with whether it is offered (and why not),
what is free for it and its likely wait (:func:`start_choices`), and the click itself
(:func:`session_start_preset`), which starts a session exactly as the session form does."""

from __future__ import annotations

from dataclasses import dataclass

from accounts.models import User
from jobs.reads.selectors import snapshot_status
from jobs.submit.policy import SitePolicy
from jobs.submit.submit import account_for
from portal.refusals import Problem, Refused
from slurm.snapshot import ClusterSnapshot, snapshot_load

from .models import Session
from .options import SessionsHeld, session_cap_problems, session_cluster_choice, sessions_held
from .presets import SessionPreset, preset_get, preset_refusals, presets_for, unreadable_presets
from .services import current_policy, session_start
from .waits import Availability, availability, waiting_ahead

#: What a click on a preset that no longer exists is told.
GONE = "That Start button is no longer offered (the site's presets changed); the buttons below are the current ones."


def no_team_problem(user: User) -> Problem | None:
    """The refusal of a user in no team: Slurm has no account to bill a session to (the batch job's
    words, :func:`jobs.submit.submit.account_for`); ``None`` for a user in a team."""
    if user.slurm_accounts:
        return None
    return account_for(user=user, requested="", billed="sessions")[1][0]


@dataclass(frozen=True)
class StartChoice:
    """One Start button: its ``preset``, ``why_not`` (the refusals' sentences; empty when it is
    offered) and ``availability`` (what is free, the likely wait)."""

    preset: SessionPreset
    why_not: tuple[str, ...]
    availability: Availability

    @property
    def offered(self) -> bool:
        return not self.why_not


@dataclass(frozen=True)
class _ClusterLook:
    """What the buttons of one cluster are checked against, read once: its policy, snapshot head,
    whether that is current, the wait ahead, and the person's figures for the caps there."""

    policy: SitePolicy
    snapshot: ClusterSnapshot | None
    current: bool
    summary: object  # interactive.waits.waiting_ahead's, or None
    held: SessionsHeld


def _look(user: User, cluster: str) -> _ClusterLook:
    snapshot = snapshot_load(with_jobs=False, cluster=cluster)
    status = snapshot_status(snapshot, cluster=cluster)
    current = status.has_data and not status.stale and not status.error
    summary = waiting_ahead(cluster, snapshot.taken_at) if snapshot and current else None
    return _ClusterLook(current_policy(cluster), snapshot, current, summary, sessions_held(user=user, cluster=cluster))


def start_choices(*, user: User) -> tuple[list[StartChoice], str]:
    """``user``'s Start buttons (:func:`interactive.presets.presets_for`), each checked now by the
    session form's checks against its cluster's policy (the default session cluster's, or the last
    session's: :attr:`SessionPreset.cluster`) and by the per-person caps the person is at there
    (:func:`interactive.options.session_cap_problems`, in the words a click would be refused with), with its availability from that cluster's snapshot (never Slurm); and "" or,
    when some of the site's presets cannot be read, why (they are left out)."""
    presets = presets_for(user=user)
    unreadable = unreadable_presets()
    problem = (
        ("Some of the site's session presets cannot be read and are left out: " + " ".join(unreadable)) if unreadable else ""
    )
    team = no_team_problem(user)
    looks: dict[str, _ClusterLook] = {}
    choices = []
    for preset in presets:
        cluster, problems = session_cluster_choice(preset.options)
        if cluster not in looks:
            looks[cluster] = _look(user, cluster)
        look = looks[cluster]
        problems = ([team] if team else []) + problems + preset_refusals(preset, policy=look.policy)
        problems += session_cap_problems(user=user, gpu_count=preset.gpu_count, held=look.held, cluster=cluster)
        choices.append(
            StartChoice(
                preset,
                tuple(p.message for p in problems),
                availability(preset, snapshot=look.snapshot, current=look.current, summary=look.summary),
            )
        )
    return choices, problem


def session_start_preset(*, user: User, key: str) -> tuple[SessionPreset, Session]:
    """Start the session of the Start button ``key`` (:attr:`SessionPreset.key`) through
    :func:`interactive.services.session_start`, with the options the session form would send
    (same policy checks, same refusals). Raises :class:`Refused` (no such button, a user in no
    team, or whatever ``session_start`` refuses) or :class:`interactive.hub.HubUnavailable`."""
    preset = preset_get(user=user, key=key)
    if preset is None:
        raise Refused(Problem("preset", GONE))
    team = no_team_problem(user)
    if team is not None:
        raise Refused(team)
    return preset, session_start(user=user, raw_options=preset.options)
