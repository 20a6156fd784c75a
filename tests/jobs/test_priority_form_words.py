"""The priority class on the New job form and its refusals (jobs/web/forms.py, jobs/submit/classes.py): an
unknown class refused in the API's and profiles' words, a class sent after the site stopped offering them
refused once rather than dropped, and the high cap of one GPU said in the singular."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from jobs.models import Job
from jobs.submit.classes import CLASSES_GONE, class_problems
from jobs.web.forms import JobForm
from teams.priority_classes import priority_classes
from tests.jobs.test_job_pages import FORM, alice, cluster, no_slurm  # noqa: F401  (fixtures)
from tests.jobs.test_priority_class_choice import policy  # noqa: F401  (fixture)

UNKNOWN = "'urgent' is not a priority class here. Choose one of: high, normal, scavenger."


@pytest.fixture
def classes_on(settings):
    settings.PORTAL_PRIORITY_CLASSES = True
    settings.PORTAL_HIGH_MAX_GPUS_PER_TEAM = 2
    return settings


def test_a_cap_of_one_gpu_is_said_in_the_singular(classes_on):
    classes_on.PORTAL_HIGH_MAX_GPUS_PER_TEAM = 1
    [problem] = class_problems("high", requeue=True, gpu_count=2)
    assert problem.message == (
        "A high job may use at most 1 GPU (each team's cap in the high class); this one asks for 2. "
        "Ask for at most 1 GPU, or choose the normal class."
    )
    assert priority_classes()["high"].summary.endswith("; at most 1 GPU per team at once.")
    classes_on.PORTAL_HIGH_MAX_GPUS_PER_TEAM = 3
    assert "at most 3 GPUs (each team's cap" in class_problems("high", requeue=True, gpu_count=4)[0].message
    assert priority_classes()["high"].summary.endswith("; at most 3 GPUs per team at once.")


@pytest.mark.django_db
def test_the_form_refuses_an_unknown_class_in_the_apis_words(policy, classes_on):  # noqa: F811
    form = JobForm({**FORM, "priority": "urgent"}, policy=policy, accounts=["vision"])
    assert not form.is_valid()
    assert form.errors["priority"] == [UNKNOWN]
    assert class_problems("urgent", requeue=True, gpu_count=1)[0].message == UNKNOWN  # the API's and profiles'
    long = JobForm({**FORM, "priority": "x" * 300}, policy=policy, accounts=["vision"])
    assert not long.is_valid() and long.errors["priority"] == [UNKNOWN.replace("urgent", "x" * 20)]


@pytest.mark.django_db
@pytest.mark.parametrize("sent, refused", [("scavenger", True), ("high", True), ("normal", False), ("", False)])
def test_a_class_sent_after_classes_were_turned_off_is_refused_not_dropped(policy, classes_on, sent, refused):  # noqa: F811
    classes_on.PORTAL_PRIORITY_CLASSES = False
    form = JobForm({**FORM, "priority": sent}, policy=policy, accounts=["vision"])
    assert form.is_valid() is not refused
    assert form.non_field_errors() == ([CLASSES_GONE] if refused else [])
    assert "priority" not in form.fields


def test_the_page_says_so_keeps_what_was_typed_and_the_second_submit_goes_through(
    client,
    alice,  # noqa: F811
    cluster,  # noqa: F811
    no_slurm,  # noqa: F811
    classes_on,
    django_capture_on_commit_callbacks,
):
    """A form shown with the classes, scavenger chosen, the site turns them off, then Submit: no job,
    the sentence, the form filled without the select; Submit again: a job in the default class."""
    client.force_login(alice)
    page = BeautifulSoup(client.get("/jobs/new/").content.decode(), "html.parser")
    assert page.select_one("select[name=priority]") is not None
    key = page.select_one("input[name=submission]")["value"]
    classes_on.PORTAL_PRIORITY_CLASSES = False
    first = client.post("/jobs/new/", {**FORM, "submission": key, "priority": "scavenger", "requeue": "on"})
    assert first.status_code == HTTPStatus.BAD_REQUEST and not Job.objects.exists()
    again = BeautifulSoup(first.content.decode(), "html.parser")
    assert CLASSES_GONE in again.select_one("[data-testid=form-errors]").get_text()
    assert again.select_one("[name=priority]") is None
    assert again.select_one("input[name=name]")["value"] == "digits"
    assert again.select_one("input[name=submission]")["value"] == key
    with django_capture_on_commit_callbacks():
        second = client.post("/jobs/new/", {**FORM, "submission": key, "requeue": "on"})  # the form as sent back
    job = Job.objects.get()
    assert second.status_code == HTTPStatus.FOUND and job.priority_class == "" and str(job.key) == key
