"""Site policy the teams sync keeps in Slurm (docs/policy.md): per-person caps and
the small-job pool, read from the portal's settings.

* **Per-person caps** live on one QOS (``PORTAL_USER_CAPS_QOS``, ``normal`` by default: every association's
  default QOS, so every job of every account has it): ``MaxTRESPerUser=gres/gpu=N`` (GPUs one person
  uses at once) and ``MaxSubmitJobsPerUser=M`` (jobs one person has pending or running; each array
  task counts). A QOS limit per user counts a person's jobs in all their accounts together, which is
  what "per person" means for someone in two teams; an association limit would be per account
  (twice the cap for a member of two teams). Each cluster's slurmdbd has its own QOS, so a cap
  applies per cluster.
* **The small-job pool** is a partition (``PORTAL_SMALL_POOL_PARTITION``, ``small`` on the local clusters)
  on nodes held back from the big partition (slurm.conf), whose partition QOS of the same name
  allows jobs of at most ``PORTAL_SMALL_POOL_MAX_GPUS`` GPUs (``MaxTRESPerJob``) and
  ``PORTAL_SMALL_POOL_MAX_MINUTES`` minutes (``MaxWall``). A bigger job is accepted by sbatch and pends
  (``QOSMaxGRESPerJob``, ``PartitionTimeLimit``): never started there, its page says why, and the
  portal's form refuses it before sending. (``DenyOnLimit`` would refuse it at submission, but on a
  partition QOS it also turns every association limit into a refusal: a job over its team's
  GPU-hours quota would be refused instead of waiting for the next period.)

A cap setting is ``""`` (the portal does not manage it: Slurm keeps what an admin set by hand),
``"unlimited"`` (managed: no cap) or a whole number >= 1. Read lazily from Django settings; the
system check ``portal.E030`` refuses anything else at start-up.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings

from portal.formats import limit_text

UNLIMITED = "unlimited"
#: Not managed by the portal: the field is left out of the plan.
NOT_MANAGED = object()


def parse_cap(name: str, value: object) -> int | None | object:
    """A cap setting: ``""`` -> :data:`NOT_MANAGED`, ``"unlimited"`` -> ``None`` (no cap), ``"4"`` -> 4.
    Raises ``ValueError`` naming the setting for anything else (0, negative, a word)."""
    text = str(value if value is not None else "").strip()
    if not text:
        return NOT_MANAGED
    if text.lower() == UNLIMITED:
        return None
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise ValueError(f"{name}={text!r} is not a whole number of at least 1, 'unlimited' or empty")


@dataclass(frozen=True)
class UserCaps:
    """The per-person caps on ``qos``: ``max_gpus`` (``MaxTRESPerUser`` gres/gpu) and ``max_submit``
    (``MaxSubmitJobsPerUser``); each an ``int``, ``None`` (managed, no cap) or :data:`NOT_MANAGED`."""

    qos: str
    max_gpus: int | None | object = NOT_MANAGED
    max_submit: int | None | object = NOT_MANAGED

    @property
    def managed(self) -> bool:
        return self.max_gpus is not NOT_MANAGED or self.max_submit is not NOT_MANAGED

    @property
    def gpu_cap(self) -> int | None:
        """The GPU cap people are told of (``None``: none known)."""
        return self.max_gpus if isinstance(self.max_gpus, int) else None

    @property
    def submit_cap(self) -> int | None:
        return self.max_submit if isinstance(self.max_submit, int) else None


@dataclass(frozen=True)
class SmallPool:
    """The small-job pool: ``partition`` (``""`` = none) and its partition QOS's limits per job:
    ``max_gpus`` GPUs, ``max_minutes`` minutes of time limit."""

    partition: str = ""
    max_gpus: int = 1
    max_minutes: int = 60

    @property
    def managed(self) -> bool:
        return bool(self.partition)

    @property
    def qos(self) -> str:
        """The pool's partition QOS: named as its partition (``PartitionName=small ... QOS=small``)."""
        return self.partition

    def admits(self, *, gpu_count: int, time_limit_min: int) -> bool:
        """Whether a job of ``gpu_count`` GPUs and ``time_limit_min`` minutes fits the pool's limits."""
        return gpu_count <= self.max_gpus and time_limit_min <= self.max_minutes


