"""The portal's admins are told of sign-in identity conflicts: a second identity (issuer + ``sub``)
whose claims name a cluster account already linked (``identity_conflict``), or a linked identity
whose directory claim changed (``username_changed``). Either is a directory mistake or an attempt to
take an account over; the refused sign-in's ``login.refused`` audit row is written first
(:func:`accounts.services.login_refused_audit`), then :data:`accounts.events.identity_conflict` is
sent and :func:`identity_conflict_notify` runs.

One notification per admin, identity and day (UTC), whatever the number of attempts: key
``identity:<first 16 hex of sha256("<issuer>#<sub>")>:conflict:<YYYY-MM-DD>:<admin user name>``.
"""

from __future__ import annotations

import hashlib
import logging

from django.db import transaction
from django.dispatch import receiver
from django.urls import reverse
from django.utils import timezone as djtz
from django.utils.http import urlencode

from accounts.events import IdentityConflict, identity_conflict
from accounts.selectors import portal_admins

from .models import NotificationKind
from .services import notify

logger = logging.getLogger(__name__)


def _who(issuer: str, sub: str) -> str:
    return f"issuer {issuer or '(none)'}, sub {sub or '(none)'}"


def conflict_text(conflict: IdentityConflict) -> tuple[str, str]:
    """``(subject, body)`` of the notification: both identities' issuer and ``sub``, the claimed
    account (and the claim that named it), and what to check."""
    named = f"'{conflict.account}'" + (f" (claim {conflict.claim})" if conflict.claim else "")
    holder = (
        f"It is linked to the identity {_who(conflict.holder_issuer, conflict.holder_sub)}."
        if conflict.holder_sub
        else "No identity is linked to it."
    )
    if conflict.code == "username_changed":
        subject = f"Sign-in refused: a directory claim changed to '{conflict.account}'"
        first = (
            f"The identity {_who(conflict.issuer, conflict.sub)}, linked to the cluster account "
            f"'{conflict.current_account}', signed in with claims that now name the account {named}. {holder}"
        )
        check = (
            "What to check: ask the site's directory team whether this person's cluster account really changed. "
            "If it did, the portal account is moved by hand (jobs and files belong to the old name); if it did "
            "not, the directory entry is wrong or was changed by someone else: have it corrected."
        )
    else:
        subject = f"Sign-in refused: two identities claim the cluster account '{conflict.account}'"
        first = (
            f"The identity {_who(conflict.issuer, conflict.sub)} signed in with claims that name the account {named}. {holder}"
        )
        check = (
            "What to check: whether both identities are the same person (a second IdP account, or a new IdP: "
            "then an admin moves the link) or the directory names this account for the wrong person. If nobody "
            "expects the second sign-in, treat it as an attempt to take the account over: ask the identity team "
            "who owns that sub."
        )
    trail = "Every attempt is in the audit trail (action login.refused)."
    return subject, f"{first}\n\n{check}\n\n{trail}"


def identity_conflict_notify(conflict: IdentityConflict) -> int:
    """Tell every portal admin (:func:`accounts.selectors.portal_admins`) of ``conflict``, once per
    identity and day (module docstring). Returns how many notifications were made (0 when the day's
    are made already). Never raises: the refusal page must still be shown (a failure is logged)."""
    made = 0
    try:
        identity = hashlib.sha256(f"{conflict.issuer}#{conflict.sub}".encode()).hexdigest()[:16]
        day = djtz.now().date().isoformat()
        subject, body = conflict_text(conflict)
        link = reverse("audit_list") + "?" + urlencode({"action": "login.refused", "target": f"#{conflict.sub}"[:80]})
        for admin in portal_admins():
            with transaction.atomic():
                _, created = notify(
                    user=admin,
                    kind=NotificationKind.IDENTITY_CONFLICT,
                    key=f"identity:{identity}:conflict:{day}:{admin.username}",
                    subject=subject,
                    body=body,
                    link=link,
                )
            made += created
    except Exception:  # noqa: BLE001 - logged; the audit row is written, the next attempt tries again
        logger.exception("telling the admins of an identity conflict over %r failed", conflict.account)
    return made


@receiver(identity_conflict)
def _on_identity_conflict(sender, conflict: IdentityConflict, **kwargs) -> None:
    identity_conflict_notify(conflict)
