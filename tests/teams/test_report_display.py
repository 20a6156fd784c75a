"""How the monthly report (page, CSV, mail) words what it cannot count: a cluster that does not track
GPUs in its accounting (the Team page's rule), members without GPU jobs, a month nobody used GPUs in,
when sacct was read, a month older than the picker's list, and month texts that are refused."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime
from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup

from teams.models import Team
from teams.report.build import team_report
from teams.report.export import CSV_HEADER, TEAM_ROW, summary_lines
from teams.report.period import Month, parse_month
from teams.usage.cache import _store
from teams.usage.records import TeamUsage, UsageStatus
from tests.teams.test_report import NOV, part, script, world  # noqa: F401  (world: a fixture)

pytestmark = pytest.mark.django_db


def untracked(cluster: str) -> None:
    """The usage refresh's reading of ``cluster``: no ``gres/gpu`` in ``AccountingStorageTRES``."""
    start = datetime(2026, 12, 1, tzinfo=UTC)
    usage = TeamUsage(account="vision", tracked=False, period_start=start, period_end=None, taken_at=1.0)
    _store({"vision": usage}, UsageStatus(taken_at=1.0), cluster=cluster)


def section(client, cluster: str, month: str = "2026-11"):
    page = BeautifulSoup(client.get(f"/teams/vision/report/{month}/").content.decode(), "html.parser")
    return page.select_one(f"[data-testid=report-{cluster}]")


def test_a_cluster_that_does_not_track_gpus_says_so_instead_of_zero(world, slurmdbds, client):  # noqa: F811
    """The report once read "Nobody used GPUs on this cluster this month." and 0.00 GPU-hours where the
    Team page said "GPU usage is not tracked by this cluster"."""
    untracked("cluster1")
    script(slurmdbds, "sacct", "sacct_nothing_found")
    report = team_report(Team.objects.get(name="vision"), NOV)  # the month read, kept for the page and CSV
    one = part(report, "cluster1")
    assert (one.gpu_tracked, one.share, one.rank) == (False, None, None)
    assert part(report, "cluster2").gpu_tracked  # the rule is per cluster
    client.force_login(world["dana"])
    shown = section(client, "cluster1")
    assert "GPU usage is not tracked by this cluster (no gres/gpu in its AccountingStorageTRES)" in shown.get_text()
    assert "Nobody used GPUs" not in shown.get_text()
    alice = [cell.get_text() for cell in shown.select_one("[data-member=alice]").select("td")]
    assert alice[1] == "not tracked" and alice[-1] == "–" and "0.06" not in alice
    rows = list(csv.reader(io.StringIO(client.get("/teams/vision/report/2026-11.csv").content.decode())))
    by = {(r[0], r[1]): dict(zip(CSV_HEADER, r, strict=True)) for r in rows[1:]}
    assert (by[("cluster1", "alice")]["gpu_hours"], by[("cluster1", "alice")]["jobs"]) == ("", "2")
    total = by[("cluster1", TEAM_ROW)]
    assert (total["gpu_hours"], total["team_share_percent"], total["team_rank"]) == ("", "", "")
    assert summary_lines(report)[0] == (
        "cluster1: GPU-hours not tracked by this cluster (its accounting records no GPUs), 0.03 billed unit-hours, "
        "2 jobs (0 failed), median wait 23 s; no share or rank (GPU-hours not tracked)"
    )


def test_a_past_months_page_words_what_is_not_there(world, slurmdbds, client):  # noqa: F811
    """No GPU jobs: a dash, not "not measured" three times beside "GPU jobs not measured: 0"; nobody
    used GPUs "in November 2026", not "this month"; the read time with its zone, as the rest of the site."""
    script(slurmdbds, "sacct", "sacct_nothing_found")
    report = team_report(Team.objects.get(name="vision"), NOV)
    client.force_login(world["carol"])
    one = section(client, "cluster1")
    carol = [cell.get_text() for cell in one.select_one("[data-member=carol]").select("td")]
    assert carol[-4:] == ["–", "–", "–", "0"] and "not measured" not in carol
    alice = [cell.get_text() for cell in one.select_one("[data-member=alice]").select("td")]
    assert alice[-4:] == ["not measured", "not measured", "not measured", "2"]  # GPU jobs, none measured
    read_at = one.select_one("[data-testid=report-share] time")
    assert read_at["datetime"].startswith("2026-12-04T18:0") and read_at.get_text().endswith(" UTC")
    two = section(client, "cluster2")
    assert "Nobody used GPUs on this cluster in November 2026." in two.get_text()
    assert summary_lines(report)[1] == (
        "cluster2: 0.00 GPU-hours, 0.00 billed unit-hours, 0 jobs (0 failed), no job started; the cluster used no GPUs"
    )


def test_a_month_older_than_the_pickers_list_is_the_one_selected(world, client, monkeypatch):  # noqa: F811
    """/report/2020-01/ once showed the picker on this month (nothing selected): pressing Show jumped there."""
    from teams import report_views

    monkeypatch.setattr(report_views.team_report_read_task, "delay", lambda *args: None)
    client.force_login(world["carol"])
    page = BeautifulSoup(client.get("/teams/vision/report/2020-01/").content.decode(), "html.parser")
    chosen = page.select("#month option[selected]")
    assert [(o["value"], o.get_text()) for o in chosen] == [("2020-01", "January 2020")]
    assert len(page.select("#month option")) == 25  # the 24 offered, and this one


def test_a_long_month_text_is_not_echoed_whole(world, client):  # noqa: F811
    text = "2" * 5000
    with pytest.raises(ValueError, match="is not in YYYY-MM form") as refused:
        parse_month(text)
    assert len(str(refused.value)) < 150 and "'" + "2" * 30 + "…'" in str(refused.value)
    client.force_login(world["carol"])
    answer = client.get(f"/teams/vision/report/{text}/")
    assert answer.status_code == HTTPStatus.NOT_FOUND and "2" * 31 not in answer.content.decode()


def test_a_month_to_come_is_refused_saying_it_has_not_started():
    from teams.report.period import not_started

    now = datetime(2026, 12, 4, 18, tzinfo=UTC).timestamp()
    assert not_started(Month(2027, 3), now) == (
        "March 2027 has not started yet: this month is December 2026 (UTC); pick this month or one before it"
    )
    assert not_started(Month(2026, 12), now) == "" and not_started(NOV, now) == ""
