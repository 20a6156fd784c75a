"""What a teams sync did, per cluster (the teams sync reaches every cluster's accounting): each
configured cluster's part (:class:`ClusterSync`: the actions planned there and how each went, or why
its slurmdbd could not be read), and the whole (:class:`SyncReport`), with the lines and the headline
people read. Plain data: no Slurm, no cache."""

from __future__ import annotations

from dataclasses import dataclass, field

from .actions import Action


@dataclass
class ActionResult:
    """``ok``: True/False once run, ``None`` when not run (dry run); ``error``: sacctmgr's message."""

    action: Action
    ok: bool | None = None
    error: str = ""

    @property
    def line(self) -> str:
        return f"FAILED {self.action.describe()}: {self.error}" if self.ok is False else self.action.describe()


@dataclass
class ClusterSync:
    """One cluster's part of a sync: ``cluster`` its configured name (:mod:`slurm.clusters`),
    ``results`` the actions planned on its slurmdbd and how each went; ``error``: its accounting could
    not be read ("reading Slurm: ..."), so nothing was planned or changed there."""

    cluster: str
    results: list[ActionResult] = field(default_factory=list)
    error: str = ""

    @property
    def failed(self) -> list[ActionResult]:
        return [r for r in self.results if r.ok is False]

    @property
    def ok(self) -> bool:
        return not self.error and not self.failed

    def lines(self, *, labelled: bool) -> list[str]:
        """``FAILED <error>`` or one line per action, each after ``<cluster>: `` when ``labelled``."""
        prefix = f"{self.cluster}: " if labelled else ""
        return [prefix + line for line in ([f"FAILED {self.error}"] if self.error else []) + [r.line for r in self.results]]


@dataclass
class SyncReport:
    """What a sync planned and how each action went, one :class:`ClusterSync` per cluster it ran on
    (``parts``, in the configured order). ``error``: the sync did not start at all (another sync held
    the lock, Redis unreachable), nothing was read or planned anywhere; ``skipped``: teams or members
    that cannot be synced (on any cluster); ``labelled``: the site has several clusters, so each line
    names its cluster (``cluster2: FAILED + add user erin to nlp: ...``)."""

    dry_run: bool
    parts: list[ClusterSync] = field(default_factory=list)
    skipped: tuple[str, ...] = ()
    error: str = ""
    labelled: bool = False

    @property
    def results(self) -> list[ActionResult]:
        return [r for part in self.parts for r in part.results]

    @property
    def actions(self) -> list[Action]:
        return [r.action for r in self.results]

    @property
    def failed(self) -> list[ActionResult]:
        return [r for r in self.results if r.ok is False]

    @property
    def failed_clusters(self) -> list[str]:
        """Clusters whose part failed (accounting unreadable, or an action refused): what a retry runs."""
        return [part.cluster for part in self.parts if not part.ok]

    @property
    def ok(self) -> bool:
        return not self.error and not self.skipped and all(part.ok for part in self.parts)

    @property
    def lines(self) -> list[str]:
        head = [f"FAILED {self.error}"] if self.error else []
        return head + [f"! skipped {s}" for s in self.skipped] + [x for p in self.parts for x in p.lines(labelled=self.labelled)]


@dataclass(frozen=True)
class ClusterOutcome:
    """A cluster's part of a sync as a run keeps it (:mod:`teams.sync.runs`; plain values, so it can be
    stored, and merged with a later try's part for that cluster): ``changes`` actions planned there,
    ``failed`` of them refused, ``error`` its accounting unreadable, ``lines`` what people read,
    ``attempt`` the try that produced it."""

    cluster: str
    changes: int = 0
    failed: int = 0
    error: str = ""
    lines: tuple[str, ...] = ()
    attempt: int = 1

    @property
    def ok(self) -> bool:
        return not self.error and not self.failed

    @classmethod
    def of(cls, part: ClusterSync, *, labelled: bool, attempt: int = 1) -> ClusterOutcome:
        return cls(
            cluster=part.cluster,
            changes=len(part.results),
            failed=len(part.failed),
            error=part.error,
            lines=tuple(part.lines(labelled=labelled)),
            attempt=attempt,
        )


def headline(*, dry_run: bool, error: str, outcomes: list[ClusterOutcome], labelled: bool) -> str:
    """One sentence saying whether anything was applied, and where not (the lines follow it)."""
    if error:
        return f"Slurm sync did not run: {error}"
    unread = [o for o in outcomes if o.error]
    if unread and len(unread) == len(outcomes):
        return "Slurm sync did not run: " + "; ".join((f"{o.cluster}: " if labelled else "") + o.error for o in unread)
    count = sum(o.changes for o in outcomes)
    failed = sum(o.failed for o in outcomes)
    if dry_run:
        text = (
            f"Dry run: {count} change(s) planned, none applied."
            if count
            else "Dry run: Slurm already matches the portal; nothing to change."
        )
    elif failed:
        where = ", ".join(o.cluster for o in outcomes if o.failed)
        text = f"Sync: {failed} of {count} change(s) FAILED{f' (on {where})' if labelled else ''}; the others were applied."
    elif unread:
        text = f"Sync applied {count} change(s)." if count else "Nothing to change where Slurm could be read."
    else:
        text = f"Sync applied {count} change(s)." if count else "Slurm already matches the portal; nothing to change."
    if unread:
        text += " Not synced: " + "; ".join(f"{o.cluster} ({o.error})" for o in unread) + "."
    return text


def report_headline(report: SyncReport) -> str:
    """:func:`headline` of a whole report."""
    return headline(
        dry_run=report.dry_run,
        error=report.error,
        outcomes=[ClusterOutcome.of(p, labelled=report.labelled) for p in report.parts],
        labelled=report.labelled,
    )
