"""Team usage on several clusters (team usage per cluster, and summed where a sum makes
sense): each cluster refreshed and stored on its own, the team's figures summed over the clusters
with each cluster's beside them, the job form's estimate from the job's own cluster, an untracked
cluster shown as such, a cluster whose refresh fails kept with its last figures marked stale while the
other's stay current. Real Redis (the test database); Slurm: each cluster's scripted transport
answering from its recorded outputs (cluster1 Slurm 22.05, cluster2 Slurm 24.11,
``tests/fixtures/slurm/24.11/accounting/``), or figures stored directly where only the arithmetic
or the page is tested."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime

import pytest

from slurm import SlurmUnreachable
from slurm.health import accounting_status
from teams.models import Membership, Role, Source, Team
from teams.tasks import usage_refresh_task
from teams.usage import cache as usage
from teams.usage.cache import (
    MemberUsage,
    TeamUsage,
    UsageStatus,
    _store,
    job_quota_estimate,
    team_usage,
    usage_refresh,
    usage_status,
)
from tests.fakes import ANY
from tests.teams.conftest import manifest_2411, recorded
from tests.teams.test_usage import FINAL_NOW
from tests.teams.test_usage import scripted as scripted_2205

pytestmark = pytest.mark.django_db

CONFIG = ["scontrol", "show", "config"]
#: The refresh's sshare, fair-share columns included. The sshare outputs these tests replay were
#: recorded before those columns were asked for: the reader takes such an output too (without them).
SSHARE = ["sshare", "-a", "-P", "-o", "Account,User,GrpTRESMins,GrpTRESRaw,NormShares,EffectvUsage,FairShare,LevelFS"]
ASSOC_MGR = ["scontrol", "show", "assoc_mgr", "flags=assoc"]


def now_2411(moment: str = "final") -> float:
    return float(manifest_2411()["files"][f"sshare_{moment}.txt"]["now"])


def script_2411(fake, moment: str = "final", *, sacct: dict | None = None, later: bool = False):
    """cluster2's four usage calls answered from the 24.11 recording of ``moment`` (``sacct``: that
    answer instead of the recorded document; ``later``: the refresh runs after the recorded moment,
    so sacct's ``-S now-<N>seconds`` has another N)."""
    files = manifest_2411()["files"]
    fake.expect(CONFIG, stdout=recorded("24.11", f"scontrol_config_{moment}.txt"))
    fake.expect(SSHARE, stdout=recorded("24.11", f"sshare_{moment}.txt"))
    fake.expect(ASSOC_MGR, stdout=recorded("24.11", f"assoc_mgr_{moment}.txt"))
    argv = list(files[f"sacct_usage_{moment}.json"]["argv"])
    if later:
        argv[5] = ANY
    fake.expect(argv, **(sacct or {"stdout": recorded("24.11", f"sacct_usage_{moment}.json")}))
    return fake


@pytest.fixture
def both(slurmdbds, clean_cache):
    """Refresh both clusters from their recordings: cluster1 at its final moment (22.05, November),
    cluster2 at its final moment (24.11, December)."""
    slurmdbds["cluster1"].script = scripted_2205().script
    script_2411(slurmdbds["cluster2"])
    usage_refresh(cluster="cluster1", now=FINAL_NOW)
    usage_refresh(cluster="cluster2", now=now_2411())
    assert all(not fake.script for fake in slurmdbds.values())
    return slurmdbds


# --- the sum, on the two recordings ---------------------------------------------------------------------


def test_each_cluster_is_stored_on_its_own_and_the_team_summed(both):
    one, two = team_usage("vision", cluster="cluster1"), team_usage("vision", cluster="cluster2")
    assert (one.cluster, two.cluster) == ("cluster1", "cluster2") and one.tracked and two.tracked
    total = team_usage("vision")
    assert total.cluster == "" and [p.cluster for p in total.clusters] == ["cluster1", "cluster2"] and total.missing == {}
    assert total.clusters == [one, two]
    assert total.gpu_hours_used == pytest.approx(one.gpu_hours_used + two.gpu_hours_used)
    # cluster1 has a quota (100 GPU-hours), cluster2 none: the team is unlimited there, so no sum
    assert one.gpu_hours_quota == 100.0 and two.gpu_hours_quota is None
    assert total.gpu_hours_quota is None and total.gpu_hours_left is None and total.runout_date is None
    assert total.gpu_limit is None  # 6 at once on cluster1, no limit on cluster2
    by = {c.cluster: {m.username: m for m in c.members} for c in total.clusters}
    alice = next(m for m in total.members if m.username == "alice")
    assert alice.gpu_hours == pytest.approx(by["cluster1"]["alice"].gpu_hours + by["cluster2"]["alice"].gpu_hours)
    assert alice.jobs == by["cluster1"]["alice"].jobs + by["cluster2"]["alice"].jobs
    assert alice.failed_jobs == by["cluster1"]["alice"].failed_jobs + by["cluster2"]["alice"].failed_jobs
    waits = sorted(by["cluster1"]["alice"].waits_s + by["cluster2"]["alice"].waits_s)
    assert alice.waits_s == tuple(waits) and len(waits) > 1
    # the daily series: every day of both, each day's GPU-hours added up per member
    assert set(total.daily) == set(one.daily) | set(two.daily)
    for day, hours in total.daily.items():
        for user, value in hours.items():
            assert value == pytest.approx(one.daily.get(day, {}).get(user, 0.0) + two.daily.get(day, {}).get(user, 0.0))
    assert total.taken_at == FINAL_NOW  # as old as the oldest cluster's figures
    assert total.period_end == datetime(2026, 12, 1, tzinfo=UTC)  # the first reset of either


