"""The monthly report's mail (teams/report/send.py): its links are whole addresses on the portal's
``PORTAL_SITE_URL``, as every mail's (notifications/mail.py), since a mail has no page to be
relative to."""

from __future__ import annotations

import pytest

from notifications.models import Notification
from teams.models import Membership, Role, Source, Team
from teams.report.period import Month
from teams.report.send import team_report_send
from tests.conftest import FIXTURES
from tests.fakes import ANY

pytestmark = pytest.mark.django_db

SACCT = ["sacct", "--json", "-X", "-D", "-a", "-S", ANY, "-E", ANY]


def test_the_mail_gives_the_csv_as_a_whole_address(slurmdbds, django_user_model, settings, clean_cache):
    """The CSV was named by its path alone ("CSV: /teams/vision/report/2026-11.csv"): no link in a mail."""
    settings.PORTAL_SITE_URL = "https://gpu.example.org/"  # a trailing slash, as an admin may write it
    for cluster, release in [("cluster1", "22.05"), ("cluster2", "24.11")]:
        slurmdbds[cluster].expect(SACCT, stdout=(FIXTURES / "slurm" / release / "sacct_nothing_found.json").read_text())
    team = Team.objects.create(name="vision")
    carol = django_user_model.objects.create(username="carol", email="carol@example.org")
    Membership.objects.create(user=carol, team=team, role=Role.LEAD, source=Source.ADMIN)
    assert team_report_send(team, Month(2026, 11)) == 1
    row = Notification.objects.get(user=carol)
    assert "CSV: https://gpu.example.org/teams/vision/report/2026-11.csv)" in row.body
    assert row.link == "/teams/vision/report/2026-11/"  # the page's link stays a path: the mail adds the site
