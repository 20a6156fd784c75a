"""The Slurm gateway: one ``run(argv, as_user=..., stdin=...)`` for every Slurm command."""

from __future__ import annotations

import json
import os
import re
import threading
import time
from collections.abc import Callable, Sequence

from .adapters import adapter_for
from .errors import SlurmError, SlurmVersionUnknown
from .transport import CommandResult, Transport

#: A portable Unix user name, as ``useradd`` accepts by default: lower case, starts with a letter
#: or underscore, then letters, digits, ``_`` or ``-``; at most 32 characters. The only names passed
#: to ``sudo -u`` (so one can never be read as an option); accounts.claims reads usernames by it too.
POSIX_USERNAME_RE = re.compile(r"^[a-z_][a-z0-9_-]{0,31}$")


#: Called after every command a gateway runs, finished or not, as ``observer(cluster, command,
#: seconds, ok)``: ``cluster`` the gateway's configured name ("" for one built by hand), ``command``
#: the program's base name (``squeue``, ``sbatch``; the portal's sbatch helper counts as ``sbatch``),
#: ``seconds`` wall time of the call, ``ok`` whether it ran and exited 0. The jobs app registers the
#: one that feeds /metrics' ``portal_slurm_command_seconds``; an observer that raises is ignored.
command_observers: list[Callable[[str, str, float, bool], None]] = []


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
    ) -> CommandResult:
        """Run one command and return its :class:`CommandResult`.

        ``stdin``: str (sent as UTF-8) or bytes; ``timeout``: seconds (default ``command_timeout``);
        ``check``: raise :class:`SlurmError` on a non-zero exit code. Always raises
        :class:`SlurmError` (or a subclass) when the command could not run or finish.
        """
        full = self.build_argv(argv, as_user=as_user)
        data = stdin.encode("utf-8") if isinstance(stdin, str) else stdin
        started, ok = time.monotonic(), False
        try:
            result = self.transport.execute(full, stdin=data, timeout=timeout or self.command_timeout)
            ok = result.returncode == 0
        finally:
            self._observe(argv[0], time.monotonic() - started, ok)
        if check and result.returncode != 0:
            raise SlurmError(full, result.returncode, result.out, result.err)
        return result

    def _observe(self, argv0: str, seconds: float, ok: bool) -> None:
        for observer in list(command_observers):
            try:
                observer(self.cluster, command_name(argv0), seconds, ok)
            except Exception:  # noqa: BLE001 - a metric must never fail a Slurm command
                pass

    def run_json(self, argv: Sequence[str], *, as_user: str | None = None, timeout: float | None = None) -> dict:
        """Run a Slurm ``--json`` command and return its document. Raises ``ValueError`` when the
        output is not JSON, and :class:`SlurmError` when the command failed *or* the document lists
        ``errors`` that are failures (an entry that only says "nothing found", like sacct's 9003, is an
        empty answer, decided by the version's adapter: ``failure_errors``): Slurm 22.05's ``squeue --json`` and ``sinfo --json`` exit 0 with an empty list and
        ``"errors": [{"description": "Failed while looking for jobs"...}]`` when slurmctld cannot be
        reached, which must never read as "the queue is empty"."""
        result = self.run(argv, as_user=as_user, timeout=timeout)
        doc = json.loads(result.out)
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
            raise SlurmError(
                self.build_argv(argv, as_user=as_user),
                result.returncode,
                "",
                result.err,
                message=f"{argv[0]} reported errors: {detail} (slurmctld or slurmdbd not answering?)",
            )
        return doc

    def close(self) -> None:
        self.transport.close()


#: Cluster name -> its process-wide gateway (one pooled SSH connection each).
_gateways: dict[str, SlurmGateway] = {}
_gateway_lock = threading.Lock()


def build_transport(conf: dict) -> Transport:
    """A transport from a ``SLURM_GATEWAY`` settings dict (``transport`` is ``ssh`` or ``local``)."""
    if conf["transport"] == "local":
        from .local import LocalTransport

        return LocalTransport()
    if conf["transport"] == "ssh":
        from .ssh import SSHTransport

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
