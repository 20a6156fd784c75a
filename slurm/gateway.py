"""The Slurm gateway: one ``run(argv, as_user=..., stdin=...)`` for every Slurm command."""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time
from collections.abc import Callable, Sequence

from tenacity import RetryError, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential, wait_random

from .adapters import adapter_for
from .errors import SlurmError, SlurmRateLimited, SlurmVersionUnknown, client_backoffs, rate_limited
from .transports.base import CommandResult, Transport

logger = logging.getLogger(__name__)

#: A portable Unix user name, as ``useradd`` accepts by default: lower case, starts with a letter
#: or underscore, then letters, digits, ``_`` or ``-``; at most 32 characters. The only names passed
#: to ``sudo -u`` (so one can never be read as an option); accounts.claims reads usernames by it too.
POSIX_USERNAME_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


#: Called after every command a gateway runs, finished or not, as ``observer(cluster, command,
#: seconds, ok)``: ``cluster`` the gateway's configured name ("" for one built by hand), ``command``
#: the program's base name (``squeue``, ``sbatch``; the portal's sbatch helper counts as ``sbatch``),
#: ``seconds`` wall time of the call, ``ok`` whether it ran and exited 0 (or gave an answer the caller
#: accepts: ``run``'s ``accepted``). The jobs app registers the
#: one that feeds /metrics' ``portal_slurm_command_seconds``; an observer that raises is ignored.
command_observers: list[Callable[[str, str, float, bool], None]] = []


#: Called for slurmctld's rate limit (``SlurmctldParameters=rl_enable``), as ``observer(cluster,
#: command, event, n)``: ``event`` is ``"throttled"`` (``n`` answers refused by the rate limit, or
#: back-offs the client library reported having slept itself) or ``"retried"`` (``n`` attempts
#: resent by the gateway). The jobs app's feeds /metrics' ``portal_slurm_command_throttled_total``
#: and ``portal_slurm_command_retries_total``; an observer that raises is ignored.
rate_limit_observers: list[Callable[[str, str, str, int], None]] = []

#: The gateway's back-off for a throttled answer: at most this many resends, waiting 1, 2, 4 and 8 s
#: (plus up to 0.5 s of jitter each, so concurrent callers do not come back together) before them:
#: at most 17 s of waiting per command on top of the attempts' own time. The bucket refills at
#: ``rl_refill_rate`` tokens per ``rl_refill_period`` (2 per second by default), so the first wait
#: already buys two RPCs. After the last refusal: :class:`~slurm.errors.SlurmRateLimited`.
RATE_LIMIT_RETRIES = 4
RATE_LIMIT_WAIT_MAX = 8.0
RATE_LIMIT_JITTER = 0.5


class _Throttled(Exception):
    """One attempt's answer was a rate-limit refusal (internal: what tenacity retries on)."""

    def __init__(self, result: CommandResult, detail: str):
        super().__init__(detail)
        self.result, self.detail = result, detail


def command_name(argv0: str) -> str:
    """The label of a command for :data:`command_observers`: its base name, ``sbatch`` for any
    ``*-sbatch`` wrapper (the portal's submit helper)."""
    name = os.path.basename(argv0)
    return "sbatch" if name.endswith("-sbatch") else name


