"""Choosing a priority class (teams.priority_classes): the policy's refusals say what to change, the form
offers the classes with one line each only when the site does, and the sbatch script gets ``--qos``."""

import pytest

from jobs.submit.classes import class_problems
from jobs.submit.policy import JobRequest, SitePolicy
from jobs.web.forms import JobForm
from jobs.worker.batch import render_batch_script
from slurm import SlurmGateway
from slurm.snapshot import snapshot_take
from tests.fakes import cluster_transport as scripted
from tests.jobs.test_submit import KEY, make_job


@pytest.fixture
def classes_on(settings):
    settings.PORTAL_PRIORITY_CLASSES = True
    settings.PORTAL_HIGH_MAX_GPUS_PER_TEAM = 2
    return settings


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
    return JobRequest(**(base | kw))


def test_each_class_within_policy_passes(policy, classes_on):
    for name in ("", "high", "normal", "scavenger"):
        assert policy.check(req(priority=name)) == [], name


def test_scavenger_without_requeue_is_refused_saying_what_to_change(policy, classes_on):
    [problem] = policy.check(req(priority="scavenger", requeue=False))
    assert problem.field == "requeue"
    assert "turn requeue on" in problem.message and "run.requeue: true" in problem.message and "normal class" in problem.message


def test_high_beyond_the_teams_cap_is_refused_with_the_cap(policy, classes_on):
    [problem] = policy.check(req(priority="high", gpu_count=4))
    assert problem.field == "gpu_count"
    assert problem.message == (
        "A high job may use at most 2 GPUs (each team's cap in the high class); this one asks for 4. "
        "Ask for at most 2 GPUs, or choose the normal class."
    )


def test_an_unknown_class_and_classes_off_are_refused(policy, classes_on):
    assert class_problems("urgent", requeue=True, gpu_count=1)[0].message == (
        "'urgent' is not a priority class here. Choose one of: high, normal, scavenger."
    )
    classes_on.PORTAL_PRIORITY_CLASSES = False
    assert class_problems("high", requeue=True, gpu_count=1)[0].message == (
        "This site offers no priority classes: leave the priority empty."
    )
    assert class_problems("", requeue=False, gpu_count=8) == []


@pytest.mark.django_db
def test_the_form_offers_the_classes_with_one_line_each_only_when_the_site_does(policy, classes_on):
    form = JobForm(policy=policy, accounts=["vision"])
    choices = dict(form.fields["priority"].choices)
    assert list(choices) == ["", "high", "normal", "scavenger"]
    assert choices["scavenger"].startswith("scavenger: Runs only on GPUs nobody else waits for and costs no quota")
    classes_on.PORTAL_PRIORITY_CLASSES = False
    assert "priority" not in JobForm(policy=policy, accounts=["vision"]).fields


@pytest.mark.django_db
def test_the_sbatch_script_gets_the_classs_qos_and_none_without_a_class(django_user_model):
    alice = django_user_model.objects.create_user("alice")
    paths = dict(
        workdir=f"/home/alice/portal-jobs/{KEY}",
        output_path=f"/home/alice/portal-jobs/{KEY}/slurm-%j.out",
        error_path=f"/home/alice/portal-jobs/{KEY}/slurm-%j.err",
    )
    job = make_job(alice, priority_class="scavenger", **paths)
    lines = render_batch_script(job).splitlines()
    assert (
        '#SBATCH --qos="scavenger"' in lines
        and lines.index('#SBATCH --qos="scavenger"') == lines.index('#SBATCH --account="vision"') + 1
    )
    job.priority_class = ""
    assert not any(line.startswith("#SBATCH --qos") for line in render_batch_script(job).splitlines())
