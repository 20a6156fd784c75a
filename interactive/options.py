"""Session options: the keys a start request may carry, parsed and checked against the site policy
(the same :class:`jobs.submit.policy.SitePolicy` the job form uses) plus the session rules: only the
partitions sessions may use on the chosen cluster (``PORTAL_SESSION_PARTITIONS``, or its ``session_partitions``), at most ``PORTAL_SESSION_MAX_GPUS`` GPUs, at most
``PORTAL_SESSION_MAX_HOURS`` hours; the ``ide`` option names a kind from :mod:`interactive.kinds`
that this site offers. Used by the sessions form and by the hub's spawner (through
``/hub-internal/spawn-check``), so a user's own hub token gets exactly the same answer. The per-person
caps a start meets (:func:`session_cap_problems`: sessions at once, the site's caps on jobs and GPUs) are
checked by :func:`interactive.services.session_start` and said before it by the pages and the API; the team
a session is billed to (the ``account`` option) is :func:`session_account`, checked there and by the hub's
spawn check."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings

from jobs.reads.cap_reasons import InQueue, in_queue, start_cap_problems
from jobs.reads.freshness import cluster_status
from jobs.reads.maintenance import MaintenanceClash, maintenance_warning
from jobs.submit.policy import JobRequest, SitePolicy
from jobs.submit.submit import account_for
from portal.refusals import Problem, Refused
from slurm.clusters import cluster_get, default_sessions_cluster, has_session_venv, session_clusters, session_partitions

from .kinds import KINDS, SessionKind, kind_default, kinds_available

#: Every key a start request may carry.
ALLOWED_KEYS = ("ide", "partition", "gpu_type", "gpu_count", "cpus", "memory_mb", "hours", "image", "account", "cluster")
_WHOLE = re.compile(r"-?[0-9]{1,9}")
#: A site image's name (images.models.NAME, at most 64 characters): anything else is no image, without a query.
IMAGE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


@dataclass(frozen=True)
class SessionOptions:
    """Validated options. ``ide`` a registered, available kind's name; ``memory_mb`` MiB, ``hours``
    whole hours; ``image`` the name of a site image whose ``offers`` hold the kind (checked by
    :func:`images.services.image_check` on the sessions cluster), "" for the node's own system."""

    ide: str
    partition: str
    gpu_type: str
    gpu_count: int
    cpus: int
    memory_mb: int
    hours: int
    image: str = ""

    @property
    def time_limit_min(self) -> int:
        return self.hours * 60

    def as_user_options(self) -> dict:
        """These options as a start request's ``user_options`` (what the hub is sent and the audit
        row records): the same keys, ``image`` only when there is one."""
        return {
            "ide": self.ide,
            "partition": self.partition,
            "gpu_type": self.gpu_type,
            "gpu_count": self.gpu_count,
            "cpus": self.cpus,
            "memory_mb": self.memory_mb,
            "hours": self.hours,
            **({"image": self.image} if self.image else {}),
        }


def _int(raw: dict, key: str, default: int, errors: list[Problem], label: str) -> int:
    value = raw.get(key, default)
    if isinstance(value, bool):
        value = None
    if isinstance(value, str) and _WHOLE.fullmatch(value.strip()):  # ASCII digits only ('²'.isdigit() is True)
        value = int(value)
    if not isinstance(value, int) or not -(2**31) < value < 2**31:
        errors.append(Problem(key, f"{label} must be a whole number."))
        return default
    return value


def _str(raw: dict, key: str, default: str, errors: list[Problem], label: str) -> str:
    value = raw.get(key, default)
    if not isinstance(value, str) or len(value) > 64:
        errors.append(Problem(key, f"{label} must be a short text."))
        return default
    return value.strip()