class SlurmGateway:
    """Runs argv lists on the submit host through a :class:`Transport`.

    ``command_timeout`` is the default deadline in seconds. With ``as_user``, the command runs as
    that researcher through the sudo rule: ``sudo -n -u <user> -- <argv>`` (never a password
    prompt, never a tty). ``cluster``: the configured name, passed to :data:`command_observers`.
    """

    def __init__(self, transport: Transport, *, command_timeout: float = 30.0, cluster: str = ""):
        self.transport = transport
        self.command_timeout = command_timeout
        self.cluster = cluster

    def build_argv(self, argv: Sequence[str], *, as_user: str | None = None) -> list[str]:
        """The full argv to send. Raises ``ValueError`` for an empty argv, a non-str element, or an
        ``as_user`` that is not a plain Unix user name (so it can never be read as a sudo option)."""
        if isinstance(argv, (str, bytes)):
            raise ValueError("argv must be a list of str, not a string: the gateway never runs shell strings")
        argv = list(argv)
        if not argv or not all(isinstance(a, str) for a in argv):
            raise ValueError(f"argv must be a non-empty list of str, got {argv!r}")
        if any("\x00" in a for a in argv):
            raise ValueError("argv elements must not contain NUL bytes")
        if as_user is None:
            return argv
        if not isinstance(as_user, str) or not POSIX_USERNAME_RE.fullmatch(as_user):
            raise ValueError(f"as_user must be a Unix user name, got {as_user!r}")
        return ["sudo", "-n", "-u", as_user, "--", *argv]

    def run(
        self,
        argv: Sequence[str],
        *,
        as_user: str | None = None,
        stdin: str | bytes | None = None,
        timeout: float | None = None,
        check: bool = True,
        accepted: Callable[[CommandResult], bool] | None = None,
    ) -> CommandResult:
        """Run one command and return its :class:`CommandResult`.

        ``stdin``: str (sent as UTF-8) or bytes; ``timeout``: seconds (default ``command_timeout``);
        ``check``: raise :class:`SlurmError` on a non-zero exit code. ``accepted(result)``: True for
        an answer with a non-zero exit code that the caller reads as a good one (``scontrol show
        config`` whose closing ping was refused: :func:`slurm.accounting.show_config`), which
        :data:`command_observers` then count as ``ok`` and ``check`` does not raise for. Always raises
        :class:`SlurmError` (or a subclass) when the command could not run or finish.
        """
        full = self.build_argv(argv, as_user=as_user)
        data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
        result, _ = self._execute(argv, full, data, timeout, as_user=as_user, accepted=accepted)
        if check and result.returncode != 0 and not (accepted and accepted(result)):
            raise SlurmError(full, result.returncode, result.out, result.err)
        return result

    def _execute(self, argv, full, data, timeout, *, as_user, read=None, accepted=None):
        """Run ``full`` once, and again after a back-off while slurmctld's rate limit refuses it
        (:data:`RATE_LIMIT_RETRIES`): a refused attempt did nothing, so even ``sbatch`` is safe to
        resend. ``read(result)`` (``run_json``'s) turns a finished answer into its value and may say
        it was throttled too (an ``errors`` entry) by raising :class:`_Throttled`. Observed once,
        with the whole call's time, ``ok`` for exit 0 or an answer ``accepted`` (``run``'s). Returns
        ``(result, value)``; raises :class:`~slurm.errors.SlurmRateLimited` after the last refusal."""
        command = command_name(argv[0])
        started, ok = time.monotonic(), False
        retrying = Retrying(
            stop=stop_after_attempt(RATE_LIMIT_RETRIES + 1),
            wait=wait_exponential(multiplier=1, min=1, max=RATE_LIMIT_WAIT_MAX) + wait_random(0, RATE_LIMIT_JITTER),
            retry=retry_if_exception_type(_Throttled),
            sleep=self.sleep,
            before_sleep=lambda state: self._rate_limit_event(command, "retried", 1),
        )
        try:
            for attempt in retrying:
                with attempt:
                    ok = False  # until this attempt's answer is in and not a refusal
                    result = self.transport.execute(full, stdin=data, timeout=timeout or self.command_timeout)
                    backoffs = client_backoffs(result.err)
                    if backoffs:  # the client library slept and resent by itself (only said with -v)
                        self._rate_limit_event(command, "throttled", backoffs)
                    if result.returncode != 0 and rate_limited(result.err):  # Slurm's errors go to stderr
                        self._throttled(command, result, result.err.strip())
                    ok = result.returncode == 0 or bool(accepted and accepted(result))
                    value = read(result) if read is not None else None
            return result, value
        except RetryError as exc:
            ok = False
            throttled = exc.last_attempt.exception()
            assert isinstance(throttled, _Throttled)
            raise self._rate_limited_error(full, command, throttled, as_user, time.monotonic() - started) from None
        finally:
            self._observe(argv[0], time.monotonic() - started, ok)

    def _throttled(self, command: str, result: CommandResult, detail: str):
        self._rate_limit_event(command, "throttled", 1)
        logger.info("slurmctld rate-limited %s on %s: %s", command, self.cluster or "the cluster", detail[:200])
        raise _Throttled(result, detail)

    def _rate_limited_error(self, full, command: str, throttled: _Throttled, as_user, waited: float) -> SlurmRateLimited:
        service = getattr(self.transport, "user", "")
        who = f"user {as_user!r}" if as_user else f"the portal's service user{f' {service!r}' if service else ''}"
        where = f"{self.cluster}'s slurmctld" if self.cluster else "slurmctld"
        lines = throttled.detail.splitlines()
        return SlurmRateLimited(
            full,
            throttled.result.returncode,
            throttled.result.out,
            throttled.result.err,
            message=(
                f"{where} is rate-limiting {who} (SlurmctldParameters=rl_enable): {command} "
                f"was refused {RATE_LIMIT_RETRIES + 1} times over {waited:.0f} s ({lines[-1] if lines else 'no output'}). "
                "The site's Slurm admin can raise rl_refill_rate or rl_bucket_size in SlurmctldParameters "
                "(only SlurmUser and root are exempt); see docs/clusters.md, 'Slurm's RPC rate limit'."
            ),
        )

    def _rate_limit_event(self, command: str, event: str, n: int) -> None:
        for observer in list(rate_limit_observers):
            try:
                observer(self.cluster, command, event, n)
            except Exception:  # noqa: BLE001 - a metric must never fail a Slurm command
                pass

    @staticmethod
    def sleep(seconds: float) -> None:
        """The back-off's sleep (tests replace it on an instance)."""
        time.sleep(seconds)

    def _observe(self, argv0: str, seconds: float, ok: bool) -> None:
        for observer in list(command_observers):
            try:
                observer(self.cluster, command_name(argv0), seconds, ok)
            except Exception:  # noqa: BLE001 - a metric must never fail a Slurm command
                pass

    def run_json(
        self,
        argv: Sequence[str],
        *,
        as_user: str | None = None,
        timeout: float | None = None,
        decode: Callable[[bytes], dict] | None = None,
    ) -> dict:
        """Run a Slurm ``--json`` command and return its document. Raises ``ValueError`` when the
        output is not JSON, and :class:`SlurmError` when the command failed *or* the document lists
        ``errors`` that are failures (an entry that only says "nothing found", like sacct's 9003, is an
        empty answer, decided by the version's adapter: ``failure_errors``): Slurm 22.05's ``squeue --json`` and ``sinfo --json`` exit 0 with an empty list and
        ``"errors": [{"description": "Failed while looking for jobs"...}]`` when slurmctld cannot be
        reached, which must never read as "the queue is empty". ``decode``: what reads the output
        (its bytes) instead of ``json.loads`` (the poll's :func:`slurm.adapters.queue_decode.decode_squeue`)."""
        full = self.build_argv(argv, as_user=as_user)
        command = command_name(argv[0])

        def read(result: CommandResult) -> dict:
            if result.returncode != 0:
                return {}
            doc = decode(result.stdout) if decode else json.loads(result.out)
            errors = doc.get("errors") if isinstance(doc, dict) else None
            if errors:
                try:  # the version's own word on which entries only mean "nothing found"
                    errors = adapter_for(doc, argv=argv).failure_errors(doc)
                except SlurmVersionUnknown:
                    pass  # every entry counts (an outage's document may carry no version at all)
            if errors:
                detail = "; ".join(
                    str(e.get("description") or e.get("error") or e) if isinstance(e, dict) else str(e) for e in errors
                )[:300]
                if rate_limited(detail):  # never read as an empty queue: retried, then SlurmRateLimited
                    self._throttled(command, result, detail)
                raise SlurmError(
                    full,
                    result.returncode,
                    "",
                    result.err,
                    message=f"{argv[0]} reported errors: {detail} (slurmctld or slurmdbd not answering?)",
                )
            return doc

        result, doc = self._execute(argv, full, None, timeout, as_user=as_user, read=read)
        if result.returncode != 0:
            raise SlurmError(full, result.returncode, result.out, result.err)
        return doc

    def close(self) -> None:
        self.transport.close()


