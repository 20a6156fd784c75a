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


def test_the_paramiko_internals_the_ordered_writes_use_are_there():
    """slurm/transports/ssh_writes.py takes paramiko's send lock and builds its own data and EOF
    packets; a paramiko without these names must fail here, not drop connections in production."""
    import threading

    from paramiko.common import cMSG_CHANNEL_DATA

    transport = paramiko.Transport(__import__("socket").socket())
    try:
        assert isinstance(transport.clear_to_send, threading.Event)
        assert hasattr(transport.clear_to_send_lock, "acquire") and callable(transport._send_message)
    finally:
        transport.close()
    chan = paramiko.Channel(1)
    assert {"closed", "eof_sent", "out_window_size", "out_max_packet_size", "remote_chanid"} <= set(vars(chan))
    assert isinstance(chan.out_buffer_cv, threading.Condition) and callable(chan._send_eof)
    assert cMSG_CHANNEL_DATA == bytes([94])  # SSH_MSG_CHANNEL_DATA (RFC 4254)


class _Wire:
    """A paramiko transport's send side as ssh_writes uses it: records each packet sent."""

    def __init__(self, active=True):
        import threading

        self.clear_to_send, self.clear_to_send_lock, self.sent, self.active = threading.Event(), threading.Lock(), [], active
        self.clear_to_send.set()

    def is_active(self):
        return self.active

    def _send_message(self, message):
        self.sent.append(message.asbytes()[:1])


def _channel(wire, window=1 << 20, closed=False):
    chan = paramiko.Channel(7)
    chan.transport, chan.remote_chanid, chan.active, chan.closed = wire, 9, True, closed
    chan.out_window_size, chan.out_max_packet_size = window, 32768
    return chan


def test_stdin_then_eof_go_out_in_packets_the_window_allows():
    import time

    from slurm.transports.ssh_writes import write_stdin_and_eof

    wire = _Wire()
    chan = _channel(wire)
    write_stdin_and_eof(chan, b"x" * 70000, time.monotonic() + 5)
    data, eof = bytes([94]), bytes([96])  # SSH_MSG_CHANNEL_DATA, SSH_MSG_CHANNEL_EOF
    assert wire.sent == [data, data, data, eof]  # 32704 + 32704 + 4592 bytes, then the EOF
    assert chan.eof_sent and chan.out_window_size == (1 << 20) - 70000


@pytest.mark.parametrize("wire_active, closed", [(True, True), (False, False)])
def test_nothing_is_written_once_the_channel_or_connection_is_closed(wire_active, closed):
    """A command that ended (sshd's CLOSE handled) before its stdin was written: no packet goes out,
    and the caller gets no error (the command's exit status says how it ended)."""
    import time

    from slurm.transports.ssh_writes import write_stdin_and_eof

    wire = _Wire(active=wire_active)
    write_stdin_and_eof(_channel(wire, closed=closed), b"script", time.monotonic() + 5)
    assert wire.sent == []
