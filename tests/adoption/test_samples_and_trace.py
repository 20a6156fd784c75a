"""The allocation samples (adoption/samples.py) from stored snapshots, and the trace export's
pieces that need no cluster (adoption/trace.py, manage.py trace_export's refusals)."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime

import pytest
from django.core.management import CommandError, call_command

from adoption.models import AllocationSample
from adoption.samples import allocation_sample_take
from adoption.trace import FIELDS, csv_lines, jsonl_lines, pseudonym, trace_key, trace_row
from slurm.records import FinishedJob, Node
from slurm.snapshot import ClusterSnapshot, snapshot_store
from slurm.states import JobState

pytestmark = pytest.mark.django_db


def node(name, gpus, used, state="mixed", flags=()):
    return Node(name=name, state=state, flags=flags, partitions=("train",), cpus=8, alloc_cpus=0, real_memory=1, alloc_memory=0,
                gpus=gpus, gpus_used=used)  # fmt: skip


def test_a_sample_per_cluster_and_gpu_type_from_the_snapshot(clean_cache):
    now = time.time()
    snapshot_store(
        ClusterSnapshot(
            taken_at=now - 5,
            cluster="cluster1",
            nodes=[
                node("n1", {"a100": 4}, {"a100": 3}),
                node("n2", {"a100": 4, "v100": 2}, {"v100": 1}, state="idle", flags=("DRAIN",)),
                node("n3", {}, {}),
            ],
        )
    )
    snapshot_store(
        ClusterSnapshot(taken_at=now - 3600, cluster="cluster2", nodes=[node("g1", {"h100": 8}, {"h100": 8})])
    )  # stale
    rows = allocation_sample_take(now=datetime.fromtimestamp(now, UTC))
    got = {(r.cluster, r.gpu_type): (r.gpus_allocated, r.gpus_total, r.gpus_up) for r in AllocationSample.objects.all()}
    assert len(rows) == 2 and got == {("cluster1", "a100"): (3, 8, 4), ("cluster1", "v100"): (1, 2, 0)}


def test_no_snapshot_no_sample(clean_cache):
    assert allocation_sample_take() == [] and AllocationSample.objects.count() == 0


def test_the_beat_runs_the_sampler(settings):
    assert settings.CELERY_BEAT_SCHEDULE["adoption-allocation-sample"]["task"] == "adoption.tasks.allocation_sample_task"


def record(**kw) -> FinishedJob:
    base = dict(
        job_id=41, array_job_id=0, array_task_id=None, name="secret-name", user="alice", account="vision", partition="train",
        state=JobState.CANCELLED, state_raw="CANCELLED by 1001", exit_code=0, signal=15, elapsed=60, start=1764590400,
        end=1764590460, time_limit=30, comment="secret-comment", nodes="node[1-2]", gpus={"a100": 2}, cancelled_by="alice",
        submit=1764590000, memory_per_cpu=2000, cpus=4, cwd="/home/alice/secret", stdout="/home/alice/secret/out.log",
    )  # fmt: skip
    base.update(kw)
    return FinishedJob(**base)


def test_a_row_keeps_the_figures_and_hashes_the_names(settings):
    settings.PORTAL_TRACE_SECRET = "s1"
    row = trace_row(record(), cluster="cluster1", key=trace_key())
    assert row["submit"] == "2025-12-01T11:53:20Z" and row["start"] == "2025-12-01T12:00:00Z"
    assert (row["gpus"], row["cpus"], row["memory_mib"], row["memory_per"], row["time_limit_min"]) == (
        {"a100": 2},
        4,
        2000,
        "cpu",
        30,
    )
    assert (row["state"], row["exit_code"], row["signal"], row["nodes"]) == ("CANCELLED", 0, 15, "node[1-2]")
    assert len(row["user"]) == 16 and row["user"] != row["account"]
    for text in ("".join(csv_lines([row])), "".join(jsonl_lines([row]))):
        for secret in ("alice", "vision", "secret", "1001"):
            assert secret not in text
    assert list(json.loads("".join(jsonl_lines([row])))) == list(FIELDS)


def test_hashes_are_stable_and_keyed(settings):
    settings.PORTAL_TRACE_SECRET = "one"
    first = pseudonym("user", "alice", key=trace_key())
    assert pseudonym("user", "alice", key=trace_key()) == first
    assert pseudonym("account", "alice", key=trace_key()) != first
    settings.PORTAL_TRACE_SECRET = "two"
    assert pseudonym("user", "alice", key=trace_key()) != first
    settings.PORTAL_TRACE_SECRET = ""
    derived = trace_key()
    assert derived not in (b"", settings.SECRET_KEY.encode()) and pseudonym("user", "alice", key=derived) != first
    settings.SECRET_KEY = settings.SECRET_KEY + "-other"
    assert trace_key() != derived


@pytest.mark.parametrize(
    "options, words",
    [
        ({"since": "2026-13-01"}, "--since '2026-13-01' is not a date: write it YYYY-MM-DD"),
        ({"since": "yesterday"}, "--since 'yesterday' is not a date"),
        ({"since": "2026-11-02", "until": "2026-11-01"}, "--until 2026-11-01 is not after --since 2026-11-02"),
        ({"since": "2026-11-01", "until": "2026-11-01"}, "is not after"),
        ({"since": "2026-11-01", "until": "1st"}, "--until '1st' is not a date"),
        ({"since": "2026-11-01", "cluster": "nowhere"}, "--cluster 'nowhere' is not configured: use one of cluster1"),
        ({"since": "2026-11-01", "format": "xml"}, "--format 'xml' is not known: use csv or jsonl"),
        ({"since": "2999-01-01"}, "is in the future"),
    ],
)
def test_bad_input_is_a_clear_command_error(options, words):
    with pytest.raises(CommandError, match=words.replace("(", r"\(")):
        call_command("trace_export", **options)