def test_a_team_on_one_cluster_only_says_where_it_has_no_account(both):
    account = manifest_2411()["account"]  # the recording's throwaway account: cluster2 only
    total = team_usage(account)
    assert [p.cluster for p in total.clusters] == ["cluster2"]
    assert total.missing == {"cluster1": f"no account {account} there yet (the teams sync adds it)"}
    two = team_usage(account, cluster="cluster2")
    assert total.gpu_hours_used == two.gpu_hours_used and total.gpu_hours_quota == two.gpu_hours_quota == 10.0
    assert team_usage(account, cluster="cluster1") is None


# --- the sum's arithmetic, on stored figures --------------------------------------------------------


def figures(cluster: str, **kw) -> TeamUsage:
    base = dict(
        account="vision",
        tracked=True,
        period_start=datetime(2026, 11, 1, tzinfo=UTC),
        period_end=datetime(2026, 12, 1, tzinfo=UTC),
        taken_at=1795970000.0,
        cluster=cluster,
    )
    return TeamUsage(**(base | kw))


@pytest.fixture
def stored(clean_cache):
    """vision on cluster1: quota 10 GPU-hours, 7.5 used, 4 GPUs at once, 2 running; on cluster2:
    quota 10, 1 used, 4 at once, 1 running."""
    _store(
        {
            "vision": figures(
                "cluster1",
                gpu_hours_used=7.5,
                gpu_hours_quota=10.0,
                gpu_hours_left=2.5,
                gpu_limit=4,
                gpus_running=2,
                pending_gpu_hours=4.0,
                burn_gpu_hours_per_day=10.0,
                members=[
                    MemberUsage("alice", 5.0, 5.0, 3, 1, 120.0, (60.0, 120.0, 300.0)),
                    MemberUsage("carol", 2.5, 2.5, 1, 0, None),
                ],
                daily={"2026-11-27": {"alice": 3.0, "carol": 2.5}, "2026-11-28": {"alice": 2.0}},
            )
        },
        UsageStatus(taken_at=1795970000.0),
        "cluster1",
    )
    _store(
        {
            "vision": figures(
                "cluster2",
                taken_at=1795970030.0,
                gpu_hours_used=1.0,
                gpu_hours_quota=10.0,
                gpu_hours_left=9.0,
                gpu_limit=4,
                gpus_running=1,
                pending_gpu_hours=0.5,
                burn_gpu_hours_per_day=13.0,
                members=[MemberUsage("alice", 1.0, 1.0, 2, 1, 30.0, (10.0, 50.0))],
                daily={"2026-11-28": {"alice": 1.0}},
            )
        },
        UsageStatus(taken_at=1795970030.0),
        "cluster2",
    )


def test_what_is_summed(stored):
    total = team_usage("vision")
    assert (total.gpu_hours_quota, total.gpu_hours_used, total.gpu_hours_left) == (20.0, 8.5, 11.5)
    assert (total.gpu_limit, total.gpus_running, total.pending_gpu_hours, total.burn_gpu_hours_per_day) == (8, 3, 4.5, 23.0)
    assert not total.used_up and total.taken_at == 1795970000.0
    # The earliest cluster's, as Slurm holds each cluster's quota alone: cluster1's 2.5 GPU-hours left
    # at 10 a day run out 6 h after the newest figures (Nov 29th, 16:33 UTC); cluster2's 9 at 13 a day
    # on Nov 30th, and the sums' 11.5 at 23 a day (the date once shown) also on Nov 30th.
    assert total.runout_date == date(2026, 11, 29)
    alice, carol = total.members
    assert (alice.username, alice.gpu_hours, alice.jobs, alice.failed_jobs) == ("alice", 6.0, 5, 2)
    assert alice.median_wait_s == 60.0  # the median of 10, 50, 60, 120, 300 s: both clusters' waits
    assert carol == MemberUsage("carol", 2.5, 2.5, 1, 0, None)  # on one cluster: as it is there
    assert total.daily == {"2026-11-27": {"alice": 3.0, "carol": 2.5}, "2026-11-28": {"alice": 3.0}}


