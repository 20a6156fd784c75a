"""Site policy on the recorded cluster: every refusal says what was wrong and what is allowed."""

import pytest

from jobs.submit.policy import JobRequest, SitePolicy, format_minutes
from slurm import SlurmGateway
from slurm.snapshot import snapshot_take
from tests.fakes import cluster_transport as scripted


@pytest.fixture
def policy(slurm_json, settings):
    settings.PORTAL_PARTITIONS = []
    return SitePolicy.from_snapshot(snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0))


def req(**kw):
    base = dict(
        name="train",
        partition="train",
        gpu_type="a100",
        gpu_count=2,
        cpus=4,
        memory_mb=8000,
        time_limit_min=60,
        script="python3 train.py\n",
    )
    base.update(kw)
    return JobRequest(**base)


def messages(errors):
    return {e.field: e.message for e in errors}


def test_partitions_and_limits_come_from_the_cluster(policy):
    assert sorted(policy.partitions) == ["interactive", "small", "train"]
    train = policy.partitions["train"]
    assert train.max_time_min == 2880 and train.gpu_types == ["a100", "t4"]
    assert train.gpu_counts("a100") == [1, 2, 4] and train.gpu_counts("t4") == [1, 2]
    assert policy.partitions["small"].max_time_min == 60


def test_a_sensible_request_passes(policy):
    assert policy.check(req()) == []
    assert policy.check(req(gpu_count=0, gpu_type="")) == []
    assert policy.check(req(partition="small", gpu_type="t4", gpu_count=2, cpus=4, memory_mb=8000, time_limit_min=60)) == []


def test_configuration_filters_partitions(slurm_json):
    snap = snapshot_take(SlurmGateway(scripted(slurm_json)), now=1000.0)
    policy = SitePolicy.from_snapshot(snap, allowed=["train"])
    assert list(policy.partitions) == ["train"]
    assert "Choose one of: train." in messages(policy.check(req(partition="small")))["partition"]


@pytest.mark.parametrize("bad", ["foo'; touch /tmp/pwned; echo '", "nope", ""])
def test_unknown_partition_is_refused_with_the_choices(policy, bad):
    msg = messages(policy.check(req(partition=bad)))["partition"]
    assert "is not offered here" in msg and "interactive, small, train" in msg


@pytest.mark.parametrize("count, ok", [(1, True), (2, True), (3, False), (4, True), (8, False), (16, False)])
def test_gpu_counts_are_powers_of_two_up_to_the_node(policy, count, ok):
    errors = messages(policy.check(req(gpu_count=count)))
    assert ("gpu_count" not in errors) is ok
    if not ok:
        assert "Allowed: 0, 1, 2, 4." in errors["gpu_count"]


def test_t4_nodes_have_two(policy):
    msg = messages(policy.check(req(partition="small", gpu_type="t4", gpu_count=4)))["gpu_count"]
    assert "4 t4 GPUs" in msg and "Allowed: 0, 1, 2." in msg


def test_wrong_gpu_type_for_partition(policy):
    msg = messages(policy.check(req(partition="interactive", gpu_type="t4")))["gpu_type"]
    assert "has no 't4' GPUs" in msg and "a100" in msg


@pytest.mark.parametrize("minutes, ok", [(1, True), (60, True), (61, False), (0, False)])
def test_time_limit_within_partition_max(policy, minutes, ok):
    errors = messages(policy.check(req(partition="small", gpu_type="t4", gpu_count=1, time_limit_min=minutes)))
    assert ("time_limit_min" not in errors) is ok
    if minutes == 61:
        assert "longer than small's maximum of 1 h" in errors["time_limit_min"]


def test_memory_and_cpus_within_node_limits(policy):
    errors = messages(policy.check(req(partition="small", gpu_type="t4", gpu_count=1, cpus=5, memory_mb=9000)))
    assert "between 1 and 4" in errors["cpus"] and "at most 7.8 GB (8000 MiB" in errors["memory_mb"]


@pytest.mark.parametrize(
    "field, value, words",
    [
        ("name", "", "Give the job a name"),
        ("name", "two\nlines", "one line"),
        ("name", "x" * 201, "at most 200"),
        ("name", "\x1b[31mRED\x07", "plain text"),
        ("name", "\u200b\u200b", "plain text"),
        ("name", "abc\u202edef", "plain text"),
        ("script", "   ", "Paste a script"),
        ("script", "#!/usr/bin/env python3\nprint(1)\n", "must be a bash script"),
        ("script", "#!/bin/bash\n#SBATCH --gres=gpu:8\necho hi\n", "Line 2 is an #SBATCH line"),
        ("script", "#!/bin/bash\n# my job\n\n  #SBATCH --time=5\necho hi\n", "Line 4 is an #SBATCH line"),
        ("script", "echo a\x00b", "at most 256 KiB"),
        ("workdir", "../../etc", "without '..'"),
        ("workdir", "a\nb", "one line"),
        (
            "workdir",
            "~/gpuportal-examples",
            "'~' is not expanded here: a relative path is already taken in your home directory, so write gpuportal-examples"
            " (or give a full path).",
        ),
        ("workdir", "~//x", "so write x (or give a full path)."),
        ("workdir", "~", "so leave it empty."),
        ("workdir", "~bob/runs", "so give the full path, such as /home/<user>/...."),
    ],
)
def test_text_fields(policy, field, value, words):
    assert words in messages(policy.check(req(**{field: value})))[field]


@pytest.mark.parametrize(
    "script",
    [
        "#!/bin/bash\necho hi\n",
        "#!/usr/bin/env bash\necho hi",
        "#!/bin/sh\necho\n",
        "echo no shebang",
        "#!/bin/bash\ncat > job.sh <<'EOF'\n#SBATCH --gres=gpu:8\nEOF\n",
    ],
)
def test_shell_scripts_pass(policy, script):
    assert policy.check(req(script=script)) == []


def test_a_workdir_refusal_promises_only_what_is_checked(policy):
    """A workdir with '..' was refused as "must be a path inside your home directory", yet an absolute
    path outside it (another user's home) was accepted: the home is known only on the cluster, and an
    absolute path is used as written, as the user. The refusal says what may be written instead."""
    sentence = (
        "The working directory must be a path of at most 512 characters without '..': relative to your home directory"
        " (such as projects/digits), or a full path to a directory you can enter."
    )
    assert messages(policy.check(req(workdir="../../bob")))["workdir"] == sentence
    assert messages(policy.check(req(workdir="/" + "x" * 600)))["workdir"] == sentence
    assert policy.check(req(workdir="/home/bob")) == policy.check(req(workdir="/scratch/shared/data")) == []


def test_names_are_free_text(policy):
    assert policy.check(req(name="$(id) `x` 'q' \"dq\" ; rm -rf / (paren)")) == []


def test_no_snapshot_offers_nothing_and_says_so():
    errors = SitePolicy.from_snapshot(None).check(req())
    assert "not been seen yet" in errors[0].message


def test_format_minutes():
    assert (format_minutes(90), format_minutes(2880), format_minutes(59)) == ("1 h 30 min", "2 days", "59 min")
