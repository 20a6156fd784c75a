"""Who exists on the cluster: one user's Unix account (uid, groups) and Slurm accounts (teams), and
which accounts the portal never acts as (system accounts).

Asked once per login through the Slurm gateway as the service user (no sudo):
``env LC_ALL=C id -- <user>`` (uid and Unix groups, in the C locale so the labels are coreutils'
``uid=``/``gid=``/``groups=``), ``sacctmgr --noheader --parsable2 show user where name=<user>
withassoc format=DefaultAccount,Account`` (Slurm accounts = teams, and which is the user's default) and,
unless the site set
``PORTAL_ACCOUNT_UID_MIN``, ``cat /etc/login.defs`` (its ``UID_MIN``: where personal accounts start).
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from django.conf import settings

from slurm import SlurmError, get_gateway
from slurm.clusters import ClusterConfigError, clusters

from .claims import LoginRefused

logger = logging.getLogger(__name__)

#: The command asked for one user (the name is appended after ``--``).
ID_ARGV = ("env", "LC_ALL=C", "id", "--")
#: One user's Slurm associations and default account (``name=<user>`` goes after ``where``).
ASSOC_ARGV = ("sacctmgr", "--noheader", "--parsable2", "show", "user", "where", "withassoc", "format=DefaultAccount,Account")

#: The file whose ``UID_MIN`` says where the submit host's personal accounts start (shadow's
#: login.defs(5); ``useradd`` gives new users uids from there).
LOGIN_DEFS_ARGV = ("cat", "/etc/login.defs")
#: ``UID_MIN`` when login.defs names none or cannot be read: shadow's own default.
DEFAULT_UID_MIN = 1000
_UID_MIN_RE = re.compile(r"^[ \t]*UID_MIN[ \t]+(\d+)[ \t]*$", re.MULTILINE)

#: ``uid=1001(alice) gid=1002(alice) groups=1002(alice),1001(slurmusers)``, optionally followed by
#: `` context=...`` (SELinux). A group name may hold spaces (sssd: ``domain users``), never ``)``.
_ID_RE = re.compile(r"^uid=(\d+)(?:\([^)]*\))? gid=\d+(?:\([^)]*\))?(?: groups=(.*?))?(?: context=\S+)?$")
_GROUP_RE = re.compile(r"\d+\(([^)]*)\)")


@dataclass(frozen=True)
class ClusterUser:
    """A user name as the cluster sees it. ``exists``: a Unix account; ``uid``: its user id
    (``id``; ``None`` when it does not exist); ``groups``: its Unix group names (those ``id`` could
    name, primary group included); ``accounts``: Slurm accounts it has an association in, its Slurm
    ``DefaultAccount`` first (what ``sbatch`` without ``--account`` bills, and the team the portal's
    forms choose first), then the others sorted."""

    username: str
    exists: bool
    groups: tuple[str, ...] = ()
    accounts: tuple[str, ...] = ()
    uid: int | None = None
    #: Where personal accounts start on the submit host (:func:`uid_min`); ``None`` when not asked.
    uid_min: int | None = None

    @property
    def in_users_group(self) -> bool:
        return settings.PORTAL_SLURM_GATEWAY["users_group"] in self.groups


def parse_id(text: str) -> tuple[int, tuple[str, ...]]:
    """``(uid, group names)`` from the first line of ``env LC_ALL=C id -- <user>`` (GNU coreutils
    and busybox print the same shape). A group with no name (a bare gid) is left out. Raises
    ``ValueError`` when the line has another shape."""
    line = text.strip().splitlines()[0] if text.strip() else ""
    match = _ID_RE.match(line)
    if match is None:
        raise ValueError(f"not the output of id: {line[:120]!r}")
    return int(match.group(1)), tuple(_GROUP_RE.findall(match.group(2) or ""))


def denied_account_names() -> frozenset[str]:
    """Names the portal never acts as: ``PORTAL_ACCOUNT_DENY`` and every configured cluster's
    service user (``ssh_user``; the global ``PORTAL_SSH_USER`` when the clusters file cannot be read,
    which the system check reports)."""
    names = set(settings.PORTAL_ACCOUNT_DENY) | {settings.PORTAL_SLURM_GATEWAY["ssh_user"]}
    try:
        names |= {c.gateway["ssh_user"] for c in clusters()}
    except ClusterConfigError:
        pass
    return frozenset(n for n in names if n)


def parse_uid_min(text: str) -> int | None:
    """``UID_MIN`` from the text of a login.defs (the first uncommented ``UID_MIN <digits>`` line),
    or ``None`` when it names none."""
    match = _UID_MIN_RE.search(text)
    return int(match.group(1)) if match else None


def uid_min(gateway) -> int:
    """Where personal accounts start on ``gateway``'s submit host: ``PORTAL_ACCOUNT_UID_MIN`` when
    the site set it, else ``UID_MIN`` of the host's /etc/login.defs (one ``cat`` through the gateway),
    else :data:`DEFAULT_UID_MIN` (1000, shadow's default) when the file names none or cannot be read
    (logged). Never raises for an unreadable file; :class:`~slurm.SlurmError` only when the host
    cannot be reached."""
    if settings.PORTAL_ACCOUNT_UID_MIN is not None:
        return int(settings.PORTAL_ACCOUNT_UID_MIN)
    defs = gateway.run(list(LOGIN_DEFS_ARGV), check=False)
    found = parse_uid_min(defs.out) if defs.returncode == 0 else None
    if found is None:
        logger.warning(
            "UID_MIN not read from the submit host's /etc/login.defs (exit %s: %s); using %s",
            defs.returncode,
            defs.err.strip()[:200] or "no UID_MIN line",
            DEFAULT_UID_MIN,
        )
        return DEFAULT_UID_MIN
    return found


def system_account_reason(username: str, uid: int | None = None, minimum: int | None = None) -> str | None:
    """Why ``username`` is a system account the portal never links or acts as, in a few words (for
    parentheses after "is a system account"), or ``None`` when it may be a person's account.

    ``uid``: from ``id`` on the submit host (``None``: not asked yet, only the name is checked);
    ``minimum``: where personal accounts start there (:func:`uid_min`; ``None``: the site's
    ``PORTAL_ACCOUNT_UID_MIN``, else 1000). A system account is one named in
    :func:`denied_account_names`, or one whose uid is below that minimum."""
    if username in denied_account_names():
        return "named in the portal's list of system and service accounts: root, Slurm, munge, databases, the portal's own"
    if minimum is None:
        site = settings.PORTAL_ACCOUNT_UID_MIN
        minimum = int(site) if site is not None else DEFAULT_UID_MIN
    if uid is not None and uid < minimum:
        return f"uid {uid}, below {minimum}, where personal accounts start on this cluster"
    return None


def accounts_default_first(text: str) -> tuple[str, ...]:
    """The accounts of ``sacctmgr --parsable2 show user ... withassoc format=DefaultAccount,Account``
    (``<default>|<account>`` per association): the default first when the user has an association
    in it, then the others sorted. A sort alone put a team named ``a-...`` before the one the user's
    jobs go to by default, so a new team silently became the forms' first choice."""
    rows = [line.strip().split("|") for line in text.splitlines() if line.strip()]
    accounts = sorted({row[1] for row in rows if len(row) > 1 and row[1]})
    default = rows[0][0] if rows else ""
    return tuple([default] if default in accounts else []) + tuple(a for a in accounts if a != default)


def cluster_user_lookup(username: str) -> ClusterUser:
    """Look ``username`` up on the submit host of the default cluster. Raises
    :class:`~slurm.SlurmError` when the host cannot answer or ``id`` answers something that is not
    its usual line (a missing user is ``exists=False``, not an error)."""
    gateway = get_gateway()
    ident = gateway.run([*ID_ARGV, username], check=False)
    if ident.returncode != 0:
        if "no such user" in ident.err.lower():
            return ClusterUser(username=username, exists=False)
        raise SlurmError(ident.argv, ident.returncode, ident.out, ident.err)
    try:
        uid, groups = parse_id(ident.out)
    except ValueError as exc:
        raise SlurmError(ident.argv, ident.returncode, ident.out, ident.err, message=str(exc)) from None
    assoc = gateway.run([*ASSOC_ARGV[:6], f"name={username}", *ASSOC_ARGV[6:]])
    accounts = accounts_default_first(assoc.out)
    return ClusterUser(username=username, exists=True, groups=groups, accounts=tuple(accounts), uid=uid, uid_min=uid_min(gateway))


#: What a person refused a system account is told to do (at sign-in, and by the hub).
SYSTEM_ACCOUNT_HINT = (
    "Use your personal cluster account: ask your identity team to name your own account (never root or a "
    "service account) in your directory entry, or a portal admin to link this sign-in to your personal account."
)
#: What the admin who tried to link one is told.
SYSTEM_ACCOUNT_ADMIN_HINT = "Choose the person's own, personal cluster account instead."


def system_account_refusal(username: str, reason: str) -> LoginRefused:
    """The sign-in refusal (code ``system_account``) for ``username``, a system account for ``reason``
    (:func:`system_account_reason`'s words): it never suggests adding the account to a group."""
    return LoginRefused(
        "system_account",
        f"The cluster account '{username}' is a system account ({reason}). System accounts cannot be used "
        "with the portal, whatever groups they are in.",
        SYSTEM_ACCOUNT_HINT,
        account=username,
    )


def cluster_account_check(username: str, *, known: bool) -> ClusterUser | None:
    """The submit host's view of ``username``; refuses a system account (:func:`system_account_reason`:
    the deny list before the host is asked, then the uid ``id`` gave, both before the group), a
    missing account, or one outside the users group. ``None`` when the host cannot answer and
    ``known`` (an already linked user keeps the cached facts)."""
    if (reason := system_account_reason(username)) is not None:
        raise system_account_refusal(username, reason)
    try:
        cluster_user = cluster_user_lookup(username)
    except SlurmError as exc:
        logger.warning("login of %s: cluster lookup failed: %s", username, exc)
        if known:
            return None
        raise LoginRefused(
            "cluster_unreachable",
            "The cluster could not be reached to check your account, and this is your first sign-in.",
            "Try again in a few minutes; if it persists, tell the cluster staff.",
            for_admin=f"The cluster could not be reached to check the account '{username}'. Try again in a few minutes.",
        ) from exc
    if not cluster_user.exists:
        raise LoginRefused(
            "not_provisioned",
            f"There is no account named '{username}' on the cluster.",
            "Ask the cluster staff to create your cluster account; then sign in again.",
            for_admin=f"There is no account named '{username}' on the cluster. Check the name; if it is right, "
            "the account must be made on the cluster before it can be linked.",
        )
    if (reason := system_account_reason(username, cluster_user.uid, cluster_user.uid_min)) is not None:
        raise system_account_refusal(username, reason)
    group = settings.PORTAL_SLURM_GATEWAY["users_group"]
    if not cluster_user.in_users_group:
        raise LoginRefused(
            "not_provisioned",
            f"The cluster account '{username}' exists but is not in the group '{group}', so the portal cannot run jobs as you.",
            f"Ask the cluster staff to add '{username}' to the group '{group}'.",
            for_admin=f"The cluster account '{username}' exists but is not in the group '{group}', so the portal "
            "cannot run jobs as it. Add it to that group on the cluster, then link it.",
        )
    return cluster_user
