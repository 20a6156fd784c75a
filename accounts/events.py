"""Signals other apps may follow (they import this module, never accounts' views or services)."""

from django.dispatch import Signal

#: Sent with ``user=`` after an SSO sign-in of a linked identity and after an admin links one: the
#: user's claims (``oidc_groups``, ``slurm_accounts``) may now count. Never sent for an unlinked identity.
identity_linked = Signal()
