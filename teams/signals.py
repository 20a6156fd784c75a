"""Once an identity is linked to a cluster account (at each SSO sign-in, and when an admin links it),
the user's team memberships follow Slurm's associations and the ``groups`` claim."""

from django.dispatch import receiver

from accounts.events import identity_linked

from .services import memberships_from_claims, memberships_from_slurm


@receiver(identity_linked)
def memberships_follow_claims(sender, user, **kwargs) -> None:
    """Memberships from Slurm's associations (``slurm_accounts``) and the ``groups`` claim."""
    memberships_from_slurm(user=user, accounts=list(user.slurm_accounts))
    memberships_from_claims(user=user, groups=list(user.oidc_groups))
