"""What the profile endpoints say when they refuse: a copy's name already used (no line: the copy's
file is never shown), a refused override in a copy (no line, as when running), a profile over 64 KiB
(one sentence on every endpoint), and a JSON body holding a number too long to read."""

from __future__ import annotations

import json
from http import HTTPStatus

import pytest

from profiles.models import Profile
from tests.api.test_api import bearer, call
from tests.profiles.conftest import EXAMPLE_TEXT

pytestmark = pytest.mark.django_db

TOO_LARGE = "The profile is larger than 64 KiB."


def _saved(client, raw) -> int:
    r = call(client, "post", "/profiles", raw, {"yaml": EXAMPLE_TEXT.replace("train-digits", "one")})
    assert r.status_code == HTTPStatus.CREATED, r.content
    return r.json()["id"]


def test_a_copy_of_a_name_already_used_asks_for_another_name_without_a_line(client, people, tokens, cluster, no_slurm):
    pk = _saved(client, tokens["alice"])
    assert call(client, "post", f"/profiles/{pk}/clone", tokens["alice"], {}).status_code == HTTPStatus.CREATED
    r = call(client, "post", f"/profiles/{pk}/clone", tokens["alice"], {})
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert r.json()["errors"] == [
        {"field": "name", "message": "You already have a profile named 'one (copy)': give the copy another name.", "line": None}
    ]


def test_a_refused_override_in_a_copy_has_no_line_as_when_running(client, people, tokens, cluster, no_slurm):
    pk = _saved(client, tokens["alice"])
    body = {"overrides": {"time_limit": "forever"}}
    run = call(client, "post", f"/profiles/{pk}/submit", tokens["alice"], body).json()["errors"]
    copy = call(client, "post", f"/profiles/{pk}/clone", tokens["alice"], {"name": "two", **body}).json()["errors"]
    assert [(e["field"], e["line"]) for e in copy] == [("resources.time_limit", None)], copy
    assert copy == run and Profile.objects.count() == 1


@pytest.mark.parametrize(
    "text, validated",
    [
        ("#" * (64 * 1024 + 1), HTTPStatus.BAD_REQUEST),  # past the schema's maxLength: a 400, as before
        ("#" + "é" * (32 * 1024), HTTPStatus.OK),  # 32,769 characters of 65,537 bytes: a profile that is not valid
    ],
)
def test_a_profile_over_64_kib_is_refused_in_one_sentence_everywhere(client, people, tokens, cluster, no_slurm, text, validated):
    """POST /profiles/validate (gpuportal submit --check) said "Must be at most 65536 characters long"
    where the pages and POST /jobs say the sentence below."""
    raw = tokens["alice"]
    answers = {
        "/jobs": call(client, "post", "/jobs", raw, {"profile_yaml": text}),
        "/profiles": call(client, "post", "/profiles", raw, {"yaml": text}),
        "/profiles/validate": call(client, "post", "/profiles/validate", raw, {"yaml": text}),
    }
    assert [r.status_code for r in answers.values()] == [HTTPStatus.BAD_REQUEST, HTTPStatus.BAD_REQUEST, validated]
    assert answers["/profiles/validate"].json().get("valid") in (False, None)
    messages = {path: [e["message"] for e in r.json()["errors"]] for path, r in answers.items()}
    assert messages == dict.fromkeys(answers, [TOO_LARGE])
    assert Profile.objects.count() == 0


def test_a_json_number_too_long_to_read_is_said_so_not_called_a_text_encoding_problem(client, people, tokens):
    body = '{"yaml": "version: 1", "overrides": {"gpus": ' + "9" * 4301 + "}}"
    r = client.post("/api/v1/profiles/validate", data=body, content_type="application/json", **bearer(tokens["alice"]))
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert r.json() == {
        "detail": "The request body holds a number of more than 4,300 digits, too long to read: send a shorter one.",
        "errors": [{"field": "body", "message": "A number has more than 4,300 digits, too long to read.", "line": None}],
    }
    r = client.post(
        "/api/v1/profiles/validate", data=b'{"yaml": "\xff"}', content_type="application/json", **bearer(tokens["alice"])
    )
    assert "it is not UTF-8 text" in r.json()["detail"]
    assert json.loads('{"n": ' + "9" * 4300 + "}")  # the limit itself is read
