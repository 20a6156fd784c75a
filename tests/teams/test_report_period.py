"""The month a report's address names (teams/report/period.py ``parse_month``): ``YYYY-MM`` in the
digits 0-9 only, and a refusal that says what was wrong and the form to write, as the pages' 404."""

from __future__ import annotations

from http import HTTPStatus

import pytest

from teams.models import Team
from teams.report.period import Month, parse_month

FULL_WIDTH = "\uff12\uff10\uff12\uff16-\uff11\uff11"  # 2026-11 in full-width digits
ARABIC_INDIC = "\u0662\u0660\u0662\u0666-\u0661\u0661"  # 2026-11 in Arabic-Indic digits


def test_a_month_in_ascii_digits_is_read():
    assert parse_month("2026-11") == Month(2026, 11)


@pytest.mark.parametrize(
    ("text", "wrong"),
    [
        (FULL_WIDTH, "digits other than 0-9"),  # once read as November 2026: int() and \d take any digit
        (ARABIC_INDIC, "digits other than 0-9"),
        ("2026-\uff11\uff11", "digits other than 0-9"),
        ("2026-13", "month 13 is not one of 01 to 12"),
        ("1969-12", "year 1969 is before 1970"),
        ("26-1", "is not in YYYY-MM form"),
        ("", "is not in YYYY-MM form"),
    ],
)
def test_a_month_not_in_ascii_yyyy_mm_is_refused_saying_why(text, wrong):
    with pytest.raises(ValueError, match=wrong) as refused:
        parse_month(text)
    assert "write the month as YYYY-MM with the digits 0-9, e.g. 2026-11" in str(refused.value)


@pytest.mark.django_db
def test_the_pages_answer_a_month_in_other_digits_with_a_404_that_says_why(client, django_user_model, monkeypatch):
    """The page, the CSV and the month picker: a 404 with the sentence, never a report (nor a 500)."""
    from teams import report_views

    asked: list[tuple] = []
    monkeypatch.setattr(report_views.team_report_read_task, "delay", lambda *args: asked.append(args))
    Team.objects.create(name="vision")
    client.force_login(django_user_model.objects.create(username="dana", is_staff=True))
    for response in (
        client.get(f"/teams/vision/report/{FULL_WIDTH}/"),
        client.get(f"/teams/vision/report/{FULL_WIDTH}.csv"),
        client.get("/teams/vision/report/", {"month": FULL_WIDTH}),
    ):
        assert response.status_code == HTTPStatus.NOT_FOUND
        text = response.content.decode()
        assert "has digits other than 0-9" in text and "write the month as YYYY-MM with the digits 0-9" in text
    assert asked == []  # no sacct read was asked for
