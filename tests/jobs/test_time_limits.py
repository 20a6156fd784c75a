"""Time limits read strictly: Slurm's forms with the digits 0-9 and fields in range, every other
text refused with the forms listed; the same reader on the form, profiles, the API and the CLI, and
the partition's MaxTime checked before anything is sent."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from jobs.models import Job
from jobs.submit.policy import TIME_LIMIT_FORMS, time_limit_minutes
from slurm.times import SlurmTimeError, parse_time_limit
from tests.api.conftest import tokens  # noqa: F401  (fixture)
from tests.api.test_api import call
from tests.jobs.test_job_pages import FORM, cluster, no_slurm  # noqa: F401  (fixtures)
from tests.profiles.conftest import EXAMPLE_TEXT, people  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "text, minutes",
    [
        ("90", 90),  # minutes
        ("1", 1),
        ("2:00", 2),  # MM:SS, as Slurm reads it: 2 minutes, not 2 hours
        ("90:30", 91),  # minutes of MM:SS are not bounded; seconds round up
        ("0:30", 1),
        ("02:00:00", 120),  # HH:MM:SS
        ("48:00:00", 2880),  # hours of HH:MM:SS are not bounded (Slurm reads 48 hours)
        ("00:00:30", 1),  # seconds round up to the minute, as Slurm's time_str2mins does
        ("01:30:01", 91),
        ("1-12", 2160),  # D-HH
        ("1-12:30", 2190),  # D-HH:MM
        ("1-00:00:00", 1440),  # D-HH:MM:SS
        ("0-23:59:59", 1440),
        (" 2-00:00:00 ", 2880),
    ],
)
def test_slurm_forms_are_read(text, minutes):
    assert time_limit_minutes(text) == minutes


@pytest.mark.parametrize(
    "text, words",
    [
        ("99:99:99", "minutes and seconds after a colon go up to 59"),  # was 6,040 minutes
        ("10:60:00", "minutes and seconds after a colon go up to 59"),
        ("10:00:60", "minutes and seconds after a colon go up to 59"),
        ("1-00:60", "minutes and seconds after a colon go up to 59"),
        ("1--1", "not one of Slurm's forms"),  # was 1,380
        ("2--30", "not one of Slurm's forms"),  # was 1,080
        ("1-24", "the hours after the day part go up to 23"),
        ("1-30:00:00", "the hours after the day part go up to 23"),
        ("1_0", "not one of Slurm's forms"),  # was 10 (int() reads underscores)
        ("\u0661\u0662\u0660", "not one of Slurm's forms"),  # Arabic-Indic 120: was 120 minutes
        ("\uff19\uff10", "not one of Slurm's forms"),  # fullwidth 90
        ("1:2:3:4", "not one of Slurm's forms"),
        ("1-2:3:4:5", "not one of Slurm's forms"),
        ("-5", "not one of Slurm's forms"),
        ("1.5", "not one of Slurm's forms"),
        ("2h", "not one of Slurm's forms"),
        ("soon", "not one of Slurm's forms"),
        ("1-", "not one of Slurm's forms"),
        (":30", "not one of Slurm's forms"),
        ("2:60", "minutes and seconds after a colon go up to 59"),
        ("2:", "not one of Slurm's forms"),
        ("99999999999", "longer than Slurm can hold"),
    ],
)
def test_other_texts_are_refused_with_the_forms(text, words):
    with pytest.raises(ValueError) as caught:
        time_limit_minutes(text)
    message = str(caught.value)
    assert f"{text[:20]!r} is not a time limit: " in message and words in message, message
    assert message.endswith(f"Write it as {TIME_LIMIT_FORMS}.")
    assert (
        "whole minutes (90), MM:SS (90:30, minutes and seconds: 2:00 is 2 minutes), HH:MM:SS (02:00:00), "
        "D-HH (1-12), D-HH:MM (1-12:30) or D-HH:MM:SS (1-00:00:00)"
    ) in message


@pytest.mark.parametrize("text, words", [("0", "'0' (no limit at all to Slurm)"), ("UNLIMITED", "no limit"), ("", "An empty")])
def test_no_limit_is_refused(text, words):
    with pytest.raises(ValueError) as caught:
        time_limit_minutes(text)
    assert words in str(caught.value) and "Give at least 1 minute, as whole minutes (90)" in str(caught.value)


@pytest.mark.parametrize(
    "text, seconds",
    [("10:30", 630), ("1-2", 93600), ("48:00:00", 172800), ("UNLIMITED", None), ("NONE", None), ("", None)],
)
def test_slurm_reader_reads_slurms_own_output(text, seconds):
    """Slurm's own output (MaxTime, DefaultTime, MaxWall) is read by the same strict reader as
    people's input, MM:SS included."""
    assert parse_time_limit(text) == seconds


