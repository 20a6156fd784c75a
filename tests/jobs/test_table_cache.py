"""My jobs' table is rendered once per version of what it shows (its ETag) and read back from the
cache by the page and the fragment, never across users, never stale after a change, and never kept
when there is no tag."""

from __future__ import annotations

import pytest

from jobs.models import Job
from jobs.web import job_views
from jobs.web.table_cache import TABLE_HTML_TTL_S
from slurm.states import JobState
from tests.jobs.test_fragment_304 import alice, poll  # noqa: F401  (fixture)

pytestmark = pytest.mark.django_db


@pytest.fixture
def renders(monkeypatch):
    """How many times the table was rendered from the database: calls of the views' ``_rows``."""
    calls = []
    real = job_views._rows

    def counted(request):
        calls.append(request.user.pk)
        return real(request)

    monkeypatch.setattr(job_views, "_rows", counted)
    return calls


def table_of(page: str) -> str:
    """The polled table's markup inside the page: what sits in ``<div id="job-table" ...>``."""
    start = page.index(">", page.index('id="job-table"')) + 1
    return page[start : page.index("</div>\n  <p", start)].strip()


def test_one_render_serves_the_fragment_and_the_page(alice, renders):  # noqa: F811
    client, _ = alice
    first = poll(client)
    assert first.status_code == 200 and len(renders) == 1
    again = poll(client)  # another tab: no If-None-Match, so a 200 with a body
    page = client.get("/jobs/").content.decode()
    assert again.status_code == 200 and again["ETag"] == first["ETag"]
    assert again.content == first.content
    assert table_of(page) == first.content.decode().strip()
    assert "train-resnet" in page and "2nd in line" in page
    assert len(renders) == 1, renders


def test_a_change_is_rendered_at_once(alice, renders):  # noqa: F811
    client, job = alice
    before = poll(client)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, reason="")
    after = poll(client)
    assert after["ETag"] != before["ETag"] and len(renders) == 2
    assert "2nd in line" not in after.content.decode()
    assert "2nd in line" not in client.get("/jobs/").content.decode()
    assert len(renders) == 2  # the page read the new version's markup


def test_each_user_gets_their_own_markup(alice, django_user_model, renders):  # noqa: F811
    """Bob's jobs have the same name, partition and state as Alice's: his page is rendered for him
    and shows his job's key, never hers."""
    client, job = alice
    mine = poll(client).content.decode()
    bob = django_user_model.objects.create(username="bob", slurm_accounts=["vision"])
    his = Job.objects.create(
        user=bob, name="train-resnet", partition="train", memory_mb=1000, time_limit_min=60, script="true", slurm_job_id=8
    )
    Job.objects.filter(pk=his.pk).update(state=JobState.PENDING, reason="Priority")
    client.force_login(bob)
    theirs = client.get("/jobs/").content.decode()
    assert f'data-job="{his.key}"' in theirs and f'data-job="{job.key}"' not in theirs
    assert f'data-job="{job.key}"' in mine
    assert len(renders) == 2


def test_without_a_tag_it_renders_each_time_and_keeps_nothing(alice, renders, monkeypatch):  # noqa: F811
    """PostgreSQL or Redis raising under the tag: each request renders (its notices say what is
    wrong) and nothing is kept; once the tag can be worked out again, the markup is kept."""
    from django.core.cache import cache

    import jobs.web.fragment_etags as fragment_etags

    client, _ = alice

    def down(*args, **kwargs):
        raise ConnectionError("redis down")

    real = fragment_etags.clusters_state
    monkeypatch.setattr(fragment_etags, "clusters_state", down)
    assert poll(client).status_code == 200 and client.get("/jobs/").status_code == 200
    assert len(renders) == 2 and cache.keys("jobs:table-html:*") == []
    monkeypatch.setattr(fragment_etags, "clusters_state", real)
    assert poll(client).status_code == client.get("/jobs/").status_code == 200
    assert len(renders) == 3 and len(cache.keys("jobs:table-html:*")) == 1


def test_a_poll_landing_during_the_render_keeps_nothing(alice, monkeypatch):  # noqa: F811
    """The tag is worked out before the rows are read: when it differs after the render (a poll
    landed between them and moved the job), the markup may be the new state's, so it is not kept
    under the old tag."""
    from django.core.cache import cache

    client, job = alice
    real = job_views._rows

    def rows_after_a_poll(request):
        Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, reason="")
        return real(request)

    monkeypatch.setattr(job_views, "_rows", rows_after_a_poll)
    first = poll(client)
    assert first.status_code == 200 and "2nd in line" not in first.content.decode()
    assert cache.keys("jobs:table-html:*") == []


def test_a_table_saying_the_cache_is_down_is_not_kept(alice, monkeypatch):  # noqa: F811
    """A Redis that stops answering reads as empty, so the tag can still be worked out (its "no
    figures yet"); the table then says the cache is not answering, and that markup is not kept."""
    from django.core.cache import cache

    client, _ = alice
    cache.clear()  # as a Redis that stops answering reads (django-redis ignores its errors): no snapshot
    monkeypatch.setattr("jobs.reads.freshness.cache_reachable", lambda: False)
    page = client.get("/jobs/").content.decode()
    assert 'data-testid="cache-unreachable"' in page, page
    assert cache.keys("jobs:table-html:*") == []


def test_kept_markup_expires_and_is_rendered_again(alice, renders):  # noqa: F811
    from django.core.cache import cache

    client, _ = alice
    tag = poll(client)["ETag"]
    (key,) = cache.keys("jobs:table-html:*")
    assert key.endswith(tag[3:-1]) and "train-resnet" in cache.get(key)
    assert 0 < cache.ttl(key) <= TABLE_HTML_TTL_S
    cache.delete(key)  # as its time to live running out does
    assert poll(client).content.decode().count("train-resnet") and len(renders) == 2
