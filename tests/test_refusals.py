"""The one refusal type (portal.refusals): problems, re-keying for a surface, and how a form shows it."""

from __future__ import annotations

import pytest
from django import forms

from portal.refusals import Problem, Refused, limit_sentence, refusal_to_form


class _Form(forms.Form):
    memory_gb = forms.IntegerField(required=False)
    hours = forms.IntegerField(required=False)


def test_a_problem_is_one_entry_of_the_apis_errors():
    assert Problem("resources.cpus", "Must be a whole number.", 6).as_dict() == {
        "field": "resources.cpus",
        "message": "Must be a whole number.",
        "line": 6,
    }
    assert Problem("", "Give a name.").as_dict() == {"field": "", "message": "Give a name.", "line": None}


def test_a_refusal_says_every_reason_and_needs_one():
    refused = Refused(Problem("cpus", "Too many CPUs."), Problem("name", "Give a name."), detail="The job cannot be submitted.")
    assert str(refused) == "Too many CPUs.; Give a name." and refused.detail == "The job cannot be submitted."
    assert Refused(Problem("cpus", "Too many CPUs.")).detail == ""
    with pytest.raises(ValueError):
        Refused()


def test_renamed_re_keys_fields_and_keeps_messages_lines_and_detail():
    refused = Refused(
        Problem("memory_mb", "Too much memory.", 7),
        Problem("options", "Unknown option."),
        Problem("ide", "No such IDE."),
        detail="No.",
    )
    renamed = refused.renamed({"memory_mb": "memory_gb", "options": ""})
    assert renamed.problems == [
        Problem("memory_gb", "Too much memory.", 7),
        Problem("", "Unknown option."),
        Problem("ide", "No such IDE."),
    ]
    assert renamed.detail == "No." and refused.problems[0].field == "memory_mb"  # the original is unchanged


def test_a_form_shows_each_problem_on_its_field_or_as_a_non_field_error():
    form = _Form({"memory_gb": "9", "hours": "2"})
    assert form.is_valid()
    refusal_to_form(
        form,
        Refused(
            Problem("memory_gb", "Too much memory."), Problem("", "JupyterHub said no."), Problem("script", "Not on this form.")
        ),
    )
    assert form.errors["memory_gb"] == ["Too much memory."] and "hours" not in form.errors
    assert form.non_field_errors() == ["JupyterHub said no.", "Not on this form."]


@pytest.mark.parametrize(
    "kind, ctx, sentence",
    [
        ("greater_than_equal", {"ge": 1}, "Must be at least 1."),
        ("less_than_equal", {"le": 64}, "Must be at most 64."),
        ("greater_than", {"gt": 0}, "Must be more than 0."),
        ("less_than", {"lt": 10}, "Must be less than 10."),
        ("string_too_short", {"min_length": 1}, "Must not be empty."),
        ("string_too_short", {"min_length": 3}, "Must be at least 3 characters long."),
        ("string_too_long", {"max_length": 64}, "Must be at most 64 characters long; shorten it."),
        ("too_long", {"max_length": 100, "actual_length": 101}, "At most 100 items are allowed here (this list has 101)."),
        ("int_parsing", {}, ""),  # not a limit: the caller words it
    ],
)
def test_a_limit_is_said_in_the_portals_words(kind, ctx, sentence):
    assert limit_sentence(kind, ctx) == sentence
