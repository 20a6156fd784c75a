"""The v0.0.42 adapter on the real cluster2 (Slurm 24.11, cluster/cluster2/up.sh), over the portal's own
SSH transport to its sshd on 127.0.0.1:2223: ``snapshot_take`` reads its nodes (g1: four h100, g2: two
l40s), its partitions, reservations and a job submitted there, in four commands per poll (the probe aside); the sync's ``sacct --json``
of finished jobs reads exit 3 and a signal; the accounting text commands of 22.05 (``scontrol show
config``, ``sshare -P``, ``scontrol show assoc_mgr``, ``sacctmgr --parsable2``) read 24.11 as well.
Needs cluster2 up; fails (never skips) when it is not."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta

import pytest

from slurm import SlurmGateway, accounting
from slurm.adapters import adapter_for, v0_0_42
from slurm.snapshot import snapshot_take
from slurm.states import JobState
from slurm.times import start_bound
from tests.cluster.test_cluster2_integration import cluster2_transport, submit, wait_ended
from tests.waiting import scontrol_show_job, wait_for

pytestmark = pytest.mark.integration


class Counting:
    """A transport that counts the commands sent through it (the poll's Slurm calls)."""

    def __init__(self, transport):
        self.transport, self.argvs = transport, []

    def execute(self, argv, *, stdin, timeout):
        self.argvs.append(list(argv))
        return self.transport.execute(argv, stdin=stdin, timeout=timeout)

    def close(self):
        self.transport.close()


@pytest.fixture
def cluster2():
    counting = Counting(cluster2_transport())
    gw = SlurmGateway(counting, command_timeout=30)
    gw.counting = counting
    yield gw
    gw.close()


def cancel(gw: SlurmGateway, user: str, job_id: int) -> None:
    gw.run(["scancel", str(job_id)], as_user=user, check=False)


def test_snapshot_take_reads_cluster2_its_nodes_partitions_and_a_job(cluster2):
    job_id, comment, _ = submit(
        cluster2, "alice", ["-p", "gpu", "--gres=gpu:h100:1", "-t", "2", "--mem=100M"], "#!/bin/bash\nsleep 60\n"
    )
    try:
        cluster2.counting.argvs.clear()
        snap = snapshot_take(cluster2, now=time.time())
        # the probe, squeue, then scontrol for the nodes, the partitions and the reservations
        assert [argv[0] for argv in cluster2.counting.argvs] == ["sinfo", "squeue", "scontrol", "scontrol", "scontrol"]
        assert snap.output_version == "v0.0.42" and snap.slurm_version.startswith("24.11.")
        nodes = {n.name: n for n in snap.nodes}
        assert {name: n.gpus for name, n in nodes.items()} == {"g1": {"h100": 4}, "g2": {"l40s": 2}}
        assert nodes["g1"].partitions == ("gpu",) and nodes["g2"].partitions == ("small",)  # g2: the small-job pool
        assert all(n.cpus > 0 and n.real_memory > 0 for n in nodes.values())
        parts = {p.name: p for p in snap.partitions}
        assert parts["gpu"].nodes == ("g1",) and parts["gpu"].is_default and parts["small"].nodes == ("g2",)
        (job,) = [j for j in snap.jobs if j.job_id == job_id]
        assert (job.comment, job.user, job.account, job.partition, job.gpus) == (comment, "alice", "vision", "gpu", {"h100": 1})
        assert job.state in {"PENDING", "CONFIGURING", "RUNNING"} and job.time_limit == 2 and job.submit_time > 0
        assert v0_0_42.queue_job_by_comment(cluster2.run_json(v0_0_42.SQUEUE), comment) == (job_id, "cluster2")

        cluster2.counting.argvs.clear()
        again = snapshot_take(cluster2, previous=snap, now=snap.taken_at + 5)
        assert [argv[:3] for argv in cluster2.counting.argvs] == [
            ["squeue", "--json=v0.0.42+complex", "-t"],  # v0_0_42.SQUEUE
            ["scontrol", "show", "node"],
        ]  # the version is known and the partitions are a minute old at most: two commands
        assert again.partitions == snap.partitions and any(j.job_id == job_id for j in again.jobs)
    finally:
        cancel(cluster2, "alice", job_id)


def finished_record(gw: SlurmGateway, job_id: int, submitted: datetime, timeout: float = 60):
    """The sync's ``sacct --json -D -S <bound> -j <id>`` once accounting has the job's end: (its
    argv, the document, the job's records by its adapter)."""
    argv = ["sacct", "--json", "-D", "-S", start_bound(submitted), "-j", str(job_id)]
    looks: list = []  # the records read at each look

    def ended():
        doc = gw.run_json(argv)
        records = adapter_for(doc, argv=argv).parse_sacct_jobs(doc)
        looks.append(records)
        return (argv, doc, records) if records and all(r.end for r in records) else None

    return wait_for(
        f"sacct to have the end of job {job_id} on cluster2",
        ended,
        timeout=timeout,
        every=1,
        seen=lambda: f"sacct records: {looks[-1:]}\n{scontrol_show_job(job_id, cluster='cluster2')}",
    )


def test_the_syncs_sacct_of_finished_jobs_on_cluster2_reads_exit_code_and_signal(cluster2):
    submitted = datetime.now(UTC) - timedelta(seconds=5)
    exit3, comment3, _ = submit(cluster2, "bob", ["-p", "small", "-t", "1", "--mem=100M"], "#!/bin/bash\nexit 3\n")
    killed, comment9, _ = submit(cluster2, "alice", ["-p", "small", "-t", "1", "--mem=100M"], "#!/bin/bash\nkill -9 $$\n")
    wait_ended(exit3)
    wait_ended(killed)

    # the queue (-t all) still lists them, with the wait status the sync takes while accounting is behind
    queue = {j.job_id: j for j in snapshot_take(cluster2, now=time.time()).jobs}
    assert (queue[exit3].state, queue[exit3].exit_code, queue[exit3].signal) == ("FAILED", 3, 0)
    assert (queue[killed].state, queue[killed].exit_code, queue[killed].signal) == ("FAILED", 0, 9)
    # and so does the key look-up's squeue (jobs/worker/send.py find_by_key): plain squeue --json does not
    plain = cluster2.run_json(["squeue", "--json"])
    assert v0_0_42.queue_job_by_comment(plain, comment3) is None
    assert v0_0_42.queue_job_by_comment(cluster2.run_json(["squeue", "--json", "-t", "all"]), comment3) == (exit3, "cluster2")

    _, doc, (record,) = finished_record(cluster2, exit3, submitted)
    assert adapter_for(doc) is v0_0_42 and doc["meta"]["plugin"]["data_parser"] == "data_parser/v0.0.42"
    assert (record.state, record.exit_code, record.signal, record.comment) == (JobState.FAILED, 3, 0, comment3)
    assert (record.user, record.account, record.partition, record.nodes) == ("bob", "nlp", "small", "g2")
    assert record.start and record.end >= record.start and record.submit
    _, _, (record,) = finished_record(cluster2, killed, submitted)
    assert (record.state, record.exit_code, record.signal, record.comment) == (JobState.FAILED, None, 9, comment9)


def test_the_accounting_text_commands_read_cluster2s_24_11(cluster2):
    """``scontrol show config``, ``sshare -P``, ``scontrol show assoc_mgr``, ``sacctmgr --parsable2``:
    kept as text for every version (their 24.11 JSON is no better for what is read); they parse on 24.11."""
    config = accounting.read_config(cluster2)
    assert config.tracked and config.reset_period == "MONTHLY"  # AccountingStorageTRES=gres/gpu,...
    shares = {(r.account, r.user): r for r in accounting.read_shares(cluster2)}
    assert {("vision", "alice"), ("nlp", "bob"), ("vision", "")} <= set(shares)
    assert "gres/gpu" in shares[("vision", "alice")].grp_tres_raw
    limits = accounting.read_assoc_mgr(cluster2)
    assert ("vision", "alice") in limits and ("nlp", "bob") in limits
    associations = {(a.account, a.user) for a in accounting.read_associations(cluster2)}
    assert {("vision", "alice"), ("nlp", "bob")} <= associations
    users = {u.name: u.default_account for u in accounting.read_users(cluster2)}
    assert (users["alice"], users["bob"]) == ("vision", "nlp")
    assert accounting.read_descriptions(cluster2)["vision"]
