"""A Slurm sync as the settings page follows it (teams/sync/runs.py): queued, performed by the
worker, its report kept in the cache (real Redis, the test database)."""

from __future__ import annotations

import pytest

from teams.sync import runs
from teams.sync.associations import ActionResult, ClusterSync, RemoveUser, SyncReport
from teams.sync.runs import report_headline, sync_run_finish, sync_run_last, sync_run_load, sync_run_perform, sync_run_queue

pytestmark = pytest.mark.django_db

DONE = ActionResult(RemoveUser("nlp", "dana"), ok=True)
FAILED = ActionResult(RemoveUser("nlp", "erin"), ok=False, error="Nothing deleted")


def on_one(dry_run: bool, results: list[ActionResult]) -> SyncReport:
    """A report of a site with one cluster."""
    return SyncReport(dry_run, [ClusterSync("cluster1", results)])


@pytest.mark.parametrize(
    ("report", "headline"),
    [
        (on_one(True, []), "Dry run: Slurm already matches the portal; nothing to change."),
        (on_one(True, [ActionResult(DONE.action)]), "Dry run: 1 change(s) planned, none applied."),
        (on_one(False, []), "Slurm already matches the portal; nothing to change."),
        (on_one(False, [DONE]), "Sync applied 1 change(s)."),
        (on_one(False, [DONE, FAILED]), "Sync: 1 of 2 change(s) FAILED; the others were applied."),
        (
            SyncReport(False, error="reading Slurm: cannot reach 127.0.0.1:2222"),
            "Slurm sync did not run: reading Slurm: cannot reach 127.0.0.1:2222",
        ),
    ],
)
def test_headline_says_whether_anything_was_applied(report, headline):
    assert report_headline(report) == headline


def test_a_run_is_on_its_way_until_its_report_is_stored(clean_cache, django_user_model):
    dana = django_user_model.objects.create(username="dana")
    run = sync_run_queue(dry_run=False, by=dana, teams=["vision", "nlp"], now=1000.0)
    assert sync_run_last("vision") == sync_run_last("nlp") == run and sync_run_last("fx-lab") is None
    assert not run.done and run.by == "dana" and not run.stale(1000.0 + 60) and run.stale(1000.0 + 3600)
    finished = sync_run_finish(run_id=run.run_id, report=on_one(False, [DONE, FAILED]), now=1010.0)
    assert sync_run_load(run.run_id) == finished and finished.done and finished.ok is False
    assert (finished.queued_at, finished.by, finished.finished_at) == (1000.0, "dana", 1010.0)
    assert finished.lines == ("- remove user dana from nlp", "FAILED - remove user erin from nlp: Nothing deleted")
    assert not finished.stale(1000.0 + 3600)


def test_a_sync_that_raises_ends_its_run_with_the_error(clean_cache, monkeypatch):
    def broken(**kwargs):
        raise RuntimeError("the database went away")

    monkeypatch.setattr(runs, "teams_sync", broken)
    run = sync_run_queue(dry_run=False, teams=["vision"])
    with pytest.raises(RuntimeError):
        sync_run_perform(run_id=run.run_id)
    done = sync_run_last("vision")
    assert done.done and done.ok is False and "the database went away" in done.headline


# --- a failing sync is tried again with back-off -----------------------------------
DB_DOWN = "reading Slurm: ['sacctmgr', '--noheader'] exited with 1: sacctmgr: error: Problem talking to the database: Connection refused"


def test_a_failed_try_is_shown_with_slurms_words_and_the_next_try(clean_cache, monkeypatch, client, django_user_model):
    from teams.models import Team

    monkeypatch.setattr(runs, "teams_sync", lambda **kw: SyncReport(False, error=DB_DOWN))
    run = sync_run_queue(dry_run=False, teams=["vision"])
    sync_run_perform(run_id=run.run_id, attempt=1, retry_in=15)
    waiting = sync_run_last("vision")
    assert waiting.retrying and not waiting.done and waiting.attempt == 1 and waiting.retry_at > waiting.queued_at
    Team.objects.create(name="vision")
    client.force_login(django_user_model.objects.create(username="dana", is_staff=True))
    html = client.get(f"/teams/vision/settings/sync/{run.run_id}/").content.decode()
    assert 'data-testid="sync-retrying"' in html and "Problem talking to the database" in html
    assert "Trying again at" in html and "(try 2 of 6)" in html and "hx-get" in html  # the fragment keeps following it
    # the next try works: the run ends applied, saying after how many tries
    monkeypatch.setattr(runs, "teams_sync", lambda **kw: on_one(False, [DONE]))
    sync_run_perform(run_id=run.run_id, attempt=2, retry_in=30)
    done = sync_run_last("vision")
    assert done.done and done.ok and not done.retrying and done.headline == "Sync applied 1 change(s). (after 2 tries)"


def test_the_last_try_ends_the_run_failed_and_dry_runs_or_skips_are_not_retried(clean_cache, monkeypatch):
    monkeypatch.setattr(runs, "teams_sync", lambda **kw: SyncReport(False, error=DB_DOWN))
    run = sync_run_queue(dry_run=False, teams=["vision"])
    sync_run_perform(run_id=run.run_id, attempt=6, retry_in=None)
    last = sync_run_last("vision")
    assert (
        last.done and last.ok is False and "Problem talking to the database" in last.headline and "after 6 tries" in last.headline
    )
    assert not runs.retryable(SyncReport(True, error=DB_DOWN))
    assert not runs.retryable(SyncReport(False, skipped=("team fx-lab: no such account",)))
    assert [runs.sync_retry_delay(n) for n in range(1, 7)] == [15, 30, 60, 120, 240, 480]