@pytest.mark.parametrize("text", ["99:99:99", "1--1", "2--30", "1_0", "\u0661\u0662\u0660", "1-24"])
def test_slurm_reader_refuses_what_slurm_would_misread(text):
    with pytest.raises(SlurmTimeError):
        parse_time_limit(text)


# --- every surface -------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["99:99:99", "1_0"])
def test_form_refuses_with_the_forms(client, people, cluster, no_slurm, text):  # noqa: F811
    client.force_login(people["alice"])
    page = client.post("/jobs/new/", {**FORM, "time_limit": text}).content.decode()
    assert "is not a time limit" in page and "D-HH:MM:SS (1-00:00:00)" in page
    assert Job.objects.count() == 0


def test_minutes_seconds_means_minutes_on_every_surface(
    client,
    people,
    tokens,
    cluster,
    no_slurm,
    django_capture_on_commit_callbacks,  # noqa: F811
):
    """``2:00`` is what Slurm makes of it, two minutes, on the form, in a profile and in the API's
    (and so the CLI's) override; the form's help says so before anyone submits."""
    client.force_login(people["alice"])
    assert "MM:SS (2:00 is 2 minutes), HH:MM:SS (02:00:00 is 2 hours)" in client.get("/jobs/new/").content.decode()
    with django_capture_on_commit_callbacks():
        client.post("/jobs/new/", {**FORM, "time_limit": "2:00"})
    profile = EXAMPLE_TEXT.replace('time_limit: "00:10:00"', 'time_limit: "2:00"')
    with django_capture_on_commit_callbacks():
        r = call(client, "post", "/jobs", tokens["alice"], {"profile_yaml": profile, "filename": "train.yaml"})
    assert r.status_code == HTTPStatus.CREATED, r.content
    with django_capture_on_commit_callbacks():
        r = call(client, "post", "/jobs", tokens["alice"], {"profile_yaml": EXAMPLE_TEXT, "overrides": {"time_limit": "50:30"}})
    assert r.status_code == HTTPStatus.CREATED, r.content
    assert sorted(Job.objects.values_list("time_limit_min", flat=True)) == [2, 2, 51]
    assert no_slurm.calls == []


@pytest.mark.parametrize(
    "time_limit, words",
    [
        ('"99:99:99"', "'99:99:99' is not a time limit: minutes and seconds after a colon go up to 59."),
        ('"1--1"', "'1--1' is not a time limit: it is not one of Slurm's forms"),
        ('"02:00:00"', "The time limit 2 h is longer than small's maximum of 1 h."),
        ("120", "The time limit 2 h is longer than small's maximum of 1 h."),
    ],
)
def test_api_and_cli_refuse_before_sending(client, people, tokens, cluster, no_slurm, time_limit, words):  # noqa: F811
    """The CLI posts the profile file to this endpoint and prints its errors, so this is its answer too."""
    text = EXAMPLE_TEXT.replace('time_limit: "00:10:00"', f"time_limit: {time_limit}")
    r = call(client, "post", "/jobs", tokens["alice"], {"profile_yaml": text, "filename": "train.yaml"})
    assert r.status_code == HTTPStatus.BAD_REQUEST, r.content
    errors = {e["field"]: e for e in r.json()["errors"]}
    assert words in errors["resources.time_limit"]["message"] and errors["resources.time_limit"]["line"] == 8
    r = call(client, "post", "/jobs", tokens["alice"], {"profile_yaml": EXAMPLE_TEXT, "overrides": {"time_limit": "1-24"}})
    assert "the hours after the day part go up to 23" in r.json()["errors"][0]["message"]
    assert Job.objects.count() == 0 and no_slurm.calls == []
