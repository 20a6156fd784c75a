"""Reading a profile's YAML: a key given twice, a key that is not text, yes/no or an empty value as a
time limit, an empty text field, infinity as a count, a control character, a date that does not
exist, anchors and tags, blanks around run.workdir; every refusal with its field and line, the same on
the web page and from ``POST /profiles/validate`` (which ``gpuportal submit --check`` shows)."""

from __future__ import annotations

import math
import re
from http import HTTPStatus
from pathlib import Path

import pytest

from jobs.submit.policy import TIME_LIMIT_FORMS
from portal.refusals import Refused
from profiles.document import OVERRIDE_ALIASES
from profiles.schema import Environment, Profile, Resources, Run, parse_profile
from tests.api.conftest import tokens  # noqa: F401  (fixture)
from tests.api.test_api import call
from tests.profiles.conftest import EXAMPLE_TEXT, cluster, no_slurm, people  # noqa: F401  (fixtures)
from tests.profiles.test_pages import errors_of as page_errors

# EXAMPLE_TEXT's lines: 3 resources, 4 partition, 5 gpus_per_node, 6 cpus, 7 memory, 8 time_limit,
# 9 run, 10 workdir, 11 script, 12 args, 13 environment; 15 lines in all.


def problems(text: str, **kw) -> list[tuple[str, int | None, str]]:
    with pytest.raises(Refused) as caught:
        parse_profile(text, **kw)
    return [(p.field, p.line, p.message) for p in caught.value.problems]


# --- a key given twice, a key that is not text --------------------------------------------------
def test_a_second_resources_block_is_refused_not_a_silent_reset_to_the_defaults():
    """Pasted at the end, it replaced the first block: cpus 2, memory 2G and 10 minutes became the defaults."""
    text = EXAMPLE_TEXT + "resources:\n  partition: small\n  cpus: 4\n"
    assert problems(text) == [("resources", 16, "This key is given twice; it is first set on line 3. Keep one.")]


@pytest.mark.parametrize(
    "old, new, field, line, first",
    [
        ("  cpus: 2\n", "  cpus: 2\n  cpus: 3\n", "resources.cpus", 7, 6),
        ("version: 1\n", "version: 1\nversion: 1\n", "version", 2, 1),
        ('  python: "3.11"\n', '  python: "3.11"\n  "python": "3.12"\n', "environment.python", 15, 14),  # quoted or not
        ("  script: train_digits.py\n", "  script: train_digits.py\n  args: [{a: 1, a: 2}]\n", "run.args.0.a", 12, 12),
    ],
)
def test_a_key_given_twice_is_refused_at_any_depth_naming_both_lines(old, new, field, line, first):
    text = EXAMPLE_TEXT.replace(old, new)
    assert (field, line, f"This key is given twice; it is first set on line {first}. Keep one.") in problems(text)


def test_keys_that_differ_are_not_the_same_key():
    text = EXAMPLE_TEXT.replace("  cpus: 2\n", "  cpus: 2\n  CPUs: 3\n")
    assert problems(text) == [("resources.CPUs", 7, "Unknown field. Check the spelling against docs/profiles.md.")]


@pytest.mark.parametrize(
    "key, read_as",
    [("1", "a number"), ("1.5", "a number"), ("yes", "true/false"), ("~", "empty"), ("2024-01-01", "a date")],
)
def test_a_key_that_is_not_text_is_refused_on_its_own_line(key, read_as):
    text = EXAMPLE_TEXT.replace("name: train-digits\n", f"name: train-digits\n{key}: x\n")
    assert problems(text) == [
        (key, 3, f"'{key}' is not a field name (YAML reads it as {read_as}): fields are named in words such as cpus.")
    ]


def test_a_list_as_a_key_is_refused_on_its_line():
    assert problems(EXAMPLE_TEXT + "? [a, b]\n: x\n") == [
        ("", 16, "A list cannot be a key: fields are named in words such as cpus.")
    ]


# --- time limits --------------------------------------------------------------------------------
YES_NO = f"A time limit is not yes/no. Write it as {TIME_LIMIT_FORMS}."


@pytest.mark.parametrize("written", ["yes", "true", "on", "no", "false", "off", "True"])
def test_yes_or_no_as_a_time_limit_is_refused_not_1_minute_or_no_limit(written):
    text = EXAMPLE_TEXT.replace('time_limit: "00:10:00"', f"time_limit: {written}")
    assert problems(text) == [("resources.time_limit", 8, YES_NO)]


@pytest.mark.parametrize("value", [True, False])
def test_yes_or_no_as_a_time_limit_override_is_refused(value):
    assert problems(EXAMPLE_TEXT, overrides={"time_limit": value}) == [("resources.time_limit", None, YES_NO)]


