"""A working directory holding '$' is refused, as one starting with '~' is: neither is expanded, so
``$HOME/proj`` ran in /home/alice/$HOME/proj (the sbatch helper made it with ``mkdir -p``). The
sentence says what to write instead."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from jobs.models import Job
from tests.jobs.test_job_pages import FORM, alice, cluster, no_slurm  # noqa: F401  (fixtures)
from tests.jobs.test_policy import messages, policy, req  # noqa: F401  (fixtures)

HOME_PROJ = "'$HOME' is not expanded here: write proj (a path relative to your home directory) or the full path."


@pytest.mark.parametrize(
    "workdir, sentence",
    [
        ("$HOME/proj", HOME_PROJ),
        ("${HOME}/proj", "'${HOME}' is not expanded here: write proj (a path relative to your home directory) or the full path."),
        (
            "$HOME//runs/a b",
            "'$HOME' is not expanded here: write runs/a b (a path relative to your home directory) or the full path.",
        ),
        (
            "$HOME",
            "'$HOME' is not expanded here: write the full path of your home directory, or leave it empty for the portal's"
            " per-job directory.",
        ),
        *(
            (
                workdir,
                "Variables and '$' are not expanded here: write the path itself, relative to your home directory"
                " (such as projects/digits) or a full path.",
            )
            for workdir in (
                "$SCRATCH/proj",
                "$HOME/$RUN",
                "$HOMEDIR/x",
                "/scratch/$USER/proj",
                "runs/$(id)",
                "runs/${RUN}",
                "cost$",
            )
        ),
    ],
)
def test_a_variable_in_the_working_directory_is_refused_with_what_to_write(policy, workdir, sentence):
    assert messages(policy.check(req(workdir=workdir)))["workdir"] == sentence


@pytest.mark.parametrize("workdir", ["proj", "/home/alice/proj", "runs/odd (dir) `id`", "HOME/proj"])
def test_a_path_without_a_variable_passes(policy, workdir):
    assert "workdir" not in messages(policy.check(req(workdir=workdir)))


def test_the_new_job_form_refuses_it_at_the_field(client, alice, cluster, no_slurm):
    client.force_login(alice)
    r = client.post("/jobs/new/", {**FORM, "workdir": "$HOME/proj"})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert r.context["form"].errors["workdir"] == [HOME_PROJ] and 'data-testid="error-workdir"' in r.content.decode()
    assert not Job.objects.exists() and no_slurm.calls == []
