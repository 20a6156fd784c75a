"""The SSH transport (paramiko): one pooled connection per process, strict host keys.

- The socket has TCP_NODELAY (measured: 12.8 ms per sbatch instead of 93 ms).
- AES-GCM is offered first (:func:`_gcm_first`): authenticated encryption, with no HMAC pass of its own
  over every byte received. A poll's ``squeue --json`` of 8.3 MB cost 17-18 ms of CPU to receive instead
  of 24-25 ms with paramiko's first choice (AES-CTR + HMAC-SHA2-256). An sshd without it gets paramiko's
  usual order.
- The server's host key must already be in the configured known_hosts file, read as OpenSSH reads
  it (:mod:`slurm.transports.known_hosts`: several keys per host, hashed names, ``@revoked``); an unknown or
  changed key is refused with its SHA256 fingerprint and is never added.
- At most ``max_channels`` commands run at once on the connection (sshd's ``MaxSessions``);
  further callers wait for a free channel within their own deadline.
- stdin is written, and stdout and stderr are read, concurrently, so a command that writes
  megabytes to both never blocks on a full window. stdin and its EOF never reach sshd after the
  channel's CLOSE (:mod:`slurm.transports.ssh_writes`): sshd would drop the whole connection.
- A dropped connection is re-opened before a command starts; a command that was already sent is
  never re-sent. A channel sshd refused on a live connection never closes that connection: the
  other commands running on it go on.
"""

from __future__ import annotations

import io
import logging
import shlex
import socket
import threading
import time

import paramiko
from tenacity import Retrying, retry_if_exception_type, stop_after_attempt

from ..errors import SlurmTimeout, SlurmUnreachable
from .base import CommandResult
from .known_hosts import HostKeyRefused, KnownHost, check_host_key, expected_key_types, parse_known_hosts
from .ssh_writes import write_stdin_and_eof

logger = logging.getLogger(__name__)

READ_CHUNK = 65536  # bytes per recv
POLL = 0.2  # seconds a blocking recv waits before the deadline is looked at again


class _KnownHostsPolicy(paramiko.MissingHostKeyPolicy):
    """Every host key goes through :func:`slurm.transports.known_hosts.check_host_key` (the client holds no
    host keys of its own, so paramiko never compares one key per type): never trust on first use."""

    def __init__(self, entries: list[KnownHost], known_hosts: str, port: int):
        self.entries, self.known_hosts, self.port = entries, known_hosts, port

    def missing_host_key(self, client, hostname, key) -> None:
        host = hostname[1:].rsplit("]:", 1)[0] if hostname.startswith("[") else hostname
        try:
            check_host_key(self.entries, host, self.port, key.get_name(), key.asbytes(), source=self.known_hosts)
        except HostKeyRefused as refused:
            raise SlurmUnreachable(["ssh", hostname], None, message=str(refused)) from None


#: paramiko's host key algorithms -> the key type a known_hosts line names.
_KEY_TYPE_OF_ALGORITHM = {"rsa-sha2-512": "ssh-rsa", "rsa-sha2-256": "ssh-rsa"}


def _disabled_host_key_algorithms(expected: set[str]) -> list[str]:
    """Host key algorithms not to offer, so that the host presents a key of a listed type (OpenSSH
    orders them by known_hosts the same way). Nothing is disabled for a host with no listed key: the
    refusal then names what the host offers."""
    if not expected:
        return []
    return [alg for alg in paramiko.Transport._preferred_keys if _KEY_TYPE_OF_ALGORITHM.get(alg, alg) not in expected]


#: Ciphers offered first, in this order (OpenSSH's sshd has enabled both by default since 6.2).
GCM_CIPHERS = ("aes128-gcm@openssh.com", "aes256-gcm@openssh.com")


def _gcm_first(sock, **kwargs) -> paramiko.Transport:
    """A :class:`paramiko.Transport` on ``sock`` (``SSHClient.connect``'s ``transport_factory``; ``kwargs``
    as it passes them) that offers :data:`GCM_CIPHERS` before paramiko's other ciphers, which it
    still offers after them, in paramiko's order."""
    transport = paramiko.Transport(sock, **kwargs)
    options = transport.get_security_options()
    offered = tuple(options.ciphers)
    options.ciphers = tuple(c for c in GCM_CIPHERS if c in offered) + tuple(c for c in offered if c not in GCM_CIPHERS)
    return transport


