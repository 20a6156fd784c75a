"""The team a session is billed to (interactive.options.session_account, the batch job's choice):
the person's only team, or the one chosen on the Sessions form or in the API body when they have
several; someone in no team is refused, before the hub is asked, in the words of the home page's
Start buttons. The hub's spawn check: test_options_and_internal.py; the real hub and Slurm:
test_hub_integration.py."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from api.tokens import token_create
from interactive.models import Session

from .test_home import started, world  # noqa: F401  (fixtures: alice in vision, nils in no team; the hub's starts)
from .test_options_and_internal import NO_TEAM
from .test_pages import GOOD

pytestmark = pytest.mark.django_db


@pytest.fixture
def carol(django_user_model):
    return django_user_model.objects.create(username="carol", oidc_sub="c", oidc_issuer="t", slurm_accounts=["vision", "nlp"])


def test_the_form_bills_the_only_team_or_the_one_chosen(client, world, started, carol):  # noqa: F811
    alice, _ = world
    client.force_login(alice)
    assert client.post("/sessions/", GOOD).status_code == HTTPStatus.FOUND
    assert started[-1][1]["account"] == "vision" == Session.objects.get(user=alice).account

    client.force_login(carol)
    page = BeautifulSoup(client.get("/sessions/").content, "html.parser")
    assert [o["value"] for o in page.select("select[name=account] option")] == ["vision", "nlp"]
    assert client.post("/sessions/", {**GOOD, "account": "nlp"}).status_code == HTTPStatus.FOUND
    assert started[-1][1]["account"] == "nlp" == Session.objects.get(user=carol).account

    refused = client.post("/sessions/", {**GOOD, "account": "physics"})
    assert refused.status_code == HTTPStatus.BAD_REQUEST
    error = BeautifulSoup(refused.content, "html.parser").select_one("[data-testid=error-account]")
    assert error.get_text() == "You are not in the team 'physics'. Your teams: vision, nlp."
    assert len(started) == 2


def test_the_form_tells_someone_in_no_team_whom_to_ask_before_and_at_a_start(client, world, started):  # noqa: F811
    _, nils = world
    client.force_login(nils)
    page = BeautifulSoup(client.get("/sessions/").content, "html.parser")
    assert NO_TEAM in page.select_one("[data-testid=caps-notice]").get_text()
    assert page.select("select[name=account]") == []  # no team to choose
    refused = client.post("/sessions/", GOOD)
    assert refused.status_code == HTTPStatus.BAD_REQUEST
    page = BeautifulSoup(refused.content, "html.parser")
    assert NO_TEAM in page.select_one("[data-testid=form-errors]").get_text()
    assert page.get_text().count(NO_TEAM) == 1  # said once after the refusal
    assert started == [] and not Session.objects.exists()


def api_start(client, user, body: dict):
    _, raw = token_create(user=user, name="t", scopes=["read", "sessions"], days=1)
    return client.post("/api/v1/sessions", body, content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")


@pytest.mark.parametrize(
    "who, body, status, answer",
    [
        ("alice", {}, HTTPStatus.CREATED, "vision"),
        ("carol", {"account": "nlp"}, HTTPStatus.CREATED, "nlp"),
        ("carol", {}, HTTPStatus.CREATED, "vision"),  # none asked: the first team, as for a job
        ("carol", {"account": "physics"}, HTTPStatus.BAD_REQUEST, "You are not in the team 'physics'. Your teams: vision, nlp."),
        ("nils", {}, HTTPStatus.BAD_REQUEST, NO_TEAM),
        ("nils", {"account": "vision"}, HTTPStatus.BAD_REQUEST, NO_TEAM),
    ],
)
def test_the_api_bills_one_of_the_persons_teams(client, world, started, carol, who, body, status, answer):  # noqa: F811
    users = {"alice": world[0], "nils": world[1], "carol": carol}
    r = api_start(client, users[who], {"hours": 1, **body})
    assert r.status_code == status, r.content
    if status == HTTPStatus.CREATED:
        assert r.json()["account"] == answer == started[-1][1]["account"] == Session.objects.get().account
    else:
        assert r.json()["errors"] == [{"field": "account", "message": answer, "line": None}]
        assert started == [] and not Session.objects.exists()


def test_your_last_session_button_bills_its_team_while_you_are_in_it(client, world, started, carol):  # noqa: F811
    client.force_login(carol)
    assert client.post("/sessions/", {**GOOD, "account": "nlp"}).status_code == HTTPStatus.FOUND
    last = Session.objects.get(user=carol)
    assert client.post("/sessions/start/", {"preset": f"last-{last.key}"}).status_code == HTTPStatus.FOUND
    assert started[-1][1]["account"] == "nlp"
    carol.slurm_accounts = ["vision"]  # she left nlp: the button bills her team now
    carol.save()
    assert client.post("/sessions/start/", {"preset": f"last-{last.key}"}).status_code == HTTPStatus.FOUND
    assert started[-1][1]["account"] == "vision"
