"""When the monthly mail (teams/report/send.py) goes out: it waits on the 1st while a cluster's
accounting could not be read or was read before the month's accounting was final, a later hourly run
sends it, and on the 2nd what still waits goes out with the missing cluster's reason; a cluster that
failed is asked once per run, not once per team."""

from __future__ import annotations

import logging

import pytest
from django.core.cache import cache

from slurm import SlurmUnreachable
from teams.report.read import _KEY
from tests.notifications.conftest import smtp_sink  # noqa: F401  (a real SMTP server: the mails counted)
from tests.teams.test_report import SACCT, recording, script, world  # noqa: F401  (world: a fixture)

pytestmark = pytest.mark.django_db

REFUSED = SlurmUnreachable(["sacct"], None, message="connection refused")


def run_task(capture) -> None:
    """One hourly run of the beat task, its mails sent (they go out on commit)."""
    from teams.tasks import team_reports_task

    with capture(execute=True):
        team_reports_task()


def bodies(smtp_sink) -> dict[str, str]:  # noqa: F811
    return {m["To"]: m.get_body().get_content() for m in smtp_sink.messages}


@pytest.mark.unit_clock("2026-12-01T00:30:00Z")
def test_a_cluster_that_cannot_be_read_holds_the_mail_until_it_answers(
    world,  # noqa: F811
    slurmdbds,
    smtp_sink,  # noqa: F811
    django_capture_on_commit_callbacks,
    caplog,
):
    """The mail once went out at once with "cluster1: no figures (...)" and its key recorded, so the next
    run, with cluster1 answering, told nobody; and cluster1 was asked once per team (with a 120 s sacct
    timeout, a dozen teams spend the task's whole time limit)."""
    slurmdbds["cluster1"].expect(SACCT, raises=REFUSED)  # once only: a second ask would fail the test
    slurmdbds["cluster2"].expect(SACCT, stdout=recording("24.11", "sacct_nothing_found"))
    with caplog.at_level(logging.INFO, logger="teams.report.send"):
        run_task(django_capture_on_commit_callbacks)
    assert smtp_sink.messages == []
    assert len(slurmdbds["cluster1"].calls) == 1  # two teams, one read: its failure is remembered
    assert "team reports for 2026-11: 0 lead(s) told" in caplog.text
    assert "2 lead(s) wait: cluster1's accounting (sacct) could not be read: connection refused." in caplog.text
    assert "The next hourly run tries again" in caplog.text
    slurmdbds["cluster1"].expect(SACCT, stdout=recording("22.05", "sacct"))  # an hour on, cluster1 answers
    run_task(django_capture_on_commit_callbacks)  # cluster2's final read is kept: not asked again
    assert sorted(bodies(smtp_sink)) == ["carol@example.org", "nils@example.org"]
    carol = bodies(smtp_sink)["carol@example.org"]
    assert "cluster1: 0.06 GPU-hours" in carol and "no figures" not in carol
    run_task(django_capture_on_commit_callbacks)  # and never twice
    assert len(smtp_sink.messages) == 2


@pytest.mark.unit_clock("2026-12-02T00:30:00Z")
def test_on_the_2nd_a_mail_still_waiting_goes_out_saying_which_cluster_has_no_figures(
    world,  # noqa: F811
    slurmdbds,
    smtp_sink,  # noqa: F811
    django_capture_on_commit_callbacks,
):
    """The 1st passed without cluster1's figures: the leads are not left without a mail."""
    slurmdbds["cluster1"].expect(SACCT, raises=REFUSED)
    slurmdbds["cluster2"].expect(SACCT, stdout=recording("24.11", "sacct_nothing_found"))
    run_task(django_capture_on_commit_callbacks)
    carol = bodies(smtp_sink)["carol@example.org"]
    assert (
        "cluster1: no figures (cluster1's accounting (sacct) could not be read: connection refused; "
        "the report page shows them once it can be read)" in carol
    )
    assert "cluster2: 0.00 GPU-hours" in carol
    assert len(smtp_sink.messages) == 2 and len(slurmdbds["cluster1"].calls) == 1


@pytest.mark.unit_clock("2026-12-01T00:03:00Z")
def test_a_read_taken_before_the_month_is_final_holds_the_mail(
    world,  # noqa: F811
    slurmdbds,
    smtp_sink,  # noqa: F811
    django_capture_on_commit_callbacks,
    caplog,
    _unit_clock,
):
    """Beat runs the task hourly from whenever it started: a run at 00:03 once mailed figures from a
    read that missed the month's last records (accounting is final 15 min after the month's end)."""
    script(slurmdbds, "sacct", "sacct_nothing_found")
    with caplog.at_level(logging.INFO, logger="teams.report.send"):
        run_task(django_capture_on_commit_callbacks)
    assert smtp_sink.messages == []
    assert "the figures of cluster1, cluster2 were read before the month's accounting was final" in caplog.text
    _unit_clock.move_to("2026-12-01T01:03:00Z")  # the next hourly run; the 5 min reads have expired
    for cluster in ("cluster1", "cluster2"):
        cache.delete(_KEY.format(cluster=cluster, month="2026-11"))
    script(slurmdbds, "sacct", "sacct_nothing_found")
    run_task(django_capture_on_commit_callbacks)
    assert sorted(bodies(smtp_sink)) == ["carol@example.org", "nils@example.org"]
    assert "cluster1: 0.06 GPU-hours" in bodies(smtp_sink)["carol@example.org"]


@pytest.mark.unit_clock("2026-12-03T00:30:00Z")
def test_after_the_2nd_the_task_sends_nothing(world, smtp_sink, django_capture_on_commit_callbacks):  # noqa: F811
    run_task(django_capture_on_commit_callbacks)  # no sacct scripted: a read would fail the test
    assert smtp_sink.messages == []
