"""What the staff's Slurm actions share (:mod:`ops.nodes`, :mod:`ops.reservations`): who may act,
which cluster, the text checks, and running one ``scontrol`` through the gateway as the service user.

The actions run in the request, bounded: one ``scontrol`` (update a node, create or delete a
reservation) is a single RPC that slurmctld answers in milliseconds; the gateway's deadline for it is
:data:`ACTION_TIMEOUT` seconds, so a page never waits longer, and Slurm's own answer (its refusal
in its words) is on the page at once. The service user must be a Slurm operator or administrator
(``sacctmgr ... set AdminLevel=Administrator``: cluster/up.sh, docs/cluster-page.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from django.core.exceptions import PermissionDenied

from portal.refusals import Problem, Refused
from slurm import SlurmError, SlurmTimeout, get_gateway
from slurm.clusters import Cluster, cluster_get
from slurm.errors import controller_unreachable
from slurm.snapshot import ClusterSnapshot, snapshot_load

#: Seconds the gateway waits for one action's scontrol (its ssh connection included when it has to
#: open one); past it the page says Slurm did not answer in time.
ACTION_TIMEOUT = 15.0
#: Control characters (C0, DEL, C1) and the Unicode line and paragraph separators: never in a reason
#: (Slurm keeps it on one line in its state file and in ``sinfo``'s columns).
CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
#: Longest reason the page accepts (characters).
REASON_MAX = 200


def staff_only(by, what: str) -> None:
    """``PermissionDenied`` unless ``by`` is a signed-in portal admin (``is_staff``)."""
    if by is None or not getattr(by, "is_authenticated", False) or not by.is_staff:
        raise PermissionDenied(f"{what} is done by portal admins.")


def configured(cluster: str) -> Cluster:
    """The configured cluster named ``cluster``, or :class:`Refused` naming the ones there are."""
    found = cluster_get(cluster) if cluster else None
    if found is None:
        from slurm.clusters import cluster_names

        raise Refused(
            Problem("cluster", f"There is no cluster {cluster[:40]!r} here; choose one of {', '.join(cluster_names())}.")
        )
    return found


def current_snapshot(cluster: Cluster) -> ClusterSnapshot:
    """The cluster's stored snapshot (without the queue), or :class:`Refused` before its first poll."""
    snapshot = snapshot_load(with_jobs=False, cluster=cluster.name)
    if snapshot is None or not snapshot.taken_at:
        raise Refused(
            Problem("", f"The portal has not read {cluster.label} yet (no poll so far); try again once the page shows its nodes.")
        )
    return snapshot


def check_text(value: str, *, field: str, what: str, required: bool) -> str:
    """``value`` stripped, or :class:`Refused` when it is empty (``required``), longer than
    :data:`REASON_MAX`, or holds a control character or a line break. Shell metacharacters (``;``,
    ``|``, ``$(...)``) are allowed: the text is one element of an argv list, which no shell reads
    as a command."""
    text = (value or "").strip()
    if required and not text:
        raise Refused(Problem(field, f"Give a {what}: Slurm shows it to everyone who asks why (sinfo -R)."))
    if CONTROL.search(text):
        raise Refused(
            Problem(
                field,
                f"The {what} holds a line break or another control character; write it on one line: Slurm keeps "
                "it as one line and prints it in sinfo's columns.",
            )
        )
    if len(text) > REASON_MAX:
        raise Refused(Problem(field, f"The {what} has {len(text)} characters; keep it to {REASON_MAX}."))
    return text


def run_scontrol(cluster: Cluster, argv: Sequence[str], *, field: str = "") -> str:
    """Run ``argv`` (an ``scontrol`` command, possibly behind ``env``) on ``cluster`` as the service
    user within :data:`ACTION_TIMEOUT` seconds; its stdout. A refusal by Slurm (non-zero exit) is
    :class:`Refused` quoting Slurm's own words (stderr, else stdout); Slurm not reachable or too slow
    is :class:`Refused` saying so (nothing known to have changed)."""
    try:
        result = get_gateway(cluster.name).run(list(argv), timeout=ACTION_TIMEOUT, check=False)
    except SlurmTimeout:
        raise Refused(
            Problem(
                field,
                f"{cluster.label} did not answer within {ACTION_TIMEOUT:.0f} s. Whether the change was made is not "
                "known: the page shows what Slurm says after the next poll; try again if it is not there.",
            )
        ) from None
    except SlurmError as exc:
        raise Refused(Problem(field, f"{cluster.label} could not be reached: {str(exc)[:300]}. Nothing was changed.")) from None
    if result.returncode != 0:
        words = slurm_words(result.err or result.out)
        if controller_unreachable(result.err):
            raise Refused(
                Problem(field, f"slurmctld of {cluster.label} is not answering (Slurm said: {words}). Nothing was changed.")
            )
        raise Refused(Problem(field, f"Slurm refused: {words}"))
    return result.out


def slurm_words(text: str) -> str:
    """Slurm's message as one line (its lines joined), at most 400 characters; a placeholder when empty."""
    joined = " ".join(line.strip() for line in (text or "").splitlines() if line.strip())
    return joined[:400] or "(no message)"