def _session_rule_problems(
    *, kind: SessionKind | None, partition: str, gpu_count: int, hours: int, cluster: str
) -> list[Problem]:
    """The session rules the site policy does not hold, one problem each (named by its option key):
    ``ide`` a kind this site offers (``kind``: its registry entry, ``None`` for an unknown name), a
    partition sessions may use on ``cluster`` (:func:`slurm.clusters.session_partitions`), 0 to ``PORTAL_SESSION_MAX_GPUS`` GPUs, 1 to
    ``PORTAL_SESSION_MAX_HOURS`` hours. ``[]`` when all hold."""
    errors: list[Problem] = []
    if kind is None:
        errors.append(Problem("ide", f"The IDE must be one of: {', '.join(KINDS)}."))
    elif not kind.available():
        errors.append(Problem("ide", _not_installed(kind)))
    allowed = session_partitions(cluster)
    if partition not in allowed:
        errors.append(
            Problem(
                "partition",
                f"Sessions run in the interactive partition(s) only: {', '.join(allowed)}. For '{partition[:40]}', submit a batch job.",
            )
        )
    if gpu_count < 0:
        errors.append(Problem("gpu_count", "The number of GPUs cannot be negative."))
    elif gpu_count > settings.PORTAL_SESSION_MAX_GPUS:
        errors.append(
            Problem(
                "gpu_count",
                f"Sessions may have at most {settings.PORTAL_SESSION_MAX_GPUS} GPUs. For {gpu_count} GPUs, submit a batch job.",
            )
        )
    if not 1 <= hours <= settings.PORTAL_SESSION_MAX_HOURS:
        errors.append(Problem("hours", f"A session lasts 1 to {settings.PORTAL_SESSION_MAX_HOURS} hours."))
    return errors


def parse_session_options(raw: object, *, policy: SitePolicy) -> tuple[SessionOptions | None, list[Problem]]:
    """``raw``: the ``user_options`` dict of a start request (values may be strings, from a form).
    Returns ``(options, [])`` when allowed, else ``(None, problems)``; each problem names its option
    key (``options`` for the dict as a whole; site policy's problems keep the policy's names, e.g.
    ``time_limit_min`` for ``hours``: :mod:`jobs.submit.fields`) and says what is allowed. Unknown keys are
    refused, never ignored; ``cluster`` is the one :func:`session_cluster_choice` read, whose policy
    ``policy`` is (its images are offered)."""
    if not isinstance(raw, dict):
        return None, [Problem("options", "The session options must be a JSON object.")]
    errors: list[Problem] = []
    unknown = sorted(str(k)[:40] for k in raw if k not in ALLOWED_KEYS)
    if unknown:
        errors.append(Problem("options", f"Unknown session option(s): {', '.join(unknown)}. Allowed: {', '.join(ALLOWED_KEYS)}."))
    default_partition = next(iter(session_partitions(policy.cluster)), "")
    ide = _str(raw, "ide", kind_default().name, errors, "The IDE")
    partition = _str(raw, "partition", default_partition, errors, "The partition")
    gpu_type = _str(raw, "gpu_type", "", errors, "The GPU type")
    gpu_count = _int(raw, "gpu_count", 0, errors, "The number of GPUs")
    cpus = _int(raw, "cpus", 2, errors, "CPUs")
    memory_mb = _int(raw, "memory_mb", 4096, errors, "Memory (MiB)")
    hours = _int(raw, "hours", 2, errors, "Hours")
    image = _str(raw, "image", "", errors, "The image")
    kind = KINDS.get(ide)
    errors += _session_rule_problems(kind=kind, partition=partition, gpu_count=gpu_count, hours=hours, cluster=policy.cluster)
    if errors:
        return None, errors
    request = JobRequest(
        name=f"session-{ide}",
        partition=partition,
        gpu_type=gpu_type,
        gpu_count=gpu_count,
        cpus=cpus,
        memory_mb=memory_mb,
        time_limit_min=hours * 60,
        script="jupyterhub-singleuser",
    )
    errors = policy.check(request)
    if errors:
        return None, errors
    found, errors = session_image(image, kind=kind, partition=partition, cluster=policy.cluster)
    if errors:
        return None, errors
    return SessionOptions(ide, partition, gpu_type, gpu_count, cpus, memory_mb, hours, found.name if found else ""), []


