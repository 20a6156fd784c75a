"""A scripted fake transport (batchspawner's ``run_spawner_script`` idea): expected argv -> canned
output. Unexpected commands fail the test loudly."""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from slurm import CommandResult, SlurmError

#: In an expected argv, matches any one argument (e.g. a timestamp).
ANY = object()


def argv_matches(expected: list, actual: list[str]) -> bool:
    return len(expected) == len(actual) and all(e is ANY or e == a for e, a in zip(expected, actual, strict=True))


@dataclass
class Step:
    argv: list[str]
    stdout: bytes = b""
    stderr: bytes = b""
    returncode: int = 0
    raises: SlurmError | None = None


@dataclass
class FakeTransport:
    """Answers ``execute`` from ``script`` in order; records every call in ``calls``."""

    script: list[Step] = field(default_factory=list)
    calls: list[tuple[list[str], bytes | None, float]] = field(default_factory=list)
    closed: bool = False

    def expect(self, argv, stdout: str | bytes = b"", stderr: str | bytes = b"", returncode: int = 0, raises=None):
        enc = lambda v: v.encode() if isinstance(v, str) else v  # noqa: E731
        self.script.append(Step(list(argv), enc(stdout), enc(stderr), returncode, raises))
        return self

    def execute(self, argv, *, stdin, timeout):
        self.calls.append((list(argv), stdin, timeout))
        if not self.script:
            raise AssertionError(f"unexpected command {argv!r}: the script is empty")
        step = self.script.pop(0)
        if not argv_matches(step.argv, list(argv)):
            raise AssertionError(f"expected {step.argv!r}, got {argv!r}")
        if step.raises is not None:
            raise step.raises
        return CommandResult(tuple(argv), step.returncode, step.stdout, step.stderr, 0.001)

    def close(self):
        self.closed = True


#: ``scontrol show partition --oneliner`` of the local cluster (cluster/etc/slurm.conf).
PARTITIONS_TEXT = (
    "PartitionName=interactive Default=NO DefaultTime=01:00:00 MaxTime=08:00:00 Nodes=node1 State=UP\n"
    "PartitionName=train Default=YES DefaultTime=01:00:00 MaxTime=2-00:00:00 Nodes=node[1-3] State=UP\n"
    "PartitionName=small Default=NO DefaultTime=00:10:00 MaxTime=01:00:00 Nodes=node3 State=UP\n"
)

#: What 22.05's poll runs for the reservations, read with the partitions (slurm/adapters/v0_0_38.py),
#: and its answer with none (recorded: tests/fixtures/slurm/22.05/reservations/).
RESERVATIONS_ARGV = ["env", "SLURM_TIME_FORMAT=%s", "scontrol", "show", "reservation", "--oneliner"]
NO_RESERVATIONS_TEXT = "No reservations in the system\n"


def cluster_transport(
    slurm_json, *, partitions: bool = True, squeue: dict | None = None, sprio: str | None = None
) -> FakeTransport:
    """A fake transport scripted with one snapshot poll of the recorded 22.05 cluster (sinfo,
    squeue, and the partitions unless ``partitions=False``); ``squeue`` replaces the recorded queue.
    ``sprio``: what the poller's priority read (``slurm.priority.SPRIO_ARGV``, run by
    ``snapshot_refresh`` after a good poll with jobs pending) answers; ``None``: not scripted (a bare
    ``snapshot_take``)."""
    from slurm.priority import SPRIO_ARGV

    fake = FakeTransport()
    fake.expect(["sinfo", "--json"], stdout=json.dumps(slurm_json("22.05", "sinfo")))
    fake.expect(["squeue", "--json"], stdout=json.dumps(squeue if squeue is not None else slurm_json("22.05", "squeue")))
    if partitions:
        fake.expect(["scontrol", "show", "partition", "--oneliner"], stdout=PARTITIONS_TEXT)
        fake.expect(RESERVATIONS_ARGV, stdout=NO_RESERVATIONS_TEXT)
    if sprio is not None:
        fake.expect(SPRIO_ARGV, stdout=sprio)
    return fake


class EveryCluster(dict):
    """For ``monkeypatch.setattr("slurm.gateway._gateways", EveryCluster(gateway))``: every cluster's
    process-wide gateway is ``gateway`` (a scripted one, or one that fails every call)."""

    def __init__(self, gateway):
        super().__init__()
        self.gateway = gateway

    def get(self, name, default=None):
        return self.gateway

    def values(self):
        return []


def sacctmgr_user_argv(user: str) -> list[str]:
    """The association query of the account lookup (:func:`accounts.directory.cluster_user_lookup`)
    for ``user``, as a scripted transport expects it."""
    return [
        "sacctmgr",
        "--noheader",
        "--parsable2",
        "show",
        "user",
        "where",
        f"name={user}",
        "withassoc",
        "format=DefaultAccount,Account",
    ]


def sacctmgr_user_answer(accounts: str) -> str:
    """That query's answer for ``accounts`` (names separated by blanks, the first the user's
    ``DefaultAccount``): ``<default>|<account>`` per association."""
    names = accounts.split()
    return "".join(f"{names[0]}|{name}\n" for name in names)
