"""The site's price of Slurm's billed units: ``PORTAL_BILLING_RATE``, written ``<amount> <currency>``
(``0.12 EUR``: 0.12 euro per billed unit-hour, the ISO 4217 code in capitals). Empty (the default):
no price, so pages, the API and the CLI show billed units only and never a currency.

A billed unit-hour is one unit of Slurm's ``billing`` TRES held for an hour; a job's billed
unit-hours are its ``billing`` (sacct ``AllocTRES``, weighed by the partition's ``TRESBillingWeights``)
x its elapsed hours, what Slurm charges its association (``GrpTRESMins=billing=N`` counts minutes).
A malformed rate is refused at start-up by the system check ``portal.E040`` with what to write."""

from __future__ import annotations

import re
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal

from django.core.checks import Error, register

__all__ = ["Cost", "Rate", "billing_rate", "cost_of", "parse_rate"]

_RATE = re.compile(r"(?P<amount>[0-9]{1,9}(?:\.[0-9]{1,6})?) (?P<currency>[A-Z]{3})")
#: What every refusal ends with.
EXAMPLE = "Write the price of one billed unit-hour and an ISO 4217 currency code, e.g. PORTAL_BILLING_RATE=0.12 EUR, or leave it empty for no price."
CENT = Decimal("0.01")


@dataclass(frozen=True)
class Rate:
    """``amount`` in ``currency`` (ISO 4217 code) per billed unit-hour; ``amount`` > 0."""

    amount: Decimal
    currency: str

    def __str__(self) -> str:
        return f"{self.amount} {self.currency} per billed unit-hour"


@dataclass(frozen=True)
class Cost:
    """Money: ``amount`` rounded to the cent (half up) in ``currency``."""

    amount: Decimal
    currency: str

    def __str__(self) -> str:
        return f"{self.amount:.2f} {self.currency}"

    def to_dict(self) -> dict:
        """As the API writes it: ``{"amount": 1.23, "currency": "EUR"}``."""
        return {"amount": float(self.amount), "currency": self.currency}


def parse_rate(text: str | None) -> Rate | None:
    """``"0.12 EUR"`` -> ``Rate(Decimal("0.12"), "EUR")``; ``""`` / ``None`` -> ``None`` (no price).
    Strict: one space between a plain decimal (at most 6 decimals) and three capital letters. Raises
    ``ValueError`` with a sentence that says what is wrong and what to write."""
    value = (text or "").strip()
    if not value:
        return None
    match = _RATE.fullmatch(value)
    shown = value[:40]
    if match is None:
        raise ValueError(f"PORTAL_BILLING_RATE {shown!r} is not '<amount> <currency>'. {EXAMPLE}")
    amount = Decimal(match["amount"])
    if amount <= 0:
        raise ValueError(f"PORTAL_BILLING_RATE {shown!r} is not a price above 0. {EXAMPLE}")
    return Rate(amount, match["currency"])


def billing_rate() -> Rate | None:
    """The site's rate (``settings.PORTAL_BILLING_RATE``), ``None`` when none is set or it is malformed
    (refused at start-up by ``portal.E040``: never a guessed price)."""
    from django.conf import settings

    try:
        return parse_rate(getattr(settings, "PORTAL_BILLING_RATE", ""))
    except ValueError:
        return None


def cost_of(billed_unit_hours: float | None, rate: Rate | None = None) -> Cost | None:
    """``billed_unit_hours`` x the site's rate (or ``rate``), to the cent; ``None`` when either is
    not known (no rate set: the figure stays in billed units)."""
    rate = rate or billing_rate()
    if rate is None or billed_unit_hours is None:
        return None
    amount = (Decimal(str(billed_unit_hours)) * rate.amount).quantize(CENT, rounding=ROUND_HALF_UP)
    return Cost(amount, rate.currency)


@register("portal")
def check_billing_rate(app_configs=None, **kwargs):
    """portal.E040: ``PORTAL_BILLING_RATE`` set but not ``<amount> <ISO currency>``."""
    from django.conf import settings

    try:
        parse_rate(getattr(settings, "PORTAL_BILLING_RATE", ""))
    except ValueError as exc:
        return [Error(str(exc), hint="docs/admin-guide.md, 'Billed units and cost'.", id="portal.E040")]
    return []
