"""Refusals of "Clone with these changes": the copy's file is never shown, so no problem points at a
line of it. A name already used asks for another name; a refused override has no line, as on Run;
a New name that is too long is said at the field."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from portal.refusals import Problem, Refused
from profiles.models import Profile
from profiles.schema import parse_profile
from profiles.services import profile_clone
from tests.profiles.conftest import EXAMPLE_TEXT, cluster, no_slurm, people  # noqa: F401  (fixtures)
from tests.profiles.test_pages import errors_of, make, team

pytestmark = pytest.mark.django_db


def test_a_second_copy_of_the_same_name_asks_for_another_name_without_a_line(client, people, cluster, no_slurm):
    profile = make(people["alice"], "one")
    client.force_login(people["alice"])
    assert client.post(f"/profiles/{profile.pk}/clone/", {}).status_code == HTTPStatus.FOUND
    r = client.post(f"/profiles/{profile.pk}/clone/", {})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert errors_of(r) == ["name: You already have a profile named 'one (copy)': give the copy another name."]
    assert Profile.objects.filter(owner=people["alice"]).count() == 2


def test_a_refused_override_in_a_clone_has_no_line_as_on_run(client, people, cluster, no_slurm):
    profile = make(people["alice"], "one")
    client.force_login(people["alice"])
    run = errors_of(client.post(f"/profiles/{profile.pk}/run/", {"time_limit": "forever"}))
    clone = errors_of(client.post(f"/profiles/{profile.pk}/clone/", {"time_limit": "forever", "name": "two"}))
    assert clone == run and clone and clone[0].startswith("resources.time_limit:"), clone
    assert Profile.objects.count() == 1


def test_a_problem_of_a_field_not_overridden_names_its_line_in_the_profiles_own_file(people, cluster, no_slurm):
    """As on Run: the line is one of the file on the profile's page (comments and all), not of the copy."""
    text = "# a comment\n# another\n" + EXAMPLE_TEXT.replace("gpus_per_node: 0", "gpus_per_node: 4")
    profile = make(people["alice"], "one", text=text)
    with pytest.raises(Refused) as refused:
        profile_clone(profile=profile, by=people["alice"], name="two", overrides={"cpus": 1})
    [problem] = refused.value.problems
    assert (problem.field, problem.line) == ("resources.gpus_per_node", 7) and "Allowed: 0, 1, 2" in problem.message


def test_the_copy_is_the_profile_with_its_overrides_and_its_spec_is_its_files(people, cluster, no_slurm):
    profile = make(people["alice"], "one", team=team("vision"))
    copy = profile_clone(profile=profile, by=people["carol"], name="two", overrides={"time_limit": "00:20:00", "cpus": 1})
    assert (copy.owner, copy.name, copy.team, copy.cloned_from) == (people["carol"], "two", None, profile)
    copy.refresh_from_db()
    assert copy.cloned_from == profile and copy.spec == parse_profile(copy.yaml).data
    assert copy.spec["resources"]["time_limit"] == "00:20:00" and copy.spec["resources"]["cpus"] == 1
    with pytest.raises(Refused) as refused:  # the same name again, by service
        profile_clone(profile=profile, by=people["carol"], name="two")
    assert refused.value.problems == [
        Problem("name", "You already have a profile named 'two': give the copy another name.", None)
    ]


def test_a_new_name_too_long_is_said_at_the_field(client, people, cluster, no_slurm):
    profile = make(people["alice"], "one")
    client.force_login(people["alice"])
    r = client.post(f"/profiles/{profile.pk}/clone/", {"name": "x" * 201})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    sentence = "The name is 201 characters long: keep it to 200."
    assert f'data-testid="error-name">{sentence}</p>' in r.content.decode()
    assert Profile.objects.count() == 1