def test_the_job_forms_estimate_uses_the_jobs_own_cluster(stored):
    """4 GPUs for an hour: too much for cluster1's 2.5 GPU-hours left, fine on cluster2 (9 left);
    the sum (11.5) is never what a job is held against."""
    on_one = job_quota_estimate(team="vision", gpu_count=4, time_limit_min=60, cluster="cluster1")
    on_two = job_quota_estimate(team="vision", gpu_count=4, time_limit_min=60, cluster="cluster2")
    assert (on_one.cluster, on_one.gpu_hours_left, on_one.will_wait) == ("cluster1", 2.5, True)
    assert (on_two.cluster, on_two.gpu_hours_left, on_two.will_wait) == ("cluster2", 9.0, False)
    assert job_quota_estimate(team="vision", gpu_count=4, time_limit_min=60) == on_one  # no cluster: the default one


def test_the_job_form_asks_for_the_estimate_of_the_cluster_it_names(stored, client, django_user_model):
    alice = django_user_model.objects.create(username="alice", slurm_accounts=["vision"])
    client.force_login(alice)
    form = {"account": "vision", "gpu_count": "4", "time_limit": "60"}
    one = client.post("/jobs/new/estimate/", {**form, "cluster": "cluster1"}).content.decode()
    two = client.post("/jobs/new/estimate/", {**form, "cluster": "cluster2"}).content.decode()
    assert "2.5 h left; this job needs 4 h: it will wait for quota" in one
    assert "9 h left; this job needs 4 h: it fits" in two and "will wait" not in two


def test_untracked_cluster_is_shown_as_such_and_adds_no_gpu_figure(clean_cache, client, django_user_model):
    _store(
        {"vision": figures("cluster1", gpu_hours_used=7.5, gpu_hours_quota=10.0, gpu_hours_left=2.5, gpus_running=2)},
        UsageStatus(taken_at=1.0),
        "cluster1",
    )
    _store(
        {"vision": figures("cluster2", tracked=False, members=[MemberUsage("alice", None, None, 4, 1, 5.0, (5.0,))])},
        UsageStatus(taken_at=1.0),
        "cluster2",
    )
    total = team_usage("vision")
    assert total.tracked and total.untracked_clusters == ["cluster2"]
    assert (total.gpu_hours_used, total.gpu_hours_quota, total.gpu_hours_left, total.gpus_running) == (7.5, 10.0, 2.5, 2)
    assert total.members[0].jobs == 4 and total.members[0].gpu_hours is None  # jobs count, GPU-hours cannot
    dana = django_user_model.objects.create(username="dana", is_staff=True)
    Team.objects.create(name="vision", gpu_minutes_quota=600)
    client.force_login(dana)
    html = client.get("/teams/vision/").content.decode()
    row = html.split('data-cluster="cluster2"', 1)[1].split("</tr>", 1)[0]
    # cluster2's row says untracked and shows no GPU figure (never a 0); cluster1's has its figures
    assert "GPU usage is not tracked by this cluster" in row and "AccountingStorageTRES" in row and "GPU-hours" not in row
    assert row.rstrip().endswith("its GPU use cannot be.</td>")  # the cell is closed: the row has no stray text


def test_a_failing_cluster_keeps_its_figures_marked_stale_and_the_other_stays_current(both, client, django_user_model):
    down = SlurmUnreachable(["scontrol"], None, message="cannot reach 127.0.0.1:2223")
    both["cluster2"].expect(CONFIG, raises=down)
    both["cluster1"].script = scripted_2205(now=FINAL_NOW + 60).script
    usage_refresh(cluster="cluster2", now=now_2411() + 60)
    usage_refresh(cluster="cluster1", now=FINAL_NOW + 60)
    two, one = team_usage("vision", cluster="cluster2"), team_usage("vision", cluster="cluster1")
    assert two.error == "cannot reach 127.0.0.1:2223" and two.error_since == now_2411() + 60 and two.taken_at == now_2411()
    assert one.error == "" and one.taken_at == FINAL_NOW + 60
    assert usage_status("cluster1").error == "" and usage_status("cluster2").error_since == now_2411() + 60
    total = team_usage("vision")
    assert total.error == "cluster2: cannot reach 127.0.0.1:2223" and total.error_since == now_2411() + 60
    carol = django_user_model.objects.create(username="carol")
    team = Team.objects.create(name="vision")
    Membership.objects.create(team=team, user=carol, role=Role.LEAD, source=Source.ADMIN)
    client.force_login(carol)
    html = client.get("/teams/vision/").content.decode()
    assert html.count('data-testid="usage-stale"') == 1 and "cluster2's figures could not be refreshed since" in html
    assert "cannot reach 127.0.0.1:2223" in html and "The other clusters' figures are current." in html