def session_cluster_choice(raw: object) -> tuple[str, list[Problem]]:
    """The cluster a new session asks for: ``raw["cluster"]`` (the form's or the API's), one of
    :func:`slurm.clusters.session_clusters`; omitted or "": the default session cluster. Returns
    ``(name, [])``, or ``(the default's name, problems)`` (field ``cluster``) for a name that is not
    a cluster, a cluster where sessions do not run, or one whose queue poll has failed for longer
    than ``PORTAL_SNAPSHOT_MAX_AGE`` (down: its stored snapshot's ``error``), each naming what to choose.
    A start that names no cluster is checked the same way on the default: when the default is down it
    is refused, naming the clusters that may be chosen instead (never moved to another cluster unasked:
    homes, data and modules differ between clusters)."""
    default = default_sessions_cluster().name
    requested = raw.get("cluster") if isinstance(raw, dict) else None
    names = [c.name for c in session_clusters()]
    if not requested:
        return default, _down(default, names, f"{default}, the default cluster for sessions,")
    choose = f"Choose one of: {', '.join(names)} (the default is {default})."
    if not isinstance(requested, str) or len(requested) > 64 or cluster_get(requested) is None:
        shown = requested[:40] if isinstance(requested, str) else str(requested)[:40]
        return default, [Problem("cluster", f"There is no cluster called '{shown}'. {choose}")]
    if requested not in names:
        return default, [Problem("cluster", f"Sessions do not run on {requested}: for {requested}, submit a batch job. {choose}")]
    problems = _down(requested, names, requested)
    return (default, problems) if problems else (requested, [])


def _down(name: str, names: list[str], said: str) -> list[Problem]:
    """``[Problem("cluster", ...)]`` when cluster ``name``'s queue poll has failed for longer than
    ``PORTAL_SNAPSHOT_MAX_AGE`` (:func:`jobs.reads.freshness.cluster_status`), else ``[]``; ``said`` names it
    in the sentence, which offers the other session clusters of ``names``."""
    status = cluster_status(name)
    if not (status.stale and status.error):
        return []
    others = [n for n in names if n != name]
    instead = f"choose {' or '.join(others)}" if others else "try again later"
    return [Problem("cluster", f"{said} cannot be reached now ({status.unreachable}); {instead}.")]


def spawn_cluster(row, raw: object) -> tuple[str, list[Problem]]:
    """The cluster of the session the hub spawns (its spawn check): the one the portal's Session
    ``row`` recorded when it was started (the hub only names the session; the portal decides), or
    the default session cluster for a start with the user's own hub token (``row`` ``None``).
    Returns ``(name, [])``, or ``(name, problems)`` (field ``cluster``) when the hub's options
    ``raw`` name another cluster."""
    cluster = row.on_cluster if row is not None else default_sessions_cluster().name
    asked = raw.get("cluster") if isinstance(raw, dict) else None
    if asked is None or asked == cluster:
        return cluster, []
    where = "it was started on" if row is not None else "a start outside the portal runs on"
    return cluster, [
        Problem(
            "cluster",
            f"A session's cluster is chosen on the portal's Sessions page or its API, not here: {where} {cluster}. "
            "Start it from the portal to choose another cluster.",
        )
    ]


def session_account(*, user, raw: object) -> tuple[str, list[Problem]]:
    """The Slurm account (team) a session of ``user`` is billed to, chosen as a batch job's
    (:func:`jobs.submit.submit.account_for`): ``raw["account"]`` (a start request's ``user_options``) when
    given, else the person's first team (their only one, for most). Returns ``(account, [])``, or
    ``(account, problems)`` (field ``account``) for someone in no team (who to ask) or an account
    that is not one of their teams (``user.slurm_accounts``, from sacctmgr at their last sign-in)."""
    requested = raw.get("account") if isinstance(raw, dict) else None
    if requested is not None and (not isinstance(requested, str) or len(requested) > 64):
        return "", [Problem("account", "The team (Slurm account) must be a short text, e.g. vision.")]
    return account_for(user=user, requested=(requested or "").strip(), billed="sessions")


def session_images(kind: SessionKind, *, partition: str | None = None, cluster: str = "") -> list:
    """The site images a session of ``kind`` may run in on ``cluster`` ("": the default session
    cluster; enabled, allowed there and on ``partition``, and whose ``offers`` hold the kind's
    :attr:`SessionKind.offer`): :func:`images.selectors.images_for`. What the form and the API offer."""
    from images.selectors import images_for

    cluster = cluster or default_sessions_cluster().name
    return images_for(cluster=cluster, partition=partition, session_kind=kind.offer)


