"""The recorded Slurm outputs of every release the adapters read, by role, for tests that run on all of
them: ``22.05/`` (Slurm 22.05.8, ``v0.0.38``, hand-recorded: ``22.05/README.md``) and the three
directories ``cluster/record_fixtures.py`` wrote from cluster2 (``23.11/`` v0.0.40, ``24.05/`` v0.0.41,
``24.11/`` v0.0.42; ids, comments and options from each ``manifest.json``).

A role is a job playing the same part in each recording (``exit3``, ``signal``, ``running``,
``pending_resources``, ``array``, ``requeue``, ``drained_wait``, ``cancelled_pending``...): where it is
(the squeue and sacct documents that show it), its job id and its comment. 22.05's recording has no
job for some roles (``pending_priority``, ``pending_quota``, a node not responding): those are ``None``
and the tests of them run on the releases that have them.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from functools import cache

from slurm.adapters import RELEASES
from tests.conftest import FIXTURES

SLURM = FIXTURES / "slurm"
#: Every release with recorded outputs, oldest first.
ALL = ("22.05", "23.11", "24.05", "24.11")
#: The releases whose JSON is data_parser's (v0.0.40-42), recorded from cluster2.
DATA_PARSER = ("23.11", "24.05", "24.11")


@dataclass(frozen=True)
class Role:
    """One job of a recording: ``queue``/``sacct`` the documents (file stems) that show it (``None``:
    not in one), ``id`` its job id, ``comment`` its ``--comment`` (``""``: none), ``user``, ``gpus``
    what it asked for (GPU type -> count)."""

    id: int
    queue: str | None
    sacct: str | None
    comment: str = ""
    user: str = "alice"
    gpus: dict = field(default_factory=dict)


@dataclass(frozen=True)
class Recording:
    """The recorded outputs of one ``release``: ``version`` its output version, ``files`` which
    document is which (``nodes``, ``nodes_drained``, ``nodes_down``, ``poll_queue``, ``nothing_found``;
    ``None`` when not recorded), ``roles`` by name (``None``: not recorded for this release), and
    ``drained``/``down`` the node drained (reason ``disk swap``) / not responding there."""

    release: str
    version: str
    files: dict
    roles: dict
    drained: str
    down: str | None
    nodes: dict  # name -> (gpus, gpus_used, partitions) in the queue moment

    def doc(self, name: str) -> dict:
        """A recorded JSON document, by file stem or by a ``files`` key."""
        return load(self.release, self.files.get(name, name))

    def role(self, name: str) -> Role | None:
        return self.roles.get(name)

    @property
    def adapter(self):
        return RELEASES[self.release]

    def text(self, name: str) -> str:
        return (SLURM / self.release / name).read_text()


@cache
def _load(release: str, stem: str) -> str:
    return (SLURM / release / f"{stem}.json").read_text()


def load(release: str, stem: str) -> dict:
    """A fresh copy of ``<release>/<stem>.json`` (tests may change their copy)."""
    return json.loads(_load(release, stem))


def manifest(release: str) -> dict:
    return json.loads((SLURM / release / "manifest.json").read_text())


def _gpus(sbatch: list[str]) -> dict:
    """``--gres=gpu:h100:4`` among a job's sbatch options -> ``{"h100": 4}``."""
    for option in sbatch:
        if option.startswith("--gres=gpu:"):
            _, gtype, count = option.removeprefix("--gres=").split(":")
            return {gtype: int(count)}
    return {}


def _cluster2(release: str) -> Recording:
    jobs = manifest(release)["jobs"]

    def role(name: str, queue: str | None = "squeue_all", sacct: str | None = "sacct") -> Role:
        job = jobs[name]
        return Role(job["id"], queue, sacct, job["comment"], job["user"], _gpus(job["sbatch"]))

    roles = {
        name: role(name)
        for name in ("exit3", "signal", "running", "pending_resources", "pending_priority", "pending_quota", "array")
    }
    roles["cancelled_pending"] = roles["pending_quota"]  # cancelled while pending (scancel as alice)
    roles["requeue"] = role("requeue", "squeue_requeued", "sacct_requeued")
    roles["drained_wait"] = role("drained_wait", "squeue_drained", None)
    return Recording(
        release=release,
        version=RELEASES[release].VERSION,
        files={
            "nodes": "scontrol_show_node",
            "nodes_drained": "scontrol_show_node_drained",
            "nodes_down": "scontrol_show_node_down",
            "poll_queue": "squeue_all",
            "nothing_found": "sacct_nothing_found",
        },
        roles=roles,
        drained="g2",
        down="g2",
        nodes={
            "g1": ({"h100": 4}, {"h100": 4}, ("gpu",)),
            "g2": ({"l40s": 2}, {"l40s": 2}, ("gpu", "small")),
        },
    )


