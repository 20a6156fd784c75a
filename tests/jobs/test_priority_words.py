"""A pending job's priority in words (jobs/reads/priority.py), from sprio records: the issue's example
made of figures, and the recorded 24.11 queue stored as the poller stores it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.core.cache import cache

from api.tokens import token_create
from jobs.models import Job
from jobs.reads.priority import _entry_load, job_priority, priority_explain, waited_text
from slurm.adapters import RELEASES
from slurm.priority import JobPriority, parse_sprio, priority_entry
from slurm.snapshot import ClusterSnapshot, snapshot_key, snapshot_store
from slurm.states import JobState

PRIORITY = Path(__file__).resolve().parent.parent / "fixtures" / "slurm" / "24.11" / "priority"
NOW = 1_800_000_000.0


def line(job_id, account, total, *, fairshare=0, age=0, partition=0, nice=0, submitted=NOW - 9 * 3600, where="train"):
    return JobPriority(job_id, where, "u", total, age, 0, fairshare, 0, partition, 0, 0, nice, 0, account, int(submitted))


def test_the_issues_example():
    mine = line(10, "vision", 4210, fairshare=3000, age=900, partition=310)
    others = [line(11, "nlp", 5310, fairshare=5000, partition=310), line(12, "nlp", 4310, fairshare=4000, partition=310)]
    others.append(line(13, "vision", 910, fairshare=600, partition=310))  # behind it
    text = priority_explain(mine, others, read_at=NOW, now=NOW).text
    assert text == (
        "Your job's priority is 4,210: 3,000 from your team's fair share, 900 from waiting 9 h, 310 from the partition. "
        "2 jobs ahead of it in train have higher priority: both from team nlp, which has used less of its fair share "
        "than your team."
    )


def test_several_teams_ahead_and_a_nice_value():
    mine = line(10, "vision", 2500, fairshare=2000, partition=1000, nice=500)
    others = [
        line(11, "nlp", 9000, fairshare=8000, partition=1000),
        line(12, "nlp", 8000, fairshare=7000, partition=1000),
        line(13, "vision", 3000, fairshare=2000, partition=1000),
        line(14, "nlp", 9000, fairshare=8000, partition=1000, where="gpu"),  # another partition
    ]
    explained = priority_explain(mine, others, read_at=NOW, now=NOW)
    assert explained.text == (
        "Your job's priority is 2,500: 2,000 from your team's fair share, 1,000 from the partition, minus 500 for its "
        "nice value. 3 jobs ahead of it in train have higher priority: 2 from team nlp (which has used less of its fair "
        "share than your team), 1 from your team vision."
    )
    assert explained.as_api()["teams_ahead"] == [
        {"team": "nlp", "count": 2, "less_used_share": True},
        {"team": "vision", "count": 1, "less_used_share": False},
    ]


def test_jobs_of_the_same_priority_submitted_earlier_are_ahead_as_slurm_orders_them():
    """Slurm schedules equal priorities by submit time, then job id (job_scheduler.c's queue order): a
    job behind several of its own team's, all of one priority, is told they are ahead and why, not
    "no pending job has a higher priority" beside a Priority reason."""
    mine = line(13, "vision", 1000, partition=1000, submitted=NOW - 60)
    earlier = [
        line(11, "vision", 1000, partition=1000, submitted=NOW - 120),
        line(12, "vision", 1000, partition=1000, submitted=NOW - 60),
    ]
    later = [
        line(14, "vision", 1000, partition=1000, submitted=NOW - 60),
        line(15, "vision", 1000, partition=1000, submitted=NOW),
    ]
    explained = priority_explain(mine, earlier + later, read_at=NOW, now=NOW)
    assert (explained.ahead, explained.same_earlier) == (2, 2)  # job 12: the same second, a lower id
    assert explained.ahead_sentence == (
        "2 jobs ahead of it in train have the same priority and were submitted earlier: both from your team vision."
    )
    nlp = line(16, "nlp", 5000, fairshare=4000, partition=1000, submitted=NOW)
    mixed = priority_explain(mine, [*earlier, nlp], read_at=NOW, now=NOW)
    assert mixed.ahead_sentence == (
        "3 jobs ahead of it in train have higher priority (1) or the same and an earlier submission (2): 2 from your "
        "team vision, 1 from team nlp (which has used less of its fair share than your team)."
    )
    first = priority_explain(earlier[0], [mine, *later], read_at=NOW, now=NOW)
    assert first.ahead == 0 and first.ahead_sentence == "No pending job in train has a higher priority."


def test_nothing_ahead_one_ahead_and_a_priority_set_by_hand():
    alone = priority_explain(line(10, "vision", 1000, partition=1000), [], read_at=NOW, now=NOW)
    assert alone.text == "Your job's priority is 1,000: 1,000 from the partition. No pending job in train has a higher priority."
    by_hand = line(11, "nlp", 50000)
    one = priority_explain(line(10, "vision", 1000, partition=1000), [by_hand], read_at=NOW, now=NOW)
    assert one.ahead_sentence == "1 job ahead of it in train has a higher priority: it is from team nlp."
    assert priority_explain(by_hand, [], read_at=NOW, now=NOW).total_sentence == (
        "Your job's priority is 50,000, set by an administrator (scontrol update Priority=), so fair share, waiting "
        "time and the other factors do not count."
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(30, "under a minute"), (40 * 60, "40 min"), (9 * 3600, "9 h"), (9 * 3600 + 300, "9 h 5 min"), (51 * 3600, "2 days 3 h")],
)
def test_waiting_time_in_words(seconds, text):
    assert waited_text(seconds) == text


def store_recorded(cluster: str) -> dict[int, str]:
    """The recorded 24.11 sprio joined with its squeue, stored as the poller stores it; job id -> account."""
    queue = RELEASES["24.11"].parse_jobs(json.loads((PRIORITY / "squeue.json").read_text()))
    accounts = {q.job_id: q.account for q in queue}
    records = [
        JobPriority(**{**vars(r), "account": accounts[r.job_id], "submit_time": NOW - 600})
        for r in parse_sprio((PRIORITY / "sprio.txt").read_text())
    ]
    cache.set(snapshot_key(cluster, "priority"), priority_entry(records, taken_at=NOW))
    return accounts


def roles() -> dict[str, int]:
    rows = [r.strip(" |").split("|") for r in (PRIORITY / "README.md").read_text().splitlines() if r.startswith("| `")]
    return {role.strip(" `"): int(job_id) for role, job_id in rows}


@pytest.mark.django_db
def test_a_pending_jobs_explanation_comes_from_the_stored_poll(clean_cache, django_user_model):
    store_recorded("cluster2")
    ids = roles()
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    job = Job.objects.create(
        user=alice, name="w", partition="small", memory_mb=1, time_limit_min=5, script="", state=JobState.PENDING,
        slurm_job_id=ids["waiting"], slurm_cluster="cluster2", account="vision",
    )  # fmt: skip
    explained = job_priority(job, now=NOW)
    # ahead in small: bob's multi-partition job, his job with an operator's Nice=-2000, his job set by hand
    assert explained.ahead == 3 and [(t.team, t.count) for t in explained.teams_ahead] == [("nlp", 3)]
    assert explained.text.startswith(f"Your job's priority is {explained.total:,}: ")
    assert "all 3 from team nlp, which has used less of its fair share than your team." in explained.text
    job.state = JobState.RUNNING
    assert job_priority(job) is None
    job.state, job.reason = JobState.PENDING, "JobHeldUser"
    assert job_priority(job) is None
    job.reason, job.slurm_job_id = "", ids["begin"]  # sprio does not list it
    assert job_priority(job) is None
    cache.delete(snapshot_key("cluster2", "priority"))
    job.slurm_job_id = ids["waiting"]
    assert job_priority(job) is None  # nothing stored yet


@pytest.mark.django_db
def test_the_stored_poll_counts_equal_priorities_submitted_earlier(clean_cache, django_user_model):
    """Through the stored sprio entry, as the job page and the API read it: two jobs of the same total
    submitted before the job are ahead of it, one submitted after it is not, and one the poll's squeue
    did not have (submit time 0: it came after the squeue) is not either."""
    records = [
        line(11, "vision", 1000, partition=1000, submitted=NOW - 120, where="small"),
        line(12, "nlp", 1000, fairshare=600, partition=400, submitted=NOW - 90, where="small"),  # more fair share
        line(13, "vision", 1000, partition=1000, submitted=NOW - 60, where="small"),
        line(14, "vision", 1000, partition=1000, submitted=NOW - 30, where="small"),
        line(15, "", 1000, partition=1000, submitted=0, where="small"),
    ]
    cache.set(snapshot_key("cluster1", "priority"), priority_entry(records, taken_at=NOW))
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    job = Job.objects.create(
        user=alice, name="w", partition="small", memory_mb=1, time_limit_min=5, script="", state=JobState.PENDING,
        slurm_job_id=13, slurm_cluster="cluster1", account="vision",
    )  # fmt: skip
    explained = job_priority(job, now=NOW)
    assert (explained.ahead, explained.same_earlier) == (2, 2)
    assert explained.ahead_sentence == (
        "2 jobs ahead of it in small have the same priority and were submitted earlier: 1 from team nlp, 1 from your team vision."
    )
    assert not any(t.less_used for t in explained.teams_ahead)  # nlp is ahead by submission only, not its fair share


@pytest.mark.django_db
def test_the_job_page_and_the_api_show_it_to_the_owner_only(clean_cache, django_user_model, client):
    store_recorded("cluster2")
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    bob = django_user_model.objects.create(username="bob", slurm_accounts=["nlp"])
    job = Job.objects.create(
        user=alice, name="w", partition="small", memory_mb=1, time_limit_min=5, script="", state=JobState.PENDING,
        slurm_job_id=roles()["waiting"], slurm_cluster="cluster2", account="vision",
    )  # fmt: skip
    sentence = job_priority(job).text
    client.force_login(alice)
    for path in (f"/jobs/{job.key}/", f"/jobs/{job.key}/status/"):
        page = client.get(path)
        assert page.status_code == 200 and 'data-testid="job-priority"' in page.content.decode()
        assert "Your job&#x27;s priority is 2,666: 1,667 from your team&#x27;s fair share" in page.content.decode()
    token = token_create(user=alice, name="t", scopes=["read"], days=7)[1]
    answer = client.get(f"/api/v1/jobs/{job.key}", HTTP_AUTHORIZATION=f"Bearer {token}").json()
    assert answer["priority"]["text"] == sentence and answer["priority"]["total"] == 2666
    assert [p["factor"] for p in answer["priority"]["parts"]] == ["fairshare", "partition_part"]
    assert answer["priority"]["teams_ahead"] == [{"team": "nlp", "count": 3, "less_used_share": True}]

    client.force_login(bob)  # another team's member: neither the page, its fragment nor the API shows it
    for path in (f"/jobs/{job.key}/", f"/jobs/{job.key}/status/"):
        assert client.get(path).status_code == 404
    token = token_create(user=bob, name="t", scopes=["read"], days=7)[1]
    refused = client.get(f"/api/v1/jobs/{job.key}", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert refused.status_code == 404 and "priority" not in refused.json()


def test_a_process_reads_the_stored_figures_once_per_poll(clean_cache):
    key, records = snapshot_key("cluster2", "priority"), parse_sprio((PRIORITY / "sprio.txt").read_text())
    snapshot_store(ClusterSnapshot(cluster="cluster2", taken_at=NOW), derived={key: priority_entry(records[:1], taken_at=NOW)})
    first = _entry_load("cluster2")
    assert len(first["rows"]) == 1
    cache.set(key, {"taken_at": NOW, "rows": []})  # not a poller's store (no new head): this process keeps its copy
    assert _entry_load("cluster2") is first
    snapshot_store(
        ClusterSnapshot(cluster="cluster2", taken_at=NOW + 5), derived={key: priority_entry(records, taken_at=NOW + 5)}
    )
    assert len(_entry_load("cluster2")["rows"]) == len(records)  # the next poll's store is read
