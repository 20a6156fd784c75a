"""A profile's run.workdir holding '$' is refused in the site policy's words, on its line (or with no
line when it is an override), as the New job form refuses it: it is not expanded."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from jobs.models import Job
from portal.refusals import Problem, Refused
from profiles.services import profile_run
from tests.profiles.conftest import EXAMPLE_TEXT, cluster, no_slurm, people  # noqa: F401  (fixtures)
from tests.profiles.test_pages import errors_of

pytestmark = pytest.mark.django_db

SENTENCE = "'${HOME}' is not expanded here: write proj (a path relative to your home directory) or the full path."


def test_a_profiles_workdir_with_a_variable_is_refused_on_its_line(people, cluster, no_slurm):
    text = EXAMPLE_TEXT.replace("workdir: gpuportal-examples/digits", "workdir: ${HOME}/proj")
    with pytest.raises(Refused) as refused:
        profile_run(user=people["alice"], text=text)
    assert refused.value.problems == [Problem("run.workdir", SENTENCE, 10)]
    with pytest.raises(Refused) as refused:
        profile_run(user=people["alice"], text=EXAMPLE_TEXT, overrides={"workdir": "${HOME}/proj"})
    assert refused.value.problems == [Problem("run.workdir", SENTENCE, None)]
    assert not Job.objects.exists()


def test_the_profile_page_lists_it(client, people, cluster, no_slurm):
    client.force_login(people["alice"])
    text = EXAMPLE_TEXT.replace("workdir: gpuportal-examples/digits", "workdir: $HOME/proj")
    r = client.post("/profiles/new/", {"yaml": text, "action": "check"})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert errors_of(r) == [f"line 10 · run.workdir: {SENTENCE.replace('${HOME}', '$HOME')}"]