@pytest.mark.parametrize(
    "written, sentence",
    [
        ("", f"The time limit is empty: write it as {TIME_LIMIT_FORMS}, or leave it out for 1 hour."),
        ("~", f"The time limit is empty: write it as {TIME_LIMIT_FORMS}, or leave it out for 1 hour."),
        ("1.5", f"'1.5' is not a time limit. Write it as {TIME_LIMIT_FORMS}."),
        ("[90]", f"'[90]' is not a time limit. Write it as {TIME_LIMIT_FORMS}."),
    ],
)
def test_a_time_limit_that_is_neither_text_nor_whole_minutes_gets_one_sentence(written, sentence):
    """An empty value or 1.5 said both "Must be text (put it in quotes)." and "Must be a whole number."."""
    text = EXAMPLE_TEXT.replace('time_limit: "00:10:00"', f"time_limit: {written}")
    assert problems(text) == [("resources.time_limit", 8, sentence)]


def test_whole_minutes_and_text_are_still_time_limits():
    assert parse_profile(EXAMPLE_TEXT.replace('time_limit: "00:10:00"', "time_limit: 90")).time_limit_min == 90
    assert parse_profile(EXAMPLE_TEXT, overrides={"time_limit": 45}).time_limit_min == 45
    # a whole number written with a decimal point, as saved profiles may hold it (read as 90 before)
    assert parse_profile(EXAMPLE_TEXT.replace('time_limit: "00:10:00"', "time_limit: 90.0")).time_limit_min == 90


# --- empty values -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "old, new, field, line, sentence",
    [
        (
            "partition: small",
            "partition:",
            "resources.partition",
            4,
            "This is empty: write a partition (such as small) after the colon; it is required.",
        ),
        (
            "workdir: gpuportal-examples/digits",
            "workdir:",
            "run.workdir",
            10,
            "This is empty: write the project directory (relative to your home) after the colon, or remove the line to"
            " start in a new directory for each job.",
        ),
        (
            "name: train-digits\n",
            "name: train-digits\naccount:\n",
            "account",
            3,
            "This is empty: write a team (Slurm account) you are in after the colon, or remove the line to bill your first team.",
        ),
        (
            "  cpus: 2\n",
            "  cpus: 2\n  gpu_type:\n",
            "resources.gpu_type",
            7,
            "This is empty: write a GPU type (such as a100) after the colon, or remove the line to take any type.",
        ),
        ("name: train-digits", "name:", "name", 2, "This is empty: write the job's name after the colon; it is required."),
        (
            "cpus: 2",
            "cpus:",
            "resources.cpus",
            6,
            "This is empty: write a whole number after the colon, or remove the line to use the default.",
        ),
    ],
)
def test_an_empty_value_is_said_to_be_empty_with_what_to_write(old, new, field, line, sentence):
    """They said "Must be text (put it in quotes).", as if the value were a number."""
    assert problems(EXAMPLE_TEXT.replace(old, new)) == [(field, line, sentence)]


def test_an_empty_override_says_so_without_a_line():
    assert problems(EXAMPLE_TEXT, overrides={"partition": None}) == [
        ("resources.partition", None, "This override is empty: give a partition (such as small).")
    ]


# --- the library's own words --------------------------------------------------------------------
INFINITE = "Must be a whole number, not infinity or NaN (.inf, .nan)."


@pytest.mark.parametrize("written", [".inf", "-.inf", ".nan", ".NaN"])
def test_infinity_or_nan_as_a_count_is_refused_in_plain_words(written):
    assert problems(EXAMPLE_TEXT.replace("cpus: 2", f"cpus: {written}")) == [("resources.cpus", 6, INFINITE)]


@pytest.mark.parametrize("value", [math.nan, math.inf])
def test_infinity_or_nan_as_an_override_is_refused_in_plain_words(value):
    assert problems(EXAMPLE_TEXT, overrides={"cpus": value}) == [("resources.cpus", None, INFINITE)]


@pytest.mark.parametrize(
    "character, name, column",
    [("\x0c", "U+000C (form feed)", 10), ("\x1b", "U+001B (escape, ESC)", 10), ("\x01", "U+0001", 10)],
)
def test_a_control_character_is_named_with_its_line_and_column(character, name, column):
    text = EXAMPLE_TEXT.replace("  cpus: 2\n", f"  cpus: 2{character}[0m\n")
    assert problems(text) == [("", 6, f"The profile contains a control character {name} on line 6, column {column}: delete it.")]


def test_a_date_that_does_not_exist_is_named_by_its_field_and_line():
    text = EXAMPLE_TEXT.replace("partition: small", "partition: 2024-13-01")
    assert problems(text) == [
        (
            "resources.partition",
            4,
            "'2024-13-01' could not be read as a date (month must be in 1..12); put it in quotes to keep it as text.",
        )
    ]


# --- anchors and tags ---------------------------------------------------------------------------
ANCHORS = "Anchors and aliases (&name, *name) are not supported in profiles; write the values out."


