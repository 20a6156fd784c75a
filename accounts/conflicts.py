"""Sign-in refusals a person must look at: two identities (issuer + ``sub``) want one cluster
account, or a linked identity's directory claim changed. :func:`conflict_of` gathers the facts the
portal's admins are told (:data:`accounts.events.identity_conflict`)."""

from __future__ import annotations

from django.conf import settings

from .claims import LoginRefused
from .events import IdentityConflict
from .models import User

#: Refusals a person must look at: two identities want one account, or a directory claim changed.
CONFLICT_CODES = frozenset({"identity_conflict", "username_changed"})


def conflict_of(*, claims: dict, refusal: LoginRefused) -> IdentityConflict:
    """The facts of a conflict refusal: the identity that tried (its claims), the account it named
    (``refusal.account``), which claim named it, the identity that account is linked to, and for a
    changed directory claim the account the identity is linked to now."""
    issuer, sub = str(claims.get("iss") or ""), str(claims.get("sub") or "")
    conf = settings.PORTAL_OIDC
    claim = next((c for c in (conf["link_claim"], conf["username_claim"]) if c and claims.get(c) == refusal.account), "")
    holder = User.objects.filter(username=refusal.account).exclude(oidc_issuer=issuer, oidc_sub=sub).first()
    current = User.objects.filter(oidc_issuer=issuer, oidc_sub=sub).values_list("username", flat=True).first()
    return IdentityConflict(
        code=refusal.code,
        issuer=issuer,
        sub=sub,
        account=refusal.account,
        claim=claim,
        holder_issuer=holder.oidc_issuer if holder else "",
        holder_sub=holder.oidc_sub if holder else "",
        current_account=(current or "") if refusal.code == "username_changed" else "",
    )
