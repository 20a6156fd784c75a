"""What the API says when it refuses or does nothing, in its own words: a token that is refused (why, when
the caller holds it; nothing more for a token matching no row), a deactivated or unlinked owner, one
array task named where the API acts on the whole array, and a cancel that sent nothing."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from http import HTTPStatus

import pytest
from django.utils import timezone

from accounts.models import LinkState, User
from api.models import PersonalAccessToken
from api.tokens import token_create
from jobs.models import Job, JobKind
from slurm.states import JobState
from tests.api.conftest import ALL
from tests.api.test_api import _job, call

pytestmark = pytest.mark.django_db

TOKENS_PAGE = "http://testserver/account/tokens/"


def test_a_deactivated_account_s_token_is_403_saying_to_ask_the_admins(client, people):
    row, raw = token_create(user=people["alice"], name="laptop", scopes=ALL, days=7)
    PersonalAccessToken.objects.filter(pk=row.pk).update(expires_at=timezone.now() - timedelta(days=1))  # and expired
    User.objects.filter(pk=people["alice"].pk).update(is_active=False)
    r = call(client, "get", "/me", raw)
    assert r.status_code == HTTPStatus.FORBIDDEN, r.content
    assert r.json() == {
        "detail": "The portal account this token belongs to is deactivated, so its tokens no longer work and no new one "
        "can be made. Ask the portal's admins to re-enable the account.",
        "errors": [],
    }


def test_a_revoked_or_an_expired_token_says_which_and_when_with_the_tokens_page(client, people):
    revoked, raw_revoked = token_create(user=people["alice"], name="laptop", scopes=ALL, days=7)
    expired, raw_expired = token_create(user=people["alice"], name="ci", scopes=ALL, days=7)
    PersonalAccessToken.objects.filter(pk=revoked.pk).update(revoked_at=datetime(2026, 12, 1, 14, 3, tzinfo=UTC))
    PersonalAccessToken.objects.filter(pk=expired.pk).update(expires_at=datetime(2026, 12, 3, 9, 30, 15, tzinfo=UTC))
    r = call(client, "get", "/me", raw_revoked)
    assert r.status_code == HTTPStatus.UNAUTHORIZED and not r.has_header("WWW-Authenticate")  # as before: none sent
    assert r.json()["detail"] == (
        f"This token (“laptop”, {revoked.prefix}…) was revoked on 2026-12-01 14:03 UTC: create a new one on the Tokens "
        f"page ({TOKENS_PAGE})."
    )
    r = call(client, "get", "/me", raw_expired)
    assert r.status_code == HTTPStatus.UNAUTHORIZED and r.json()["detail"] == (
        f"This token (“ci”, {expired.prefix}…) expired on 2026-12-03 09:30 UTC: create a new one on the Tokens page "
        f"({TOKENS_PAGE})."
    )


@pytest.mark.parametrize("raw", ["gpp_" + "x" * 40, "gpp_" + "-_aZ09" * 6 + "abcd"])
def test_a_token_matching_no_row_gets_the_one_generic_answer_in_plain_words(client, people, raw):
    """Nothing tells a token that was never made from one that was: the sentence is the same for any
    token without a row, and it speaks of the token, not of HTTP headers."""
    r = call(client, "get", "/me", raw)
    assert r.status_code == HTTPStatus.UNAUTHORIZED and not r.has_header("WWW-Authenticate")
    assert r.json() == {
        "detail": "The token is wrong: no personal access token of this portal has this value. Check that it was copied "
        f"whole (it starts with gpp_), or create a new one on the Tokens page ({TOKENS_PAGE}).",
        "errors": [],
    }


MALFORMED = (
    "This is not a token of this portal: {problem} (a token is gpp_ and 40 letters, digits, - or _). Send the whole "
    f"token as it was shown when it was made, or create a new one on the Tokens page ({TOKENS_PAGE})"
)


@pytest.mark.parametrize(
    ("raw", "problem"),
    [
        ("gpp_3fK9aQ2x…", 'it holds "…" (U+2026), which no token has'),
        ("gpp_3fK9aQ2x\u00e2\u0080\u00a6", 'it holds "…" (U+2026), which no token has'),  # UTF-8 read as Latin-1
        ("gpp_" + "x" * 20 + " " + "x" * 19, "it holds a space, which no token has"),
        (" gpp_" + "x" * 40, "it holds a space, which no token has"),  # "Bearer  gpp_…": ninja keeps the second space
        ("gpp_" + "x" * 39 + "=", 'it holds "=" (U+003D), which no token has'),
        ("not-a-token", "it does not start with gpp_"),
        ("GPP_" + "x" * 40, "it does not start with gpp_"),
        ("gpp_" + "y" * 300, "it is 304 characters long, far longer than a token"),
    ],
)
def test_a_malformed_token_is_told_what_is_wrong_with_its_form(client, people, raw, problem):
    """A token not of a token's form tells nothing about which tokens exist, so the answer says what is
    wrong with it: the character no token has (the Tokens page's list ends each token with "…"), its
    start, or a length no token has; the list's "…" gets a word of its own."""
    r = call(client, "get", "/me", raw)
    assert r.status_code == HTTPStatus.UNAUTHORIZED and not r.has_header("WWW-Authenticate")
    listed = " (the list there shows only a token's first characters: one ending in “…” is not the token)"
    end = listed + "." if "…" in problem else "."
    assert r.json() == {"detail": MALFORMED.format(problem=problem) + end, "errors": []}


def test_without_a_token_the_answer_says_how_to_send_one(client, people):
    r = call(client, "get", "/me")
    assert r.status_code == HTTPStatus.UNAUTHORIZED and r.json()["detail"] == (
        "Not authenticated. Send 'Authorization: Bearer <token>' with a personal access token; create one on the "
        f"portal's Tokens page ({TOKENS_PAGE})."
    )


@pytest.mark.parametrize(
    "state, words",
    [
        (LinkState.PENDING, "Your sign-in is not linked to a cluster account yet: waiting for an administrator to link"),
        (LinkState.REFUSED, "A portal administrator decided not to link your sign-in to a cluster account."),
    ],
)
def test_an_unlinked_identity_s_token_says_waiting_or_refused_as_its_session_does(client, state, words):
    """The token and the browser session of the same identity get the same 403 document: the sentence
    for its link state (waiting, or refused), what to do, and no ``errors`` entry (as every 403)."""
    user = User.objects.create(username="unlinked.0123456789abcdef", link_state=state, requested_username="erin")
    _, raw = token_create(user=user, name="t", scopes=ALL, days=30)
    by_token = call(client, "get", "/me", raw)
    assert by_token.status_code == HTTPStatus.FORBIDDEN and by_token.json()["detail"].startswith(words)
    assert by_token.json()["errors"] == []
    client.force_login(user)
    by_session = call(client, "get", "/me")
    assert by_session.status_code == HTTPStatus.FORBIDDEN and by_session.json() == by_token.json()


@pytest.mark.parametrize(
    "method, path, words",
    [
        ("get", "/jobs/900_3002", "the API shows the whole array: use 900 (its `tasks` lists every task's id by state)."),
        (
            "get",
            "/jobs/900_3002/log",
            "the API reads the whole array's log, the one of its latest task to start: use 900 (every task's state is "
            "in `tasks` of GET /api/v1/jobs/900).",
        ),
        ("post", "/jobs/900_3002/hold", "hold holds the whole array (every task that has not started): use 900."),
        ("post", "/jobs/900_3002/release", "release releases the whole array (every task you held): use 900."),
    ],
)
def test_one_task_named_where_the_api_acts_on_the_array_is_refused_in_that_action_s_words(
    client, people, tokens, method, path, words
):
    _job(people["alice"], name="sweep", state=JobState.PENDING, slurm_job_id=900, kind=JobKind.ARRAY,
         array_spec="1-4000", array_tasks={"PENDING": "1-4000"})  # fmt: skip
    r = call(client, method, path, tokens["alice"])
    assert r.status_code == HTTPStatus.BAD_REQUEST
    assert r.json()["detail"] == f"'900_3002' is task 3002 of array job 900, and {words}"
    assert "cancel" not in r.json()["detail"] and "gpuportal" not in r.json()["detail"]


def test_cancel_names_one_task_in_the_api_s_terms(client, people, tokens):
    _job(people["alice"], name="sweep", state=JobState.PENDING, slurm_job_id=900, kind=JobKind.ARRAY,
         array_spec="1-4000", array_tasks={"PENDING": "1-4000"})  # fmt: skip
    r = call(client, "post", "/jobs/900_3002/cancel?task=7", tokens["alice"])
    assert r.status_code == HTTPStatus.BAD_REQUEST and r.json()["detail"] == (
        "'900_3002' names task 3002 but task=7 was asked; give one of them (POST /api/v1/jobs/900/cancel?task=3002)."
    )
    one = call(client, "post", "/jobs/900/cancel?task=3002", tokens["alice"])
    assert one.status_code == HTTPStatus.ACCEPTED and one.json()["message"] == (
        "Cancelling task 3002 of array job 900 “sweep” (scancel 900_3002 as you); its other tasks go on."
    )


def test_cancel_of_an_ended_job_is_200_and_says_nothing_was_sent(client, people, tokens):
    """The CLI reads ``final`` to say "has already ended; nothing to cancel"; the API says it in ``message``."""
    job = _job(people["alice"], name="train", state=JobState.COMPLETED, end_at=datetime(2026, 12, 4, 17, 58, tzinfo=UTC))
    r = call(client, "post", "/jobs/77/cancel", tokens["alice"])
    assert r.status_code == HTTPStatus.OK and r.json()["final"] is True
    assert (
        r.json()["message"] == "Job 77 “train” has already ended (Completed on 2026-12-04 17:58 UTC): nothing was sent to Slurm."
    )
    assert Job.objects.get(pk=job.pk).cancel_requested_at is None


def test_cancel_says_what_was_sent_once_and_that_nothing_more_was_the_second_time(client, people, tokens):
    _job(people["alice"], name="train")  # RUNNING
    first = call(client, "post", "/jobs/77/cancel", tokens["alice"])
    assert first.status_code == HTTPStatus.ACCEPTED and first.json()["message"] == (
        "Cancelling job 77 “train” (scancel as you): its state becomes Cancelled once Slurm reports it."
    )
    again = call(client, "post", "/jobs/77/cancel", tokens["alice"])
    assert again.status_code == HTTPStatus.ACCEPTED and again.json()["message"].startswith(
        "A cancel of job 77 “train” was already sent at "
    )
    assert again.json()["message"].endswith("UTC; Slurm has not reported it ended yet. Nothing more was sent.")


def test_cancel_of_a_job_whose_state_the_portal_does_not_know_says_nothing_was_sent(client, people, tokens):
    _job(people["alice"], name="train", state=JobState.UNKNOWN)
    r = call(client, "post", "/jobs/77/cancel", tokens["alice"])
    assert r.status_code == HTTPStatus.OK and r.json()["message"] == (
        "Nothing was sent to Slurm: the portal does not know whether job 77 “train” still runs (state: Status unknown). "
        "If it does, cancel it on the cluster with scancel 77."
    )


def test_cancel_of_a_job_never_submitted_says_there_is_nothing_to_cancel(client, people, tokens):
    """A job Slurm refused at submission never ran: not "has already ended"."""
    job = _job(people["alice"], name="train", state=JobState.SUBMIT_FAILED, slurm_job_id=None)
    r = call(client, "post", f"/jobs/{job.key}/cancel", tokens["alice"])
    assert r.status_code == HTTPStatus.OK and r.json()["message"] == (
        f"Job {job.key} “train” was never submitted to Slurm (Not submitted): there is nothing to cancel."
    )
