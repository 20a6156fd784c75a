"""``manage.py profiles_check``: the saved profiles Run would refuse today, listed with their owner
and each problem's line; the others are not named."""

from __future__ import annotations

from io import StringIO

import pytest
from django.core.management import call_command

from profiles.models import Profile
from tests.profiles.conftest import EXAMPLE_TEXT, people  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


def test_a_profile_read_more_strictly_now_is_listed_with_why(people):  # noqa: F811
    alice = people["alice"]
    Profile.objects.create(owner=alice, name="fine", yaml=EXAMPLE_TEXT, spec={})
    twice = EXAMPLE_TEXT + "resources:\n  partition: small\n"  # saved before a repeated key was refused
    bad = Profile.objects.create(owner=alice, name="pasted twice", yaml=twice, spec={})
    out = StringIO()
    call_command("profiles_check", stdout=out)
    said = out.getvalue()
    assert f"alice: profile {bad.pk} (pasted twice):" in said and "(fine)" not in said
    assert "This key is given twice; it is first set on line" in said
    assert said.rstrip().endswith("1 of 2 saved profiles would be refused; their owners can fix them on the Profiles page.")
    with pytest.raises(SystemExit):
        call_command("profiles_check", "--fail", stdout=StringIO())