def _slurm_2205() -> Recording:
    """22.05.8's recordings (``22.05/README.md``): different jobs in several documents."""
    key18 = "portal:05447023-08b2-4399-a449-13a3ff3ded28"
    roles = {
        "exit3": Role(18, "squeue_arrays", "sacct_outcomes", key18),
        "signal": Role(19, "squeue_arrays", "sacct_outcomes"),
        "running": Role(2, "squeue", "sacct", gpus={"a100": 4}),
        "pending_resources": Role(4, "squeue", "sacct", gpus={"a100": 4}),
        "pending_priority": None,
        "pending_quota": None,
        "cancelled_pending": Role(21, "squeue_arrays", "sacct_outcomes"),  # held array, cancelled unstarted
        "array": Role(23, "squeue_arrays", "sacct_outcomes"),
        "requeue": Role(479, "squeue_requeued", "sacct_requeued", "portal:11111111-2222-3333-4444-555555555555"),
        "drained_wait": Role(762, "squeue_drained", None),
    }
    return Recording(
        release="22.05",
        version="v0.0.38",
        files={
            "nodes": "sinfo",
            "nodes_drained": "sinfo_drained",
            "nodes_down": None,
            "poll_queue": "squeue",
            "nothing_found": "sacct_nothing_found",
        },
        roles=roles,
        drained="node3",
        down=None,
        nodes={
            "node1": ({"a100": 4}, {"a100": 4}, ("interactive", "train")),
            "node2": ({"a100": 4}, {"a100": 4}, ("train",)),
            "node3": ({"t4": 2}, {"t4": 1}, ("train", "small")),
        },
    )


@cache
def recording(release: str) -> Recording:
    """The :class:`Recording` of ``release`` (one of :data:`ALL`)."""
    return _slurm_2205() if release == "22.05" else _cluster2(release)


def partitions_text(release: str) -> str:
    """The ``scontrol show partition --oneliner`` text a poll of ``release``'s cluster reads: 22.05 the
    host cluster's (:data:`tests.fakes.PARTITIONS_TEXT`), 23.11+ the one cluster2's Slurm 24.11 printed
    (``24.11/``: the text has no JSON version, so it is the same for every data_parser release)."""
    from tests.fakes import PARTITIONS_TEXT

    if release == "22.05":
        return PARTITIONS_TEXT
    return (SLURM / "24.11" / "scontrol_show_partition_oneliner.txt").read_text()


def poll_transport(release: str, *, probe: bool = True, partitions: bool = True, queue: dict | None = None, fake=None):
    """A fake transport scripted with one snapshot poll of ``release``'s recorded cluster, in the
    order its adapter asks: the ``sinfo --json`` probe (``probe``: no previous snapshot names the
    version), the queue and nodes, the partitions text (``partitions``). 22.05: ``sinfo`` (the probe
    is its node document), ``squeue``; 23.11+: ``squeue -t all`` (``squeue_all.json``), ``scontrol show
    node``. ``queue`` replaces the recorded queue; ``fake`` adds the steps to an existing script."""
    from tests.fakes import FakeTransport

    rec = recording(release)
    fake = fake if fake is not None else FakeTransport()
    if release == "22.05":
        fake.expect(["sinfo", "--json"], stdout=json.dumps(rec.doc("sinfo")))
        fake.expect(["squeue", "--json"], stdout=json.dumps(queue if queue is not None else rec.doc("squeue")))
    else:
        if probe:
            fake.expect(["sinfo", "--json"], stdout=json.dumps(rec.doc("sinfo")))
        # the adapter's own commands (24.11 asks for --json=v0.0.42+complex; the plain documents
        # recorded here read the same: tests/slurm/test_complex_json.py)
        adapter = rec.adapter
        fake.expect(list(adapter.SQUEUE), stdout=json.dumps(queue if queue is not None else rec.doc("squeue_all")))
        fake.expect(list(adapter.NODES), stdout=json.dumps(rec.doc("nodes")))
    if partitions:
        fake.expect(["scontrol", "show", "partition", "--oneliner"], stdout=partitions_text(release))
        fake.expect(list(recording(release).adapter.RESERVATIONS), stdout=reservations_text(release))
    return fake


def reservations_text(release: str, moment: str = "none") -> str:
    """What ``release``'s poll reads for the reservations (read with the partitions), recorded by
    ``cluster/record_reservations.py``: ``moment`` ``none`` (no reservation) or ``two`` (``fx_maint``:
    MAINT,IGNORE_JOBS for root on one node; ``fx_team``: account nlp, partition small). 22.05: the
    ``--oneliner`` text with ``SLURM_TIME_FORMAT=%s``; 24.11: ``--json=v0.0.42+complex``; 23.11/24.05:
    ``--json=v0.0.40``/``v0.0.41`` as 24.11 emits them."""
    if release == "22.05":
        return (SLURM / "22.05" / "reservations" / f"scontrol_show_reservation_{moment}_epoch.txt").read_text()
    suffix = "_complex" if release == "24.11" else ""
    return (SLURM / release / "reservations" / f"scontrol_show_reservation_{moment}{suffix}.json").read_text()
