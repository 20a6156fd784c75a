"""A pending job's priority in plain words ("why am I waiting"), from the sprio figures the poller
stored with the snapshot (:mod:`slurm.priority`, ``cluster:<name>:priority``): one cache read, no
Slurm call. The job page's status, the API's ``priority`` object and so the CLI's ``show`` use it."""

from __future__ import annotations

import math
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime

from django.core.cache import cache

from slurm.priority import ROW, JobPriority
from slurm.queue_index import HELD_REASONS
from slurm.snapshot import snapshot_key
from slurm.states import JobState

from ..models import Job

#: What each weighted part of sprio is, in words after its figure ("3,000 from your team's fair
#: share"); ``age`` gets how long the job has waited. Slurm's names: PriorityWeightFairshare, ...Age,
#: ...Partition, ...QOS, ...JobSize, ...Assoc, the site factor, ...TRES.
PART_WORDS = {
    "fairshare": "from your team's fair share",
    "age": "from waiting",
    "partition_part": "from the partition",
    "qos": "from its QOS",
    "job_size": "from the job's size",
    "assoc": "from your team's association priority",
    "site": "from the site's own factor",
    "tres": "from the resources it asks for",
}
#: Teams named in the sentence about the jobs ahead; the rest are summed up.
TEAMS_NAMED = 4


@dataclass(frozen=True)
class PriorityPart:
    """One non-zero part of the total: ``factor`` (a :class:`~slurm.priority.JobPriority` field name:
    ``fairshare``, ``age``, ``partition_part``, ``qos``, ``job_size``, ``assoc``, ``site``, ``tres``,
    or ``nice``), ``value`` (sprio's weighted figure, an integer; ``nice`` is what it takes off the
    total, below 0 when an operator's negative nice adds to it) and ``words`` ("3,000 from your
    team's fair share")."""

    factor: str
    value: int
    words: str


@dataclass(frozen=True)
class TeamAhead:
    """``count`` pending jobs of Slurm account ``team`` ahead of the job in its partition;
    ``less_used``: each of them (but one whose priority an administrator set) gets more from fair share
    than the job does (its team has used less of its share), and one at least is ahead by a higher
    priority, not only by an earlier submission."""

    team: str
    count: int
    less_used: bool


