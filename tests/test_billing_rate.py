"""PORTAL_BILLING_RATE: "<amount> <ISO currency>" read strictly, a malformed value refused at start-up
(portal.E040) with what to write; no rate, no money."""

from __future__ import annotations

from decimal import Decimal

import pytest
from django.core.checks import run_checks

from portal.billing import Rate, cost_of, parse_rate


@pytest.mark.parametrize(
    "text, rate",
    [("0.12 EUR", Rate(Decimal("0.12"), "EUR")), (" 3 CHF ", Rate(Decimal("3"), "CHF")), ("", None), (None, None)],
)
def test_a_rate_is_read(text, rate):
    assert parse_rate(text) == rate


@pytest.mark.parametrize(
    "text", ["0.12", "EUR 0.12", "0.12 eur", "0.12  EUR", "0,12 EUR", "€0.12", "0.12 EURO", "0 EUR", "-1 EUR", "1e3 USD"]
)
def test_a_malformed_rate_is_refused_with_the_fix(text):
    with pytest.raises(ValueError, match=r"PORTAL_BILLING_RATE .* e\.g\. PORTAL_BILLING_RATE=0\.12 EUR"):
        parse_rate(text)


def test_the_system_check_refuses_a_malformed_rate_at_start_up(settings):
    settings.PORTAL_BILLING_RATE = "12 euros"
    [error] = [m for m in run_checks(tags=["portal"]) if m.id == "portal.E040"]
    assert "'12 euros' is not '<amount> <currency>'" in error.msg and "ISO 4217" in error.msg
    settings.PORTAL_BILLING_RATE = "0.12 EUR"
    assert [m for m in run_checks(tags=["portal"]) if m.id == "portal.E040"] == []


def test_cost_is_to_the_cent_and_only_with_a_rate(settings):
    rate = Rate(Decimal("0.12"), "EUR")
    assert str(cost_of(10.0, rate)) == "1.20 EUR" and str(cost_of(0.125, rate)) == "0.02 EUR"
    assert cost_of(None, rate) is None
    settings.PORTAL_BILLING_RATE = ""
    assert cost_of(10.0) is None  # never an invented currency
    settings.PORTAL_BILLING_RATE = "bad"
    assert cost_of(10.0) is None  # refused at start-up; never a guessed price