def test_an_anchor_without_an_alias_is_refused():
    assert problems(EXAMPLE_TEXT.replace("cpus: 2", "cpus: &c 2")) == [("", 6, ANCHORS)]
    assert problems(EXAMPLE_TEXT.replace("resources:", "resources: &r")) == [("", 3, ANCHORS)]


@pytest.mark.parametrize(
    "old, new, line, sentence",
    [
        (
            "name: train-digits",
            "name: !!binary aGVsbG8=",
            2,
            "The tag !!binary is not supported in profiles: write the value plainly (text, a number, true/false).",
        ),
        (
            "name: train-digits",
            "name: !!timestamp 2024-01-01",
            2,
            "The tag !!timestamp is not supported in profiles: write the value plainly (text, a number, true/false).",
        ),
        (
            "resources:",
            "resources: !!map",
            3,
            "The tag !!map is not supported in profiles: write the value plainly (text, a number, true/false).",
        ),
        (
            "name: train-digits",
            "name: !local x",
            2,
            "The tag !local is not supported in profiles: write the value plainly (text, a number, true/false).",
        ),
        ("cpus: 2", "cpus: !!int 0x10", 6, "'0x10' is not what its tag !!int says: write the value without the tag."),
        ("cpus: 2", "cpus: !!int 1:30", 6, "'1:30' is not what its tag !!int says: write the value without the tag."),
        # PyYAML's own reader raised KeyError here (a 500)
        (
            "  script:",
            "  requeue: !!bool maybe\n  script:",
            11,
            "'maybe' is not what its tag !!bool says: write the value without the tag.",
        ),
    ],
)
def test_tags_other_than_the_plain_ones_are_refused_on_their_line(old, new, line, sentence):
    assert problems(EXAMPLE_TEXT.replace(old, new)) == [("", line, sentence)]


def test_the_plain_tags_still_read_as_they_say():
    text = (
        EXAMPLE_TEXT.replace("name: train-digits", "name: !!str 2024")
        .replace("cpus: 2", "cpus: !!int 4")
        .replace("memory: 2G", "memory: !!float 1")
        .replace("  script:", "  requeue: !!bool false\n  script:")
    )
    spec = parse_profile(text)
    assert (spec.name, spec.cpus, spec.memory_mb, spec.requeue) == ("2024", 4, 1024, False)
    without = EXAMPLE_TEXT[: EXAMPLE_TEXT.index("environment:")] + "environment: !!null ~\n"
    assert parse_profile(without).environment is None


# --- run.workdir --------------------------------------------------------------------------------
def test_blanks_around_the_workdir_are_dropped_as_the_new_job_form_drops_them():
    spec = parse_profile(EXAMPLE_TEXT.replace("workdir: gpuportal-examples/digits", "workdir: ' proj '"))
    assert spec.workdir == "proj" and spec.data["run"]["workdir"] == "proj"
    assert parse_profile(EXAMPLE_TEXT, overrides={"workdir": "\tproj/run1  "}).workdir == "proj/run1"


# --- the docs -----------------------------------------------------------------------------------
def test_the_docs_list_every_field_and_every_override():
    docs = (Path(__file__).resolve().parents[2] / "docs" / "profiles.md").read_text(encoding="utf-8")
    nested = {"resources": Resources, "run": Run, "environment": Environment}
    fields = [f"{top}.{name}" for top, model in nested.items() for name in model.model_fields]
    fields += [name for name in Profile.model_fields if name not in nested]
    assert [f for f in fields if f"| `{f}` |" not in docs] == []
    overridable = docs[docs.index("Overridable fields") :].split("\n\n", 1)[0]
    assert [key for key in OVERRIDE_ALIASES if f"`{key}`" not in overridable] == []
    assert re.search(r"anchors\b", docs) and "!!binary" in docs


# --- the same on the page and from the API ------------------------------------------------------
@pytest.mark.parametrize(
    "old, new",
    [
        ("  cpus: 2\n", "  cpus: 2\n  cpus: 3\n"),
        ('time_limit: "00:10:00"', "time_limit: yes"),
        ("partition: small", "partition:"),
        ("cpus: 2", "cpus: 2\x0c"),
        ("name: train-digits", "name: !!binary aGVsbG8="),
        ("name: train-digits\n", "name: train-digits\n1: x\n"),
    ],
)
def test_the_page_and_the_api_say_the_same(client, people, tokens, cluster, no_slurm, old, new):  # noqa: F811
    text = EXAMPLE_TEXT.replace(old, new)
    expected = problems(text)
    answer = call(client, "post", "/profiles/validate", tokens["alice"], {"yaml": text})
    assert answer.status_code == HTTPStatus.OK and answer.json()["valid"] is False
    assert [(e["field"], e["line"], e["message"]) for e in answer.json()["errors"]] == expected
    client.force_login(people["alice"])
    r = client.post("/profiles/new/", {"yaml": text, "action": "check"})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    shown = [f"line {line} · " + (f"{field}: " if field else "") + message for field, line, message in expected]
    assert page_errors(r) == shown
