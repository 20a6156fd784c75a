"""What the usage refresh stores and pages read: each team's GPU usage this period
(:class:`TeamUsage`, per member :class:`MemberUsage`), the cache's freshness (:class:`UsageStatus`)
and the job form's estimate (:class:`QuotaEstimate`). Plain data, no Slurm and no cache."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime

from portal.formats import hours

from .fairshare import FairShare

#: What an admin must do when ``gres/gpu`` is not in ``AccountingStorageTRES``.
GPU_NOT_TRACKED = (
    "GPU usage is not tracked by this cluster: add gres/gpu (and gres/gpu:<type> for each type) to "
    "AccountingStorageTRES in slurm.conf, then restart slurmctld."
)


#: A quota's unit (``TeamUsage.quota_unit``) in words.
UNIT_LABELS = {"gpu": "GPU-hours", "billing": "billed unit-hours"}

#: What a scavenger job's quota estimate says instead of a verdict (``UsageFactor=0``: it costs none).
COSTS_NO_QUOTA = "as scavenger it costs no quota"


@dataclass(frozen=True)
class MemberUsage:
    """One user of the account this period. ``gpu_hours``: allocated GPUs x run time inside the
    period, from sacct (``tres.allocated`` ``gres/gpu`` x ``time.start``..``time.end``, or ..now for a
    running job); ``gpu_hours_live``: Slurm's own figure (sshare ``GrpTRESRaw`` ``gres/gpu`` / 60);
    both ``None`` when GPUs are not tracked. ``jobs``: sacct jobs active in the period;
    ``failed_jobs``: those :func:`slurm.states.is_failure` calls failed; ``median_wait_s``:
    median of ``time.start - time.submission`` in seconds over jobs that started in the period
    (``None`` when none did); ``waits_s``: those waits (seconds, sorted), so the median over several
    clusters is the median of all their waits."""

    username: str
    gpu_hours: float | None
    gpu_hours_live: float | None
    jobs: int
    failed_jobs: int
    median_wait_s: float | None
    waits_s: tuple[float, ...] = ()


@dataclass(frozen=True)
class TeamUsage:
    """One account's GPU usage in the current accounting period. GPU figures are ``None`` when
    ``tracked`` is False (show :data:`GPU_NOT_TRACKED`) or unknown.

    - ``gpu_hours_used``: sshare ``GrpTRESRaw`` ``gres/gpu`` (whole GPU-minutes) / 60, what Slurm
      enforces the quota against; ``gpu_hours_quota``: sshare ``GrpTRESMins`` ``gres/gpu`` / 60
      (``None`` = no quota); ``gpu_hours_left`` = quota - used (negative when over);
      ``used_up``: a quota exists and nothing is left.
    - ``gpu_limit``: GPUs at once, ``scontrol show assoc_mgr`` ``GrpTRES gres/gpu`` (``None`` = none).
    - ``gpus_running``: GPUs of the account's RUNNING jobs in the snapshot (squeue); without a
      snapshot, assoc_mgr's in-use count. ``pending_gpu_hours``: sum over PENDING jobs of GPUs x time
      limit (minutes / 60) x array tasks; jobs without a time limit are not counted.
    - ``gpu_hours_promised``: GPU-hours the account's RUNNING jobs still hold (GPUs x time limit
      less run time), Slurm's ``scontrol show assoc_mgr`` ``GrpTRESRunMins`` ``gres/gpu`` / 60, or
      the snapshot's when assoc_mgr has none (:func:`teams.usage.compute.promised`); under
      ``AccountingStorageEnforce=safe`` a job starts only if used + promised + its own GPUs x time
      limit fit under the quota. ``promised_jobs``: those running GPU jobs in the snapshot.
      Both ``None`` when unknown or not tracked.
    - ``burn_gpu_hours_per_day``: sacct GPU-hours of the last 7 days (or since ``period_start``, at
      least one hour) per day; ``runout_date``: UTC day when ``gpu_hours_left`` reaches 0 at that
      rate (``None``: no quota, rate 0, ``used_up``, or not before ``period_end``, when Slurm
      clears the usage); of figures summed over clusters, the earliest cluster's own.
    - ``members``: sorted by GPU-hours, most first. ``daily``: ``"YYYY-MM-DD"`` (a local day in the
      site's zone, Django's ``TIME_ZONE``, as the monthly report's months) -> username -> GPU-hours
      for every day of the period so far; a job's GPU-hours are split across the days it ran;
      members without use that day are left out.
    - ``period_start``/``period_end``: the accounting period in UTC (from
      ``PriorityUsageResetPeriod``; ``period_end`` ``None`` when Slurm never resets).
    - ``taken_at``: Unix seconds of the successful refresh; ``lag_note``: why a figure may lag or
      differ, ``""`` when none; ``error``/``error_since``: the last failed refresh (Unix seconds of
      the first failure in a row), cleared by a successful one.
    - ``cluster``: the cluster these figures are from (each cluster is refreshed and stored on its
      own), ``""`` for a team's figures summed over the clusters (:func:`teams.usage.sum.usage_sum`),
      which then has each cluster's own in ``clusters`` (configured order) and, in ``missing``, the
      configured clusters that have no figures for the team, each with why (cluster -> sentence).
    - ``quota_unit``: what the team's quota counts, ``"gpu"`` (GPU-minutes, ``GrpTRESMins=gres/gpu``;
      also with no quota) or ``"billing"`` (billed unit-minutes, ``GrpTRESMins=billing``, and no
      ``gres/gpu`` quota); ``billed_hours_used``: sshare ``GrpTRESRaw`` ``billing`` / 60,
      ``billed_hours_quota``: sshare ``GrpTRESMins`` ``billing`` / 60, ``billed_hours_left`` = quota -
      used; the three only when a ``billing`` quota is set (else ``None``). :attr:`quota_hours` and
      its siblings give the figures in the quota's unit, :attr:`unit_label` its name.
      ``billed_hours_promised``: billed unit-hours the account's running jobs still hold, assoc_mgr
      ``GrpTRESRunMins`` ``billing`` / 60 (what ``safe`` enforcement adds to used, as for GPUs;
      ``None`` unknown or no ``billing`` quota); ``billed_promised_jobs``: the account's RUNNING jobs
      in the snapshot, with or without GPUs (Slurm bills each; ``None`` without a snapshot).
      ``billing_max_tres``: the cluster's ``PriorityFlags`` holds ``MAX_TRES`` (``scontrol show
      config``), which changes how Slurm weighs a job's TRES (:func:`slurm.tres.billable_tres`).
    - ``fair_share``: the team's fair-share standing on ``cluster`` (:class:`teams.usage.fairshare.FairShare`,
      from the same sshare); ``None`` for a sum over several clusters (each part has its own) or when sshare
      printed no fair-share figures.
    """

    account: str
    tracked: bool
    period_start: datetime
    period_end: datetime | None
    taken_at: float
    gpu_hours_used: float | None = None
    gpu_hours_quota: float | None = None
    gpu_hours_left: float | None = None
    used_up: bool = False
    gpu_limit: int | None = None
    gpus_running: int | None = None
    pending_gpu_hours: float | None = None
    gpu_hours_promised: float | None = None
    promised_jobs: int | None = None
    burn_gpu_hours_per_day: float | None = None
    runout_date: date | None = None
    members: list[MemberUsage] = field(default_factory=list)
    daily: dict[str, dict[str, float]] = field(default_factory=dict)
    lag_note: str = ""
    error: str = ""
    error_since: float | None = None
    cluster: str = ""
    clusters: list[TeamUsage] = field(default_factory=list)
    fair_share: FairShare | None = None
    missing: dict[str, str] = field(default_factory=dict)
    quota_unit: str = "gpu"
    billed_hours_used: float | None = None
    billed_hours_quota: float | None = None
    billed_hours_left: float | None = None
    billed_hours_promised: float | None = None
    billed_promised_jobs: int | None = None
    billing_max_tres: bool = False

    @property
    def unit_label(self) -> str:
        """The quota's unit in words: "GPU-hours" or "billed unit-hours"."""
        return UNIT_LABELS[self.quota_unit]

    @property
    def quota_hours(self) -> float | None:
        """The quota in its unit (:attr:`unit_label`); ``None`` = no quota."""
        return self.billed_hours_quota if self.quota_unit == "billing" else self.gpu_hours_quota

    @property
    def used_up_on(self) -> list[str]:
        """Summed figures: the clusters whose quota is used up (their jobs wait there while the sums
        still show some left, since Slurm holds each cluster's quota alone)."""
        return [part.cluster for part in self.clusters if part.used_up] if len(self.clusters) > 1 else []

    @property
    def some_quota(self) -> bool:
        """Summed figures: at least one cluster sets the team a quota (its own figures: it sets one)."""
        return any(part.quota_hours is not None for part in self.clusters) or self.quota_hours is not None

    @property
    def quota_hours_used(self) -> float | None:
        """Used this period in the quota's unit (sshare ``GrpTRESRaw``)."""
        return self.billed_hours_used if self.quota_unit == "billing" else self.gpu_hours_used

    @property
    def quota_hours_left(self) -> float | None:
        """Left this period in the quota's unit (quota - used; negative when over)."""
        return self.billed_hours_left if self.quota_unit == "billing" else self.gpu_hours_left

    @property
    def stale(self) -> bool:
        """The last refresh of these figures (of one of the clusters summed) failed."""
        return bool(self.error)

    @property
    def several_clusters(self) -> bool:
        """Summed figures of a site with more than one cluster: pages show a row per cluster."""
        return len(self.clusters) + len(self.missing) > 1

    @property
    def untracked_clusters(self) -> list[str]:
        """The clusters summed that do not track ``gres/gpu`` (their GPU figures are not in the sum)."""
        return [part.cluster for part in self.clusters if not part.tracked]

    def to_dict(self) -> dict:
        data = asdict(replace(self, clusters=[]))
        for key in ("period_start", "period_end", "runout_date"):
            data[key] = data[key].isoformat() if data[key] else None
        data["members"] = [{**m, "waits_s": list(m["waits_s"])} for m in data["members"]]
        data["clusters"] = [part.to_dict() for part in self.clusters]
        return data

    @classmethod
    def from_dict(cls, data: dict) -> TeamUsage:
        return cls(
            **{
                **data,
                "period_start": datetime.fromisoformat(data["period_start"]),
                "period_end": datetime.fromisoformat(data["period_end"]) if data.get("period_end") else None,
                "runout_date": date.fromisoformat(data["runout_date"]) if data.get("runout_date") else None,
                "members": [MemberUsage(**{**m, "waits_s": tuple(m.get("waits_s", ()))}) for m in data.get("members", [])],
                "clusters": [TeamUsage.from_dict(part) for part in data.get("clusters", [])],
                "missing": dict(data.get("missing", {})),
                "fair_share": FairShare(**data["fair_share"]) if data.get("fair_share") else None,
            }
        )