@dataclass(frozen=True)
class Policy:
    caps: UserCaps
    pool: SmallPool

    @property
    def managed(self) -> bool:
        """Whether the sync has anything of this to keep (else it reads no QOS at all)."""
        return self.caps.managed or self.pool.managed


def site_policy() -> Policy:
    """The policy from settings. Raises ``ValueError`` on a value ``portal.E030`` refuses."""
    caps = UserCaps(
        qos=settings.PORTAL_USER_CAPS_QOS,
        max_gpus=parse_cap("PORTAL_USER_MAX_GPUS", settings.PORTAL_USER_MAX_GPUS),
        max_submit=parse_cap("PORTAL_USER_MAX_SUBMIT_JOBS", settings.PORTAL_USER_MAX_SUBMIT_JOBS),
    )
    pool = SmallPool(
        settings.PORTAL_SMALL_POOL_PARTITION, settings.PORTAL_SMALL_POOL_MAX_GPUS, settings.PORTAL_SMALL_POOL_MAX_MINUTES
    )
    return Policy(caps, pool)


def policy_problems() -> list[str]:
    """What is wrong with the policy settings, one sentence each ([] when fine)."""
    from .models import ACCOUNT_NAME_RE  # the same names sacctmgr cannot misread

    problems = []
    for name in ("PORTAL_USER_MAX_GPUS", "PORTAL_USER_MAX_SUBMIT_JOBS"):
        try:
            parse_cap(name, getattr(settings, name))
        except ValueError as exc:
            problems.append(f"{exc}.")
    for name in ("PORTAL_USER_CAPS_QOS", "PORTAL_SMALL_POOL_PARTITION"):
        value = getattr(settings, name)
        if value and not ACCOUNT_NAME_RE.fullmatch(value):
            problems.append(f"{name}={value!r} is not a QOS/partition name (lower case letters, digits, _ . -).")
    caps_set = any(str(getattr(settings, n) or "").strip() for n in ("PORTAL_USER_MAX_GPUS", "PORTAL_USER_MAX_SUBMIT_JOBS"))
    if caps_set and not settings.PORTAL_USER_CAPS_QOS:
        problems.append("PORTAL_USER_CAPS_QOS is empty: the per-person caps need a QOS to live on.")
    if settings.PORTAL_SMALL_POOL_PARTITION:
        if settings.PORTAL_SMALL_POOL_MAX_GPUS < 0:
            problems.append(f"PORTAL_SMALL_POOL_MAX_GPUS={settings.PORTAL_SMALL_POOL_MAX_GPUS} is below 0.")
        if settings.PORTAL_SMALL_POOL_MAX_MINUTES < 1:
            problems.append(
                f"PORTAL_SMALL_POOL_MAX_MINUTES={settings.PORTAL_SMALL_POOL_MAX_MINUTES} is below 1: no job could use the pool."
            )
        if settings.PORTAL_SMALL_POOL_PARTITION == settings.PORTAL_USER_CAPS_QOS:
            problems.append(
                "PORTAL_SMALL_POOL_PARTITION names the caps' QOS: the pool's partition QOS must be its own, "
                "or its per-job limits would apply to every job."
            )
    return problems


def policy_lines(policy: Policy | None = None, *, pool_nodes: str = "", what: str = "Jobs") -> list[str]:
    """What people are told where they choose resources, one sentence each: "At most 4 GPUs at once
    per person.", "At most 20 pending or running jobs per person.", "Jobs of at most 1 h and 1 GPU may
    use the small-job pool (partition small: node3), held back from big jobs." ``pool_nodes``: the
    pool partition's nodes as people read them (from the stored snapshots; "" = not known); ``what``: who may
    use the pool ("Sessions" on the session form). Bad settings give [] (the check reports them)."""
    try:
        policy = policy or site_policy()
    except ValueError:
        return []
    lines = []
    if policy.caps.gpu_cap is not None:
        lines.append(f"At most {_count(policy.caps.gpu_cap, 'GPU')} at once per person.")
    if policy.caps.submit_cap is not None:
        lines.append(f"At most {_count(policy.caps.submit_cap, 'pending or running job')} per person (each array task counts).")
    if policy.pool.managed:
        lines.append(
            f"{what} of at most {limit_text(policy.pool.max_minutes)} and {_count(policy.pool.max_gpus, 'GPU')} may use "
            f"the small-job pool (partition {policy.pool.partition}{': ' + pool_nodes if pool_nodes else ''}), held back from big jobs."
        )
    return lines


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")
