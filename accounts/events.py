"""Signals other apps may follow (they import this module, never accounts' views or services)."""

from dataclasses import dataclass

from django.dispatch import Signal

#: Sent with ``user=`` after an SSO sign-in of a linked identity and after an admin links one: the
#: user's claims (``oidc_groups``, ``slurm_accounts``) may now count. Never sent for an unlinked identity.
identity_linked = Signal()


@dataclass(frozen=True)
class IdentityConflict:
    """A sign-in refused because two identities (issuer + ``sub``) want one cluster account, or a
    linked identity's directory claim changed: a directory mistake or an attack, for a person to check.

    ``code``: ``identity_conflict`` or ``username_changed`` (the :class:`~accounts.claims.LoginRefused`
    code); ``issuer``/``sub``: the identity that tried to sign in (from the ID token the IdP signed);
    ``account``: the cluster account its claims named; ``claim``: which claim named it;
    ``holder_issuer``/``holder_sub``: the identity ``account`` is linked to (``""`` when none);
    ``current_account``: for ``username_changed``, the account the identity is linked to now."""

    code: str
    issuer: str
    sub: str
    account: str
    claim: str = ""
    holder_issuer: str = ""
    holder_sub: str = ""
    current_account: str = ""


#: Sent with ``conflict=`` (an :class:`IdentityConflict`) after the refused sign-in's ``login.refused``
#: audit row is written; the notifications app tells the portal's admins.
identity_conflict = Signal()