def hours_text(hours: float) -> str:
    """GPU-hours as the quota sentence writes them: "80 h", "12.5 h", under an hour in minutes
    ("15 min")."""
    if 0 < abs(hours) < 1:
        return f"{round(hours * 60)} min"
    return f"{hours:.1f}".rstrip("0").rstrip(".") + " h"


def _units(value: float) -> str:
    """Billed unit-hours as the quota sentence writes them: "80", "12.5", and below 1 with two
    decimals, as the team page shows them (:func:`portal.formats.hours`): "0.67", not "0.7"."""
    if 0 < abs(value) < 1:
        return hours(value)
    return f"{value:.1f}".rstrip("0").rstrip(".")


@dataclass(frozen=True)
class QuotaEstimate:
    """Whether a job fits its team's GPU quota on its cluster, counted as Slurm counts it under
    ``AccountingStorageEnforce=safe``: a job starts only if used + promised + its own GPUs x time
    limit fit under ``GrpTRESMins``; otherwise Slurm holds it (pending reason
    ``AssocGrpGRESMinutes``). All figures in GPU-hours:

    - ``gpu_hours_used``: sshare ``GrpTRESRaw`` ``gres/gpu`` / 60; ``gpu_hours_quota``: sshare
      ``GrpTRESMins`` ``gres/gpu`` / 60;
    - ``gpu_hours_promised``: what the team's ``promised_jobs`` running jobs still hold (assoc_mgr
      ``GrpTRESRunMins`` ``gres/gpu`` / 60, see :class:`TeamUsage`; 0 when unknown);
      ``promised_jobs`` ``None`` when the count is unknown (no snapshot);
    - ``gpu_hours_left`` = quota - used - promised (negative when over), what a new job may take;
    - ``gpu_hours_max`` = this job's GPUs x time limit; ``will_wait``: it is more than left.

    ``taken_at``: when the usage figures were read (Unix seconds); ``error_since``: since when
    refreshing them fails (Unix seconds; ``None`` while they are current), so the form says the
    figures are old.

    ``unit`` ``"billing"``: the team's quota is in billed unit-minutes (``GrpTRESMins=billing``),
    which Slurm counts the same way with the job's ``billing`` TRES in place of its GPUs. The
    ``billed_hours_*`` fields are then its figures, in billed unit-hours: ``used`` and ``quota``
    (sshare ``GrpTRESRaw`` and ``GrpTRESMins`` ``billing`` / 60), ``promised`` (assoc_mgr
    ``GrpTRESRunMins`` ``billing`` / 60; 0 when unknown) to ``promised_jobs`` running jobs (with or
    without GPUs), ``left`` = quota - used - promised; ``billing``: this job's billed units per minute
    of run, Slurm's ``billing`` TRES computed from its ``partition``'s ``TRESBillingWeights``
    (``billing_weights`` as written, ``""``: none, so Slurm bills its CPUs) and the cluster's
    ``PriorityFlags`` (:mod:`teams.usage.billing`), and ``billed_hours_max`` = billing x time limit;
    ``will_wait``: it is more than left, with ``fit`` a shorter time limit (or 1 GPU) that would fit.
    Without the partition's figures (``billing`` ``None``: no snapshot yet, unknown partition) the
    sentence says Slurm computes the units at the start and ``will_wait`` is True only when nothing
    is left. The ``gpu_hours_*`` fields other than ``gpu_hours_max`` are 0.

    ``scavenger``: the job asks for the scavenger class, which costs no quota (``UsageFactor=0``) and
    which the team's quota does not hold: ``will_wait`` is False and the sentence says so.
    ``offer``: the sentence offering scavenger to a job that will wait for quota
    (:func:`teams.usage.borrow.scavenger_offer`); ``""`` when not offered."""

    team: str
    gpu_hours_max: float
    gpu_hours_left: float
    will_wait: bool
    taken_at: float
    #: "ask for at most 30 min, or 1 GPU for 60 min" when it does not fit and something would; "".
    fit: str = ""
    #: The team's quota is 0 GPU-hours: frozen, the next period will not help.
    frozen: bool = False
    error_since: float | None = None
    #: The cluster whose figures these are (the job's: each cluster enforces its own quota).
    cluster: str = ""
    gpu_hours_used: float = 0.0
    gpu_hours_quota: float = 0.0
    gpu_hours_promised: float = 0.0
    promised_jobs: int | None = None
    unit: str = "gpu"
    billed_hours_used: float | None = None
    billed_hours_quota: float | None = None
    billed_hours_left: float | None = None
    scavenger: bool = False
    offer: str = ""
    billed_hours_promised: float = 0.0
    billing: int | None = None
    billed_hours_max: float | None = None
    partition: str = ""
    billing_weights: str = ""

    @property
    def summary(self) -> str:
        """The figures and the verdict without the way to fit: "Team vision: used 80 h, 12 h
        promised to 3 running jobs, 8 h left; this job needs 16 h: it will wait for quota (...)"."""
        if self.unit == "billing":
            return self._billed_summary()
        promised = self._promised(hours_text(self.gpu_hours_promised), self.gpu_hours_promised)
        left = f"{hours_text(self.gpu_hours_left)} left" if self.gpu_hours_left > 0 else "nothing left"
        head = (
            f"Team {self.team}: used {hours_text(self.gpu_hours_used)}, {promised}, {left}; "
            f"this job needs {hours_text(self.gpu_hours_max)}: "
        )
        if self.scavenger:
            return head + COSTS_NO_QUOTA
        if self.frozen:
            return head + (
                "the team's quota is 0 GPU-hours (frozen), so GPU jobs wait until a portal admin sets a quota; "
                "a job without GPUs can run now"
            )
        return head + self._verdict(self.gpu_hours_max, self.gpu_hours_quota - self.gpu_hours_used)

    def _promised(self, amount: str, value: float) -> str:
        """What running jobs still hold, in words: "12 h promised to 3 running jobs"."""
        if self.promised_jobs:
            jobs = f"{self.promised_jobs} running job{'s' if self.promised_jobs != 1 else ''}"
            return f"{amount} promised to {jobs}"
        if value > 0:
            return f"{amount} promised to running jobs"
        return "nothing promised to running jobs"

    def _verdict(self, needs: float, unpromised: float) -> str:
        """ "it fits", or "it " and :meth:`_waits`."""
        return "it " + self._waits(needs, unpromised) if self.will_wait else "it fits"

    @staticmethod
    def _waits(needs: float, unpromised: float) -> str:
        """Until when a job that needs ``needs`` waits: running jobs ending early help only when it fits
        in quota - used (``unpromised``)."""
        if needs <= unpromised:
            return "will wait for quota (until running jobs end early, the next period or a higher quota)"
        return "will wait for quota (until the next period or a higher quota)"

    def _billed_summary(self) -> str:
        """:attr:`summary` of a quota in billed units: "Team vision: used 80 of 200 billed unit-hours,
        12 promised to 3 running jobs, 108 left; this job needs 28 (14 billed units an hour, from
        partition train's TRESBillingWeights): it fits"."""
        used, quota, left = self.billed_hours_used or 0.0, self.billed_hours_quota or 0.0, self.billed_hours_left or 0.0
        head = f"Team {self.team}: used {_units(used)} of {_units(quota)} billed unit-hours"
        if self.scavenger:
            return f"{head}; {COSTS_NO_QUOTA}"
        if self.frozen:
            return head + (
                "; the team's quota is 0 billed unit-hours (frozen), so its jobs wait until a portal admin sets a quota"
            )
        promised = self._promised(_units(self.billed_hours_promised), self.billed_hours_promised)
        head += f", {promised}, " + (f"{_units(left)} left" if left > 0 else "nothing left")
        if self.billing is None or self.billed_hours_max is None:
            if self.will_wait:
                return f"{head}: this job {self._waits(1e-9, quota - used)}"  # needs more than nothing
            return head + (
                "; this job's billed units: Slurm computes them at the start "
                "(from the partition's TRESBillingWeights), so the portal cannot say whether it fits"
            )
        source = (
            f"from partition {self.partition}'s TRESBillingWeights"
            if self.billing_weights
            else f"partition {self.partition} has no TRESBillingWeights, so Slurm bills its CPUs"
        )
        return (
            f"{head}; this job needs {_units(self.billed_hours_max)} ({self.billing} billed units an hour, {source}): "
            + self._verdict(self.billed_hours_max, quota - used)
        )

    @property
    def sentence(self) -> str:
        """:attr:`summary`, then how to start now when something would fit, as one sentence; then
        the :attr:`offer` when there is one."""
        fit = f". To start now, {self.fit}" if self.fit and not self.frozen else ""
        return f"{self.summary}{fit}." + (f" {self.offer}" if self.offer else "")

    def as_dict(self) -> dict:
        """The API's ``quota`` object: the figures above, ``cluster``, ``team`` and ``sentence``."""
        return {**asdict(self), "sentence": self.sentence}


@dataclass(frozen=True)
class UsageStatus:
    """How fresh a cluster's usage figures are: ``taken_at`` 0 = never; ``error``/``error_since`` as in
    TeamUsage."""

    taken_at: float = 0.0
    error: str = ""
    error_since: float | None = None