def test_accounting_down_on_one_cluster_is_recorded_for_that_cluster(both):
    failed = {"stdout": "", "stderr": "sacct: error: Problem talking to the database: Connection refused", "returncode": 1}
    script_2411(both["cluster2"], sacct=failed, later=True)
    usage_refresh(cluster="cluster2", now=now_2411() + 60)
    assert accounting_status("cluster2").unavailable and "Problem talking to the database" in accounting_status("cluster2").error
    assert not accounting_status("cluster1").unavailable and accounting_status("cluster1").ok_at == FINAL_NOW
    assert team_usage("vision", cluster="cluster2").error and not team_usage("vision", cluster="cluster1").error


def test_the_beat_task_refreshes_each_cluster_and_one_failing_never_stops_the_other(slurmdbds, clean_cache):
    import time

    before = time.time()
    slurmdbds["cluster1"].script = scripted_2205().script
    slurmdbds["cluster1"].script[-1].argv[5] = ANY  # sacct -S now-<N>seconds: N depends on the moment it runs
    slurmdbds["cluster2"].expect(CONFIG, raises=SlurmUnreachable(["scontrol"], None, message="cannot reach 127.0.0.1:2223"))
    usage_refresh_task.delay()  # eager: one message per cluster, each run at once
    assert all(not fake.script for fake in slurmdbds.values())
    assert usage_status("cluster1").error == "" and usage_status("cluster1").taken_at >= before
    assert usage_status("cluster2").error == "cannot reach 127.0.0.1:2223"
    assert [p.cluster for p in team_usage("vision").clusters] == ["cluster1"]


def test_one_lock_per_cluster(slurmdbds, clean_cache):
    from portal.locks import redis_client

    held = redis_client().lock(usage.lock_name("cluster2"), timeout=10)
    assert held.acquire(blocking=False)
    try:
        slurmdbds["cluster1"].script = scripted_2205().script
        summed = usage_refresh(now=FINAL_NOW)  # every cluster: cluster2's refresh is another's now
        assert slurmdbds["cluster2"].calls == [] and summed["vision"].missing == {"cluster2": "not measured yet"}
    finally:
        held.release()


def test_the_api_has_each_clusters_figures(stored, client, django_user_model):
    dana = django_user_model.objects.create(username="dana", is_staff=True)
    Team.objects.create(name="vision")
    client.force_login(dana)
    body = client.get("/api/v1/teams/vision/usage").json()
    assert body["gpu_hours_used"] == 8.5 and body["gpu_hours_quota"] == 20.0
    assert [(c["cluster"], c["measured"], c["gpu_hours_left"], c["gpus_running"]) for c in body["clusters"]] == [
        ("cluster1", True, 2.5, 2),
        ("cluster2", True, 9.0, 1),
    ]
    _store({}, UsageStatus(taken_at=1.0, error="cannot reach", error_since=1.0), "cluster2")
    body = client.get("/api/v1/teams/vision/usage").json()
    assert body["clusters"][1] == {
        **{k: None for k in body["clusters"][1] if k not in ("cluster", "measured", "note", "error")},
        "cluster": "cluster2",
        "measured": False,
        "note": "not measured yet: reading it failed (cannot reach)",
        "error": "",
    }
    json.dumps(body)


def test_the_team_page_has_a_row_per_cluster(stored, client, django_user_model):
    carol = django_user_model.objects.create(username="carol")
    team = Team.objects.create(name="vision")
    Membership.objects.create(team=team, user=carol, role=Role.LEAD, source=Source.ADMIN)
    client.force_login(carol)
    html = client.get("/teams/vision/").content.decode()
    assert "Quota this period, all clusters" in html and "20.0 GPU-hours" in html and "11.5 GPU-hours" in html
    rows = {c: html.split(f'data-cluster="{c}"', 1)[1].split("</tr>", 1)[0] for c in ("cluster1", "cluster2")}
    assert "10.0 GPU-hours" in rows["cluster1"] and "7.5 GPU-hours" in rows["cluster1"] and "2.5 GPU-hours" in rows["cluster1"]
    assert "2 GPUs of 4" in rows["cluster1"] and "9.0 GPU-hours" in rows["cluster2"] and "1 GPU of 4" in rows["cluster2"]
    listing = client.get("/teams/").content.decode()
    assert "8.5 / 20.0" in listing and "all clusters" in listing