#: Cluster name -> its process-wide gateway (one pooled SSH connection each).
_gateways: dict[str, SlurmGateway] = {}
_gateway_lock = threading.Lock()


def build_transport(conf: dict) -> Transport:
    """A transport from a ``PORTAL_SLURM_GATEWAY`` settings dict (``transport`` is ``ssh`` or ``local``)."""
    if conf["transport"] == "local":
        from .transports.local import LocalTransport

        return LocalTransport()
    if conf["transport"] == "ssh":
        from .transports.ssh import SSHTransport

        return SSHTransport(
            host=conf["ssh_host"],
            port=conf["ssh_port"],
            user=conf["ssh_user"],
            key_file=conf["ssh_key_file"],
            known_hosts=conf["ssh_known_hosts"],
            max_channels=conf["ssh_max_channels"],
            connect_timeout=conf["ssh_connect_timeout"],
        )
    raise ValueError(f"unknown PORTAL_SLURM_TRANSPORT {conf['transport']!r}: use 'ssh' or 'local'")


def get_gateway(cluster: str | None = None) -> SlurmGateway:
    """The process-wide gateway to ``cluster`` (a name of :func:`slurm.clusters.clusters`; ``None``
    or ``""``: the default cluster), built from its configuration: one pooled connection per cluster
    and process, rebuilt in a forked child (e.g. a Celery prefork worker). Raises ``KeyError`` for a
    name that is not configured."""
    from .clusters import cluster_get

    found = cluster_get(cluster)
    if found is None:
        raise KeyError(f"no cluster named {cluster!r} is configured")
    with _gateway_lock:
        gateway = _gateways.get(found.name)
        if gateway is None:
            conf = found.gateway
            gateway = _gateways[found.name] = SlurmGateway(
                build_transport(conf), command_timeout=conf["command_timeout"], cluster=found.name
            )
        return gateway


def reset_gateway() -> None:
    """Close and forget every process-wide gateway (tests; after fork)."""
    with _gateway_lock:
        for gateway in _gateways.values():
            gateway.close()
        _gateways.clear()


def _forget_after_fork() -> None:
    # The parent's SSH sockets must not be shared with a child: drop them without closing them.
    global _gateways, _gateway_lock
    _gateways = {}
    _gateway_lock = threading.Lock()


os.register_at_fork(after_in_child=_forget_after_fork)
