"""profiles.services: a profile run is checked against site policy once, and its refusal speaks the
profile's field names (with lines)."""

from __future__ import annotations

import pytest

from jobs.models import Job
from jobs.submit.policy import SitePolicy
from portal.refusals import Problem, Refused
from profiles.services import profile_run
from tests.profiles.conftest import EXAMPLE_TEXT

pytestmark = pytest.mark.django_db


@pytest.fixture
def policy_checks(monkeypatch):
    """The requests ``SitePolicy.check`` was asked about, in order."""
    seen, check = [], SitePolicy.check
    monkeypatch.setattr(SitePolicy, "check", lambda self, request: seen.append(request) or check(self, request))
    return seen


def test_a_profile_run_checks_site_policy_once(people, cluster, no_slurm, policy_checks, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks():
        job = profile_run(user=people["alice"], text=EXAMPLE_TEXT)
    assert [r.name for r in policy_checks] == ["train-digits"]
    assert Job.objects.get() == job and job.account == "vision"


def test_a_refused_profile_run_names_the_profiles_fields_and_lines(people, cluster, no_slurm, policy_checks):
    with pytest.raises(Refused) as refused:
        profile_run(
            user=people["alice"],
            text=EXAMPLE_TEXT.replace("gpus_per_node: 0", "gpus_per_node: 4").replace('"00:10:00"', '"02:00:00"'),
        )
    problems = {p.field: p for p in refused.value.problems}
    assert set(problems) == {"resources.gpus_per_node", "resources.time_limit"}
    assert problems["resources.gpus_per_node"].line == 5 and "Allowed: 0, 1, 2" in problems["resources.gpus_per_node"].message
    assert (
        problems["resources.time_limit"].line == 8
        and "longer than small's maximum of 1 h" in problems["resources.time_limit"].message
    )
    assert len(policy_checks) == 1 and not Job.objects.exists()


def test_more_cpus_than_the_node_has_is_refused_with_the_nodes_figure(people, cluster, no_slurm, policy_checks):
    with pytest.raises(Refused) as refused:
        profile_run(user=people["alice"], text=EXAMPLE_TEXT.replace("cpus: 2", "cpus: 2000"))
    [problem] = refused.value.problems
    assert problem.field == "resources.cpus" and problem.line == 6, problem
    assert "CPUs must be between 1 and" in problem.message and "1024" not in problem.message, problem.message
    assert not Job.objects.exists()


def test_a_gpu_type_without_gpus_does_not_leave_the_cpus_unchecked(people, cluster, no_slurm, policy_checks):
    """A GPU type with no GPUs matched no node of the partition, and the policy then checked neither
    CPUs nor memory: 3000 CPUs reached the job's row."""
    text = EXAMPLE_TEXT.replace("cpus: 2", "cpus: 3000").replace("gpus_per_node: 0", "gpus_per_node: 0\n  gpu_type: h100")
    with pytest.raises(Refused) as refused:
        profile_run(user=people["alice"], text=text)
    assert [(p.field, p.line) for p in refused.value.problems] == [("resources.cpus", 7)], refused.value.problems
    assert "CPUs must be between 1 and" in refused.value.problems[0].message
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "workdir, words",
    [("~/gpuportal-examples", "'~' is not expanded here"), ("../elsewhere", "without '..'")],
)
def test_a_workdir_refused_once_in_the_policys_words(people, cluster, no_slurm, workdir, words):
    """A run.workdir of ~/x ran in /home/bob/~/x; one with '..' was refused twice (the profile's own
    check and the site policy's)."""
    with pytest.raises(Refused) as refused:
        profile_run(user=people["alice"], text=EXAMPLE_TEXT.replace("workdir: gpuportal-examples/digits", f"workdir: {workdir}"))
    [problem] = refused.value.problems
    assert problem.field == "run.workdir" and words in problem.message, problem


def test_a_command_of_only_spaces_is_refused_before_it_runs(people, cluster, no_slurm):
    """``command: "   "`` ran as an empty job that "completed" (the job form refuses a blank script)."""
    text = EXAMPLE_TEXT.replace('  script: train_digits.py\n  args: ["--epochs", "8"]\n', '  command: "   "\n')
    with pytest.raises(Refused) as refused:
        profile_run(user=people["alice"], text=text)
    [problem] = refused.value.problems
    assert (problem.field, problem.line) == ("run.command", 11) and problem.message.startswith("run.command is blank"), problem
    assert not Job.objects.exists()


def test_a_workdir_override_is_refused_in_words_that_match_the_rule(people, cluster, no_slurm):
    """--set workdir=../../bob was refused as "a path inside your home directory", yet workdir=/home/bob
    (an absolute path, used as written, as the user) passed: the sentence now says what is accepted."""
    with pytest.raises(Refused) as refused:
        profile_run(user=people["alice"], text=EXAMPLE_TEXT, overrides={"workdir": "../../bob"})
    [problem] = refused.value.problems
    assert problem.field == "run.workdir" and problem.line is None, problem
    assert "inside your home directory" not in problem.message
    assert "relative to your home directory (such as projects/digits), or a full path" in problem.message


def test_a_team_the_user_is_not_in_is_a_problem_of_the_profiles_account(people, cluster, no_slurm):
    with pytest.raises(Refused) as refused:
        profile_run(user=people["alice"], text=EXAMPLE_TEXT.replace("name: train-digits\n", "name: train-digits\naccount: nlp\n"))
    assert refused.value.problems == [Problem("account", "You are not in the team 'nlp'. Your teams: vision.", 3)]