def session_image(name: str, *, kind: SessionKind, partition: str, cluster: str = ""):
    """The checked image of a session request: ``(image, [])``, ``(None, [])`` for the node's own
    system ("" or "none", where the site allows it, ``PORTAL_IMAGE_NONE_ALLOWED``, and the cluster's
    nodes hold the Jupyter venv, ``session_venv``), or ``(None,
    problems)`` (field ``image``): unknown, not for the partition, missing or unreadable on
    ``cluster`` ("": the default session cluster) (:func:`images.services.image_choice_check`, from the availability cache), or an image
    without the kind's server (its ``offers``)."""
    from images.services import image_choice_check

    cluster = cluster or default_sessions_cluster().name
    where = {"partition": partition, "cluster": cluster}
    if name in ("", "none") and not has_session_venv(cluster):
        own = f"{cluster}'s nodes have no session server of their own (no Jupyter venv): "
        return None, [Problem("image", own + _images_with(kind, partition=partition, cluster=cluster))]
    if name not in ("", "none") and not IMAGE_NAME.fullmatch(name):  # a path, or text no name can hold (NUL)
        return None, [
            Problem(
                "image",
                f"There is no image called {name[:64]!r}: images are the site's, named like debian12-sklearn, never a path. "
                + _images_with(kind, partition=partition, cluster=cluster, first=True),
            )
        ]
    try:
        image = image_choice_check(name, cluster=cluster, partition=partition, instead=lambda: _images_with(kind, **where))
    except Refused as refused:
        return None, [Problem("image", p.message) for p in refused.problems]
    if image is not None and kind.offer not in (image.offers or []):
        return None, [
            Problem(
                "image",
                f"The image {image.name} has no {kind.label} server (it offers: {', '.join(image.offers or []) or 'no sessions'}); "
                + _images_with(kind, partition=partition, cluster=cluster),
            )
        ]
    return image, []


def _images_with(kind: SessionKind, *, partition: str, cluster: str, first: bool = False) -> str:
    """What to choose instead: the images with ``kind``'s server, and none where the site allows it and
    ``cluster``'s nodes hold the Jupyter venv (``session_venv``) (``first``: it starts a sentence)."""
    names = ", ".join(i.name for i in session_images(kind, partition=partition, cluster=cluster))
    own = ' or "none" (the node\'s own system)' if settings.PORTAL_IMAGE_NONE_ALLOWED and has_session_venv(cluster) else ""
    ask = f"choose{own.removeprefix(' or')}." if own else "ask the admin for one."
    text = f"choose an image with {kind.label}: {names}{own}." if names else f"no image on {cluster} has {kind.label}: {ask}"
    return text[:1].upper() + text[1:] if first else text


def session_maintenance(*, cluster: str, partition: str, hours: int) -> MaintenanceClash | None:
    """Whether a session of ``hours`` hours on ``partition`` of ``cluster`` would run into a
    maintenance reservation on every node of the partition (:func:`jobs.reads.maintenance.maintenance_warning`,
    from the stored snapshot): the clash, whose sentence says "This session cannot start before ...",
    or ``None``. A warning for the session form and the API, never a refusal: Slurm holds the job."""
    return maintenance_warning(cluster=cluster, partition=partition, time_limit_min=int(hours) * 60, what="session")


def image_settings(name: str) -> dict | None:
    """What the spawner needs to run a session's server in image ``name`` (already checked by
    :func:`session_image`): ``name``, ``path`` (absolute, on the cluster), ``runtime`` (a
    :func:`runtimes.runtime_get` name), ``digest`` and ``env_cache`` (the environment cache bound
    into it, ``PORTAL_ENV_CACHE_DIR``); ``None`` for no image."""
    if not name:
        return None
    from images.selectors import image_get

    image = image_get(name=name)
    return {
        "name": image.name,
        "path": image.path,
        "runtime": image.runtime,
        "digest": image.digest,
        "env_cache": settings.PORTAL_ENV_CACHE_DIR,
    }


