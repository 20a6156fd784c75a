"""``GET /jobs`` a page at a time: a documented page size, a cursor that neither
repeats nor skips a job when jobs are added between pages, clear refusals for a damaged or foreign
cursor, and never another user's job on any page."""

from __future__ import annotations

from datetime import timedelta
from http import HTTPStatus

import pytest
from django.utils import timezone

from api.pagination import MAX_LIMIT
from jobs.models import Job
from slurm.states import JobState
from tests.api.test_api import call

pytestmark = pytest.mark.django_db


def make(user, name, **kw):
    return Job.objects.create(
        user=user, name=name, partition="train", gpu_count=0, memory_mb=100, time_limit_min=5, script="true", **kw
    )


def pages(client, raw, query):
    """Every page of ``GET /jobs?<query>``: the names on each, following next_cursor."""
    out, cursor = [], ""
    while True:
        r = call(client, "get", f"/jobs?{query}" + (f"&cursor={cursor}" if cursor else ""), raw)
        assert r.status_code == HTTPStatus.OK, r.content
        body = r.json()
        assert body["count"] == len(body["items"])
        out.append([j["name"] for j in body["items"]])
        cursor = body["next_cursor"]
        if not cursor:
            return out


def test_every_job_once_across_pages_even_when_jobs_arrive_between_them(client, people, tokens, cluster, no_slurm):
    alice, bob = people["alice"], people["bob"]
    for i in range(7):
        make(alice, f"a{i}", state=JobState.PENDING)
    make(bob, "bobs", state=JobState.PENDING)
    assert pages(client, tokens["alice"], "scope=all&limit=3") == [["a6", "a5", "a4"], ["a3", "a2", "a1"], ["a0"]]

    first = call(client, "get", "/jobs?scope=all&limit=3", tokens["alice"]).json()
    make(alice, "newer", state=JobState.PENDING)  # arrives after page 1 was read
    rest = call(client, "get", f"/jobs?scope=all&limit=10&cursor={first['next_cursor']}", tokens["alice"]).json()
    assert [j["name"] for j in rest["items"]] == ["a3", "a2", "a1", "a0"] and rest["next_cursor"] is None


def test_history_pages_are_newest_end_first(client, people, tokens, cluster, no_slurm):
    now = timezone.now()
    for i in range(5):
        make(people["alice"], f"h{i}", state=JobState.COMPLETED, end_at=now - timedelta(hours=i))
    make(people["alice"], "live", state=JobState.RUNNING)
    assert pages(client, tokens["alice"], "scope=history&limit=2") == [["h0", "h1"], ["h2", "h3"], ["h4"]]


@pytest.mark.parametrize(
    "query, says",
    [
        ("scope=all&cursor=not-a-cursor", "is not one this API gave"),
        ("scope=all&cursor=%27%22%3B%24(id)", "is not one this API gave"),
        ("scope=all&cursor=WyJqb2JzOmFsbDoiLCJ5ZXN0ZXJkYXkiLDFd", "is not one this API gave"),  # ["jobs:all:","yesterday",1]
        ("scope=active&cursor={history}", "for another list (jobs:history:), not this one (jobs:active:)"),
    ],
)
def test_a_damaged_or_foreign_cursor_is_refused_with_what_to_do(client, people, tokens, cluster, no_slurm, query, says):
    now = timezone.now()
    for i in range(3):
        make(people["alice"], f"h{i}", state=JobState.COMPLETED, end_at=now - timedelta(hours=i))
    history = call(client, "get", "/jobs?scope=history&limit=1", tokens["alice"]).json()["next_cursor"]
    r = call(client, "get", "/jobs?" + query.format(history=history), tokens["alice"])
    assert r.status_code == HTTPStatus.BAD_REQUEST, r.content
    body = r.json()
    assert body["errors"], body
    assert body["errors"][0]["field"] == "cursor" and says in body["errors"][0]["message"]
    assert "next_cursor of the previous page" in body["errors"][0]["message"]


def test_page_size_is_bounded(client, people, tokens, cluster, no_slurm):
    r = call(client, "get", f"/jobs?limit={MAX_LIMIT + 1}", tokens["alice"])
    assert r.status_code == HTTPStatus.BAD_REQUEST or r.status_code == HTTPStatus.UNPROCESSABLE_ENTITY, r.content


def test_another_users_cursor_shows_only_your_own_jobs(client, people, tokens, cluster, no_slurm):
    for i in range(4):
        make(people["bob"], f"b{i}", state=JobState.PENDING)
    make(people["alice"], "mine", state=JobState.PENDING)
    bobs = call(client, "get", "/jobs?scope=all&limit=1", tokens["bob"]).json()["next_cursor"]
    r = call(client, "get", f"/jobs?scope=all&limit=10&cursor={bobs}", tokens["alice"])
    assert r.status_code == HTTPStatus.OK and [j["name"] for j in r.json()["items"]] in ([], ["mine"])
