"""The portal's user: one row per OIDC identity (issuer + ``sub``), named by its Unix/Slurm username."""
from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db import models


class User(AbstractUser):
    """A person who logged in through the site's IdP.

    ``username`` is the Unix and Slurm user name, taken from the configured claim (default
    ``preferred_username``) and checked against the cluster at every login. The identity is
    ``(oidc_issuer, oidc_sub)``: a changed email or name at the IdP updates this row, never creates
    another, and an email address never links two identities.
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

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["oidc_issuer", "oidc_sub"],
                condition=~models.Q(oidc_sub=""),
                name="accounts_user_unique_oidc_identity",
            )
        ]

    def __str__(self) -> str:
        return self.username