class SSHTransport:
    """Runs commands over one pooled SSH connection as the portal's service user.

    ``host``/``port``: the submit host's sshd; ``user``: the service user; ``key_file``: its private
    key; ``known_hosts``: an OpenSSH known_hosts file holding the host's key; ``max_channels``: the
    most commands at once; ``connect_timeout``: seconds for TCP connect + handshake.
    """

    def __init__(
        self,
        *,
        host: str,
        port: int,
        user: str,
        key_file: str,
        known_hosts: str,
        max_channels: int = 10,
        connect_timeout: float = 10.0,
    ):
        self.host, self.port, self.user = host, port, user
        self.key_file, self.known_hosts = key_file, known_hosts
        self.connect_timeout = connect_timeout
        self.max_channels = max_channels
        self._channels = threading.BoundedSemaphore(max_channels)
        self._lock = threading.Lock()
        self._client: paramiko.SSHClient | None = None
        self.connections_opened = 0  # for tests and the check command

    # --- connection -------------------------------------------------------------------------
    def _connect(self) -> paramiko.SSHClient:
        argv = ["ssh", f"{self.user}@{self.host}:{self.port}"]
        try:
            sock = socket.create_connection((self.host, self.port), timeout=self.connect_timeout)
        except OSError as exc:
            raise SlurmUnreachable(argv, None, message=f"cannot reach sshd at {self.host}:{self.port}: {exc}") from exc
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        try:
            with open(self.known_hosts, encoding="utf-8", errors="replace") as f:
                entries = parse_known_hosts(f.read())
        except OSError as exc:
            sock.close()
            raise SlurmUnreachable(argv, None, message=f"cannot read known_hosts file {self.known_hosts}: {exc}") from exc
        client = paramiko.SSHClient()
        client.set_missing_host_key_policy(_KnownHostsPolicy(entries, self.known_hosts, self.port))
        disabled = _disabled_host_key_algorithms(expected_key_types(entries, self.host, self.port))
        try:
            client.connect(
                self.host,
                port=self.port,
                username=self.user,
                key_filename=self.key_file,
                sock=sock,
                timeout=self.connect_timeout,
                banner_timeout=self.connect_timeout,
                auth_timeout=self.connect_timeout,
                look_for_keys=False,
                allow_agent=False,
                disabled_algorithms={"keys": disabled} if disabled else None,
                transport_factory=_gcm_first,
            )
        except SlurmUnreachable:
            client.close()
            raise
        except paramiko.AuthenticationException as exc:
            client.close()
            raise SlurmUnreachable(
                argv, None, message=f"sshd refused the key {self.key_file} for user {self.user}: {exc}"
            ) from exc
        except (paramiko.SSHException, OSError) as exc:
            client.close()
            raise SlurmUnreachable(argv, None, message=f"SSH to {self.host}:{self.port} failed: {exc}") from exc
        self.connections_opened += 1
        return client

    def _transport(self, *, replace: paramiko.Transport | None = None) -> paramiko.Transport:
        """The pooled connection, opened when there is none or it is no longer active. ``replace``:
        a connection found broken; it is closed and replaced only while it is still the pooled one
        (another thread may have replaced it already, and closing the new one would cut off the
        commands running on it)."""
        with self._lock:
            if replace is not None and self._client is not None and self._client.get_transport() is replace:
                self._client.close()
                self._client = None
            if self._client is None or not self._client.get_transport() or not self._client.get_transport().is_active():
                if self._client is not None:
                    self._client.close()
                self._client = self._connect()
            return self._client.get_transport()

    def _open_channel(self, argv: list[str], timeout: float) -> paramiko.Channel:
        """Open a session channel on the pooled connection, in at most two attempts (tenacity's, no
        wait). When an open fails because the connection broke (an I/O error, or the connection is no
        longer active), the second attempt runs on a new connection (safe: nothing was sent yet).
        When sshd refused the channel or did not answer in time on a connection that is still alive,
        the second attempt runs on the same one: up to ``max_channels`` commands of other threads run
        on it, and closing it would cut each of them off mid-command. The last failure is raised as
        :class:`SlurmUnreachable`."""
        retrying = Retrying(
            stop=stop_after_attempt(2),
            retry=retry_if_exception_type((paramiko.SSHException, EOFError, OSError)),
            before_sleep=lambda state: logger.info("SSH channel open failed (%s); trying once more", state.outcome.exception()),
            reraise=True,
        )
        broken: paramiko.Transport | None = None
        try:
            for attempt in retrying:
                transport = self._transport(replace=broken)  # connect errors: never retried here
                with attempt:
                    try:
                        return transport.open_session(timeout=timeout)
                    except (EOFError, OSError):  # the connection's socket failed
                        broken = transport
                        raise
                    except paramiko.SSHException:  # a refusal or no answer: broken only if no longer active
                        broken = None if transport.is_active() else transport
                        raise
        except (paramiko.SSHException, EOFError, OSError) as exc:
            raise SlurmUnreachable(argv, None, message=f"cannot open an SSH channel: {exc}") from exc
        raise AssertionError("unreachable")

    def close(self) -> None:
        with self._lock:
            if self._client is not None:
                self._client.close()
                self._client = None

    # --- commands ---------------------------------------------------------------------------
    def execute(self, argv: list[str], *, stdin: bytes | None, timeout: float) -> CommandResult:
        """Run ``shlex.join(argv)`` in the service user's login shell; see :class:`Transport`."""
        started = time.monotonic()
        deadline = started + timeout
        if not self._channels.acquire(timeout=timeout):
            raise SlurmTimeout(argv, None, message=f"no free SSH channel within {timeout:g} s ({self.max_channels} in use)")
        try:
            chan = self._open_channel(argv, max(0.1, deadline - time.monotonic()))
            try:
                return self._run_on(chan, argv, stdin, deadline, started)
            finally:
                chan.close()
        finally:
            self._channels.release()

    def _run_on(self, chan, argv, stdin, deadline, started) -> CommandResult:
        chan.settimeout(POLL)
        chan.exec_command(shlex.join(argv))
        # each stream into one growing buffer, handed over without a copy (getvalue): a 150 MB
        # squeue --json is held once, not as its 64 KB chunks and their join beside them (the
        # poller's peak RSS: 150 MB received in 64 KB chunks peaked at 313 MB joined, 163 MB so)
        out, err = io.BytesIO(), io.BytesIO()
        failure: list[BaseException] = []

        def pump(recv, sink):
            try:
                while time.monotonic() < deadline:
                    try:
                        data = recv(READ_CHUNK)
                    except TimeoutError:
                        continue
                    if not data:
                        return
                    sink.write(data)
            except Exception as exc:  # noqa: BLE001 - handed to the caller's thread
                failure.append(exc)

        def feed():
            try:  # never after the channel's CLOSE: sshd would drop the connection (ssh_writes)
                write_stdin_and_eof(chan, stdin, deadline)
            except Exception as exc:  # noqa: BLE001
                failure.append(exc)

        threads = [
            threading.Thread(target=pump, args=(chan.recv_stderr, err), daemon=True),
            threading.Thread(target=feed, daemon=True),
        ]
        for t in threads:
            t.start()
        pump(chan.recv, out)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        finished = chan.status_event.wait(max(0.0, deadline - time.monotonic()))
        stdout, stderr = out.getvalue(), err.getvalue()
        if not finished or any(t.is_alive() for t in threads):
            raise SlurmTimeout(
                argv,
                None,
                stdout.decode("utf-8", "replace"),
                stderr.decode("utf-8", "replace"),
                message=f"{argv[:6]} did not finish within its deadline",
            )
        if failure:
            raise SlurmUnreachable(argv, None, message=f"SSH channel failed mid-command: {failure[0]}") from failure[0]
        return CommandResult(tuple(argv), chan.recv_exit_status(), stdout, stderr, time.monotonic() - started)
