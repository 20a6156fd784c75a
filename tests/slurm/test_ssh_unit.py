"""The SSH transport without a sshd (against the real one: test_ssh_transport.py): the refusal of an
unknown host key names the key as OpenSSH does (paramiko's own fingerprint); a dead pooled connection
is reopened once."""

import base64
import hashlib

import paramiko
import pytest

from slurm import SlurmUnreachable
from slurm.transports.ssh import _KnownHostsPolicy


def test_unknown_host_key_is_refused_with_its_openssh_fingerprint():
    key = paramiko.ECDSAKey.generate()
    expected = "SHA256:" + base64.b64encode(hashlib.sha256(key.asbytes()).digest()).decode().rstrip("=")  # as ssh-keygen -l
    assert key.fingerprint == expected  # paramiko's own says the same (slurm.transports.known_hosts.fingerprint_of)
    with pytest.raises(SlurmUnreachable) as info:
        _KnownHostsPolicy([], "/etc/portal/known_hosts", 22).missing_host_key(None, "submit.example", key)
    assert f"host key of submit.example is not known: ecdsa-sha2-nistp256 {expected}." in info.value.message
    assert "/etc/portal/known_hosts" in info.value.message


class _Pooled:
    """A pooled paramiko transport whose channel opens fail ``failures`` times with ``error``;
    ``alive``: what ``is_active()`` says after a failure."""

    def __init__(self, failures: int, error: type[Exception] = paramiko.SSHException, alive: bool = False):
        self.failures, self.error, self.alive = failures, error, alive

    def open_session(self, timeout):
        if self.failures:
            self.failures -= 1
            raise self.error("connection dropped")
        return "channel"

    def is_active(self):
        return self.alive


def _ssh():
    from slurm.transports.ssh import SSHTransport

    return SSHTransport(host="submit.example", port=22, user="portal", key_file="k", known_hosts="kh")


@pytest.mark.parametrize(
    "failures, error, alive, replaced, opened",
    [
        (0, paramiko.SSHException, True, [None], True),
        (1, EOFError, True, [None, "pooled"], True),  # the socket failed: a new connection
        (1, paramiko.SSHException, False, [None, "pooled"], True),  # the connection is gone: a new one
        (1, paramiko.SSHException, True, [None, None], True),  # sshd refused, connection alive: same one
        (2, OSError, True, [None, "pooled"], False),
    ],
)
def test_a_failed_channel_open_replaces_the_connection_only_when_it_broke(monkeypatch, failures, error, alive, replaced, opened):
    """Unit side of test_connection_is_reopened_after_it_drops and
    test_a_refused_channel_leaves_the_other_commands_running: two attempts; the second on a new
    connection only when the first one's connection broke."""
    ssh = _ssh()
    pooled, asked = _Pooled(failures, error, alive), []
    monkeypatch.setattr(ssh, "_transport", lambda *, replace=None: asked.append(replace and "pooled") or pooled)
    if opened:
        assert ssh._open_channel(["squeue"], 5) == "channel"
    else:
        with pytest.raises(SlurmUnreachable, match="cannot open an SSH channel: connection dropped"):
            ssh._open_channel(["squeue"], 5)
    assert asked == replaced


class _Client:
    def __init__(self):
        self.transport, self.closed = _Pooled(0, alive=True), False

    def get_transport(self):
        return self.transport

    def close(self):
        self.closed = True


def test_a_connection_is_replaced_only_while_it_is_still_the_pooled_one(monkeypatch):
    """Two threads whose opens failed on the same connection: the first replaces it, the second
    (asking to replace the old one) keeps the new one, which other threads already use."""
    ssh = _ssh()
    old, new = _Client(), _Client()
    made = iter([new])
    monkeypatch.setattr(ssh, "_connect", lambda: next(made))
    ssh._client = old
    assert ssh._transport(replace=old.transport) is new.transport and old.closed
    assert ssh._transport(replace=old.transport) is new.transport and not new.closed
    assert ssh._transport() is new.transport
