"""The home page's one-click starts: each Start button with whether it is offered (and why not),
what is free for it and its likely wait (:func:`start_choices`), and the click itself
(:func:`session_start_preset`), which starts a session exactly as the session form does."""

from __future__ import annotations

from dataclasses import dataclass

from accounts.models import User
from jobs.reads.selectors import snapshot_status
from jobs.submit.submit import account_for
from portal.refusals import Problem, Refused
from slurm.clusters import sessions_cluster
from slurm.snapshot import snapshot_load

from .models import Session
from .options import session_cap_problems, sessions_held
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


def start_choices(*, user: User) -> tuple[list[StartChoice], str]:
    """``user``'s Start buttons (:func:`interactive.presets.presets_for`), each checked now by the
    session form's checks against the sessions cluster's policy and by the per-person caps the
    person is at (:func:`interactive.options.session_cap_problems`, in the words a click would be
    refused with), with its availability from that cluster's snapshot (never Slurm); and "" or,
    when some of the site's presets cannot be read, why (they are left out)."""
    presets = presets_for(user=user)
    unreadable = unreadable_presets()
    problem = (
        ("Some of the site's session presets cannot be read and are left out: " + " ".join(unreadable)) if unreadable else ""
    )
    cluster = sessions_cluster().name
    snapshot = snapshot_load(with_jobs=False, cluster=cluster)
    status = snapshot_status(snapshot, cluster=cluster)
    current = status.has_data and not status.stale and not status.error
    summary = waiting_ahead(cluster, snapshot.taken_at) if snapshot and current else None
    policy = current_policy()
    team = no_team_problem(user)
    held = sessions_held(user=user)  # the per-person caps' figures, once for every button
    choices = []
    for preset in presets:
        problems = ([team] if team else []) + preset_refusals(preset, policy=policy)
        problems += session_cap_problems(user=user, gpu_count=preset.gpu_count, held=held)
        choices.append(
            StartChoice(
                preset,
                tuple(p.message for p in problems),
                availability(preset, snapshot=snapshot, current=current, summary=summary),
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