@dataclass(frozen=True)
class PriorityExplanation:
    """A pending job's priority in one partition and what it is made of, at the poll of ``read_at``
    (Unix seconds). ``total``: sprio's priority; ``parts``: the non-zero parts, largest first (a nice
    that lowers it last); ``set_by_hand``: an administrator set the total (``scontrol update
    Priority=``) and the parts do not count; ``ahead``: pending jobs in ``partition`` that Slurm
    schedules before it, a higher priority or the same one and an earlier submission (an array not
    split yet counts once), by team in ``teams_ahead`` (most first); ``same_earlier``: how many of
    them have the same priority; ``own_team``: the job's account."""

    total: int
    partition: str
    parts: tuple[PriorityPart, ...]
    set_by_hand: bool
    ahead: int
    teams_ahead: tuple[TeamAhead, ...]
    own_team: str
    read_at: float
    same_earlier: int = 0

    @property
    def text(self) -> str:
        """The two sentences: "Your job's priority is 4,210: 3,000 from your team's fair share, 900 from
        waiting 9 h, 310 from the partition. 2 jobs ahead of it in train have higher priority: both from
        team nlp, which has used less of its fair share than your team." """
        return f"{self.total_sentence} {self.ahead_sentence}"

    @property
    def total_sentence(self) -> str:
        if self.set_by_hand:
            return (
                f"Your job's priority is {self.total:,}, set by an administrator (scontrol update Priority=), "
                "so fair share, waiting time and the other factors do not count."
            )
        if not self.parts:
            return f"Your job's priority is {self.total:,}."
        return f"Your job's priority is {self.total:,}: " + ", ".join(p.words for p in self.parts) + "."

    @property
    def ahead_sentence(self) -> str:
        if not self.ahead:
            return f"No pending job in {self.partition} has a higher priority."
        jobs = f"{self.ahead} job{'s' if self.ahead != 1 else ''} ahead of it in {self.partition}"
        if self.same_earlier == self.ahead:  # Slurm's order for equal priorities: the earlier submission first
            verb = (
                "has the same priority and was submitted earlier"
                if self.ahead == 1
                else "have the same priority and were submitted earlier"
            )
        elif self.same_earlier:
            higher = self.ahead - self.same_earlier
            verb = f"have higher priority ({higher}) or the same and an earlier submission ({self.same_earlier})"
        else:
            verb = "has a higher priority" if self.ahead == 1 else "have higher priority"
        if len(self.teams_ahead) == 1:
            team = self.teams_ahead[0]
            which = {1: "it is from", 2: "both from"}.get(self.ahead, f"all {self.ahead} from")
            return f"{jobs} {verb}: {which} {self._team(team)}{self._less_used(team, ', ')}."
        named = [
            f"{t.count} from {self._team(t)}" + (f" ({self._less_used(t, '')})" if self._less_used(t, "") else "")
            for t in self.teams_ahead[:TEAMS_NAMED]
        ]
        rest = sum(t.count for t in self.teams_ahead[TEAMS_NAMED:])
        if rest:
            named.append(f"{rest} from {len(self.teams_ahead) - TEAMS_NAMED} other teams")
        return f"{jobs} {verb}: " + ", ".join(named) + "."

    def _team(self, team: TeamAhead) -> str:
        if not team.team:
            return "a team the queue did not name"
        return f"your team {team.team}" if team.team == self.own_team else f"team {team.team}"

    def _less_used(self, team: TeamAhead, lead: str) -> str:
        if not team.less_used or team.team == self.own_team or not team.team:
            return ""
        return f"{lead}which has used less of its fair share than your team"

    def as_api(self) -> dict:
        """The API's ``priority`` object (``api.priority.PriorityOut``)."""
        return {
            "total": self.total,
            "partition": self.partition,
            "set_by_hand": self.set_by_hand,
            "parts": [{"factor": p.factor, "value": p.value, "words": p.words} for p in self.parts],
            "ahead": self.ahead,
            "teams_ahead": [{"team": t.team, "count": t.count, "less_used_share": t.less_used} for t in self.teams_ahead],
            "read_at": datetime.fromtimestamp(self.read_at, tz=UTC) if self.read_at else None,
            "text": self.text,
        }


def waited_text(seconds: float) -> str:
    """How long a job has waited, to the minute: "under a minute", "40 min", "9 h", "9 h 5 min", "2 days 3 h"."""
    minutes = max(0, int(seconds)) // 60
    days, hours, minutes = minutes // 1440, minutes // 60 % 24, minutes % 60
    if days:
        return f"{days} day{'s' if days != 1 else ''}" + (f" {hours} h" if hours else "")
    if hours:
        return f"{hours} h" + (f" {minutes} min" if minutes else "")
    return f"{minutes} min" if minutes else "under a minute"


def _parts(record: JobPriority, now: float) -> tuple[PriorityPart, ...]:
    parts = []
    for factor, words in PART_WORDS.items():
        value = getattr(record, factor)
        if value:
            if factor == "age" and record.submit_time:
                words = f"{words} {waited_text(now - record.submit_time)}"
            parts.append(PriorityPart(factor, value, f"{value:,} {words}"))
    parts.sort(key=lambda p: -p.value)
    if record.nice > 0:
        parts.append(PriorityPart("nice", record.nice, f"minus {record.nice:,} for its nice value"))
    elif record.nice < 0:
        parts.insert(0, PriorityPart("nice", record.nice, f"{-record.nice:,} from a negative nice value an administrator set"))
        parts.sort(key=lambda p: -abs(p.value))
    return tuple(parts)


def _less_used(team_ahead: list[JobPriority], record: JobPriority) -> bool:
    """Whether every job of a team ahead (but those whose priority was set by hand) gets more from fair
    share than ``record``, and one at least is ahead by a higher priority (a team ahead only by earlier
    submissions is not ahead because of its fair share): its team has used less of its share."""
    judged = [o for o in team_ahead if not o.set_by_hand]
    higher = any(o.priority > record.priority for o in judged)
    return higher and all(o.fairshare > record.fairshare for o in judged)


