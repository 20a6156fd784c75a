"""The portal's user: one row per OIDC identity (issuer + ``sub``), named by its Unix/Slurm username."""

from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db import models


class LinkState(models.TextChoices):
    """Whether a sign-in identity may act as the cluster account named by ``User.username``."""

    LINKED = "linked", "Linked to a cluster account"
    PENDING = "pending", "Waiting for an administrator"
    REFUSED = "refused", "Refused by an administrator"


#: Prefix of the placeholder ``username`` of an identity that is not linked yet. It contains a dot,
#: which no POSIX user name accepted by the portal has, so it can never name a cluster account.
UNLINKED_PREFIX = "unlinked."


class User(AbstractUser):
    """A person who logged in through the site's IdP.

    The identity is ``(oidc_issuer, oidc_sub)``: a changed email or name at the IdP updates this
    row, never creates another, and an email address never links two identities.

    ``username`` is the Unix and Slurm user name once ``link_state`` is ``linked``: taken from the
    site's directory claim (``PORTAL_OIDC_LINK_CLAIM``) or chosen by an admin who approved the link,
    never from a name the person can edit. Until then it is a placeholder starting with
    :data:`UNLINKED_PREFIX` and ``requested_username`` holds the name the IdP suggested
    (``PORTAL_OIDC_USERNAME_CLAIM``), for the admin to check.
    Rows made outside sign-in (admin, fixtures) default to ``linked``.
    """

    oidc_issuer = models.CharField(max_length=255, blank=True, default="")
    oidc_sub = models.CharField(max_length=255, blank=True, default="")
    display_name = models.CharField(max_length=255, blank=True, default="")
    email_verified = models.BooleanField(default=False)
    #: Group names from the ``groups`` claim at the last login (a list of strings).
    oidc_groups = models.JSONField(default=list, blank=True)
    #: Slurm accounts (teams) the user has an association in, from ``sacctmgr`` at the last login.
    slurm_accounts = models.JSONField(default=list, blank=True)
    #: An admin's decision on admin rights, overriding the groups claim (None = follow the claim).
    admin_override = models.BooleanField(null=True, blank=True, default=None)
    link_state = models.CharField(max_length=16, choices=LinkState.choices, default=LinkState.LINKED, db_index=True)
    #: The cluster user name the IdP suggested at the last sign-in (not trusted; shown to admins).
    requested_username = models.CharField(max_length=150, blank=True, default="")

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["oidc_issuer", "oidc_sub"],
                condition=~models.Q(oidc_sub=""),
                name="accounts_user_unique_oidc_identity",
            )
        ]

    @property
    def is_linked(self) -> bool:
        """True when this identity may act as the cluster account ``username``."""
        return self.link_state == LinkState.LINKED

    def __str__(self) -> str:
        return self.username