# --- the per-person caps ---------------------------------------------------------------------------
@dataclass(frozen=True)
class SessionsHeld:
    """What the per-person caps count for one more session of a person: ``active`` their sessions
    not ended (Session rows requested, starting or running: JupyterHub's named servers), and
    ``queue`` their jobs on the sessions cluster as Slurm's per-user QOS limits count them
    (:func:`jobs.reads.cap_reasons.in_queue`, from the stored snapshot, in all their accounts, batch jobs
    included) plus their sessions the snapshot cannot list yet (requested, or started after it was
    taken); ``queue`` is ``None`` before the first poll."""

    active: int
    queue: InQueue | None


def sessions_held(*, user, cluster: str = "") -> SessionsHeld:
    """``user``'s :class:`SessionsHeld` now for one more session on ``cluster`` ("": the default
    session cluster): one query of their Session rows and that cluster's stored snapshot (no Slurm
    call, no hub call)."""
    from datetime import UTC, datetime

    from django.db.models import Count, Q

    from slurm.snapshot import snapshot_load

    from .models import ACTIVE_SESSION_STATES, Session, SessionState

    cluster = cluster or default_sessions_cluster().name
    lite = snapshot_load(with_jobs=False, cluster=cluster)
    queue = in_queue(username=user.username, cluster=cluster) if lite is not None else None
    seen_until = datetime.fromtimestamp(lite.taken_at if lite is not None else 0, UTC)
    unseen = Q(state=SessionState.REQUESTED) | Q(created_at__gt=seen_until)
    counts = Session.objects.filter(user=user, state__in=ACTIVE_SESSION_STATES).aggregate(
        active=Count("id"), unseen=Count("id", filter=unseen)
    )
    if queue is not None:
        queue = InQueue(queue.gpus, queue.jobs + counts["unseen"])
    return SessionsHeld(counts["active"], queue)


def session_cap_problems(*, user, gpu_count: int, held: SessionsHeld | None = None, cluster: str = "") -> list[Problem]:
    """Why one more session of ``gpu_count`` GPUs for ``user`` is refused by a per-person cap now,
    one :class:`Problem` each (``[]`` when none): the sessions one person may have at once
    (``PORTAL_SESSION_LIMIT``, JupyterHub's ``named_server_limit_per_user``; 0 = none; field ``""``),
    then the site's caps on ``cluster`` ("": the default session cluster;
    :func:`jobs.reads.cap_reasons.start_cap_problems`: jobs pending or running, GPUs at once), from
    ``held`` (default :func:`sessions_held` on that cluster). The one source
    of these sentences: :func:`interactive.services.session_start` refuses with them, and the form,
    the home page's Start buttons and the API say them before a start."""
    cluster = cluster or default_sessions_cluster().name
    held = held or sessions_held(user=user, cluster=cluster)
    problems = []
    limit = settings.PORTAL_SESSION_LIMIT
    if limit > 0 and held.active >= limit:
        noun = "session" if held.active == 1 else "sessions"
        problems.append(
            Problem(
                "",
                f"You already have {held.active} {noun} running or starting, the most the site allows one person at once "
                f"({limit}). Stop one of them on the Sessions page to start another.",
            )
        )
    if held.queue is not None:
        problems += start_cap_problems(cluster=cluster, mine=held.queue, gpu_count=gpu_count)
    return problems


def session_caps_now(*, user, held: SessionsHeld | None = None, cluster: str = "") -> list[str]:
    """The per-person caps ``user`` is at now, before choosing anything: the sentences
    :func:`session_cap_problems` refuses a one-GPU session with (every session at the sessions or
    jobs cap, every session with GPUs at the GPU cap; the GPU sentence then names no count, so it is
    the refusal's word for word). ``[]`` when none: the session form's notice and the API's
    ``GET /sessions/kinds`` ``caps``."""
    return [p.message for p in session_cap_problems(user=user, gpu_count=1, held=held, cluster=cluster)]


def _not_installed(kind: SessionKind) -> str:
    offered = " or ".join(k.label for k in kinds_available()) or "another kind"
    install = f" (the admin can install it with {kind.program.install})" if kind.program.install else ""
    return f"{kind.label} is not installed on this cluster yet; choose {offered}{install}."
