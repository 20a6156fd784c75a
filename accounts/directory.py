"""Who exists on the cluster: one user's Unix account, groups and Slurm accounts (teams).

Asked once per login through the Slurm gateway as the service user (no sudo): ``id -nG -- <user>``
(Unix account and groups) and ``sacctmgr --noheader --parsable2 show association where
user=<user> format=Account`` (Slurm accounts = teams).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from slurm import SlurmError, get_gateway


@dataclass(frozen=True)
class ClusterUser:
    """A user name as the cluster sees it. ``exists``: a Unix account; ``groups``: its Unix groups;
    ``accounts``: Slurm accounts it has an association in (sorted)."""

    username: str
    exists: bool
    groups: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()

    @property
    def in_users_group(self) -> bool:
        return settings.SLURM_GATEWAY["users_group"] in self.groups


def cluster_user_lookup(username: str) -> ClusterUser:
    """Look ``username`` up on the submit host. Raises :class:`~slurm.SlurmError` when the host
    cannot answer (a missing user is ``exists=False``, not an error)."""
    gateway = get_gateway()
    ident = gateway.run(["id", "-nG", "--", username], check=False)
    if ident.returncode != 0:
        if "no such user" in ident.err.lower():
            return ClusterUser(username=username, exists=False)
        raise SlurmError(ident.argv, ident.returncode, ident.out, ident.err)
    assoc = gateway.run(
        ["sacctmgr", "--noheader", "--parsable2", "show", "association", "where", f"user={username}", "format=Account"]
    )
    accounts = sorted({line.strip() for line in assoc.out.splitlines() if line.strip()})
    return ClusterUser(username=username, exists=True, groups=tuple(ident.out.split()), accounts=tuple(accounts))