def _queue_order(record: JobPriority) -> tuple[float, int]:
    """Where Slurm puts ``record`` among jobs of its priority: by submit time, then job id. An unknown
    submit time (0: the job was not in the same poll's squeue, so it came after it) sorts last."""
    return (record.submit_time or math.inf, record.job_id)


def priority_explain(record: JobPriority, others: list[JobPriority], *, read_at: float, now: float) -> PriorityExplanation:
    """The explanation of ``record`` (the job's sprio line) against ``others`` (the lines of the same
    partition from the same poll: the jobs with a higher total are ahead of it, and those with the same
    total submitted before it, by squeue's submit time then job id, as Slurm orders equal priorities)."""
    mine = _queue_order(record)
    ahead = [
        o
        for o in others
        if o.partition == record.partition
        and o.job_id != record.job_id
        and (o.priority > record.priority or (o.priority == record.priority and _queue_order(o) < mine))
    ]
    counts = Counter(o.account for o in ahead)
    teams = tuple(
        TeamAhead(team, count, _less_used([o for o in ahead if o.account == team], record))
        for team, count in sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    )
    return PriorityExplanation(
        total=record.priority,
        partition=record.partition,
        parts=() if record.set_by_hand else _parts(record, now),
        set_by_hand=record.set_by_hand,
        ahead=len(ahead),
        same_earlier=sum(o.priority == record.priority for o in ahead),
        teams_ahead=teams,
        own_team=record.account,
        read_at=read_at,
    )


#: This process's copy of each cluster's stored sprio entry, ``{cluster: (the snapshot head's token,
#: entry)}``: the poller stores the entry and a new head token in one transaction, so while the head's
#: token is the copy's, the copy is the stored entry, and a page view costs one small read instead of
#: unpickling every pending job's figures again (10,000 pending jobs: about 570 kB, some 8 ms).
_ENTRY_MEMO: dict[str, tuple[str, object]] = {}


def _entry_load(cluster: str):
    """``cluster``'s stored :func:`slurm.priority.priority_entry` (``None`` before the first poll that
    stored one): this process's copy while the snapshot head's token is unchanged, else the head and
    the entry in one round trip (one ``MGET``, consistent with the poller's transaction)."""
    head_key, entry_key = snapshot_key(cluster, "head"), snapshot_key(cluster, "priority")
    held = _ENTRY_MEMO.get(cluster)
    if held is not None:
        head = cache.get(head_key) or {}
        if head.get("stored") == held[0]:
            return held[1]
    found = cache.get_many([head_key, entry_key])
    token, entry = (found.get(head_key) or {}).get("stored"), found.get(entry_key)
    if token:
        _ENTRY_MEMO[cluster] = (token, entry)
    else:
        _ENTRY_MEMO.pop(cluster, None)
    return entry


def job_priority(job: Job, *, now: float | None = None) -> PriorityExplanation | None:
    """The explanation of a pending job's priority from the last poll's sprio figures, or ``None``: the
    job is not pending, is held (no priority), has no Slurm id yet, or sprio did not list it (not read
    yet, a begin time ahead, sprio failed at the last poll). A job on several partitions is explained
    in the one where its priority is highest. Reads one cache entry (no Slurm call)."""
    if job.state != JobState.PENDING or not job.slurm_job_id or job.reason in HELD_REASONS:
        return None
    entry = _entry_load(job.cluster)
    try:
        rows, read_at = entry["rows"], float(entry["taken_at"])
        mine = [JobPriority(*row) for row in rows if row[ROW["job_id"]] == job.slurm_job_id]
    except (KeyError, TypeError, ValueError):  # nothing stored yet, or a shape this release cannot read
        return None
    if not mine:
        return None
    record = max(mine, key=lambda r: r.priority)
    partition, total = ROW["partition"], ROW["priority"]
    others = [JobPriority(*row) for row in rows if row[partition] == record.partition and row[total] >= record.priority]
    return priority_explain(record, others, read_at=read_at, now=time.time() if now is None else now)
