"""A command's stdin and EOF, written so that sshd never receives them after the channel's CLOSE.

Why: when a command ends, sshd sends EOF and CLOSE; paramiko's own thread answers with its CLOSE at once,
and sshd then frees the channel. paramiko's ``Channel.send`` and ``Channel.shutdown_write`` look at the
channel under its lock but put the packet on the wire after releasing it, so a write that raced the
command's end can reach sshd *after* that CLOSE. sshd takes a packet for a freed channel as a protocol
error and drops the whole connection ("ieof packet referred to nonexistent channel 8"), cutting off every
other command on the pooled connection; a command cut off that way ends with no exit status (-1). Seen on
the lab's sshd: 3 to 29 of 400 short commands on eight threads failed, with two to five reconnections
(paramiko's issue tracker: "ieof packet referred to nonexistent channel" caused by shutdown_write).

How: a write holds the connection's send lock (paramiko's ``Transport.clear_to_send_lock``, which every
other packet, the CLOSE included, takes on its way out) while it looks at the channel and sends, so the
CLOSE goes either after the write or before the look, which then sees the channel closed and sends
nothing. The lock is taken as paramiko's ``Transport._send_user_message`` takes it: never during a key
exchange. A window wait happens without the lock. This reads paramiko internals that have kept their names
since paramiko 1.x; ``tests/slurm/test_ssh_unit.py`` fails when an installed paramiko lacks one.
"""

from __future__ import annotations

import time

import paramiko
from paramiko.common import cMSG_CHANNEL_DATA
from paramiko.message import Message

#: Seconds one wait for a key exchange's end or for send window is allowed before the deadline is
#: looked at again.
WAIT_STEP = 0.1
#: Room left in a packet for its header, as paramiko's own ``Channel.send`` leaves (bytes).
PACKET_OVERHEAD = 64


class ChannelClosed(Exception):
    """The command ended (sshd closed its channel) before everything was written: not an error of
    the connection; the command's own exit status says how it ended."""


def _take_send_lock(transport: paramiko.Transport, deadline: float) -> bool:
    """Hold ``transport.clear_to_send_lock`` outside any key exchange. False (lock not held) when the
    connection is no longer active; raises ``TimeoutError`` once ``deadline`` (``time.monotonic()``)
    has passed."""
    while True:
        transport.clear_to_send.wait(WAIT_STEP)
        if not transport.is_active():
            return False
        transport.clear_to_send_lock.acquire()
        if transport.clear_to_send.is_set():
            return True
        transport.clear_to_send_lock.release()
        if time.monotonic() > deadline:
            raise TimeoutError("a key exchange did not end before the command's deadline")


def _send_once(chan: paramiko.Channel, data: memoryview | None, deadline: float) -> int:
    """Send one packet: up to ``len(data)`` bytes of stdin (what the send window allows), or the
    EOF when ``data`` is None. Returns the bytes sent (0: no window yet, or the EOF). Raises
    :class:`ChannelClosed` when the channel is closed or the connection is gone."""
    transport = chan.transport
    if not _take_send_lock(transport, deadline):
        raise ChannelClosed("the connection is no longer active")
    try:
        with chan.lock:
            if chan.closed or chan.eof_sent:
                raise ChannelClosed("the channel is closed")
            if data is None:
                message, size = chan._send_eof(), 0
            else:
                size = min(len(data), chan.out_window_size, chan.out_max_packet_size - PACKET_OVERHEAD)
                if size <= 0:
                    return 0
                chan.out_window_size -= size
                message = Message()
                message.add_byte(cMSG_CHANNEL_DATA)
                message.add_int(chan.remote_chanid)
                message.add_string(bytes(data[:size]))
        if message is not None:
            transport._send_message(message)
        return size
    finally:
        transport.clear_to_send_lock.release()


def write_stdin_and_eof(chan: paramiko.Channel, stdin: bytes | None, deadline: float) -> None:
    """Write ``stdin`` (bytes, possibly empty or None) to the running command, then its EOF, each
    packet in order with the channel's CLOSE (module docstring). Returns quietly when the command
    ends first (it need not read its stdin) and when ``deadline`` (``time.monotonic()``) passes (the
    caller reports the timeout); raises ``TimeoutError`` for a key exchange that outlasts it."""
    view = memoryview(stdin or b"")
    try:
        while view:
            if time.monotonic() >= deadline:
                return
            sent = _send_once(chan, view, deadline)
            if not sent:  # the send window is full: wait for sshd's window adjust, without the lock
                with chan.out_buffer_cv:
                    if chan.out_window_size == 0 and not chan.closed:
                        chan.out_buffer_cv.wait(WAIT_STEP)
            view = view[sent:]
        _send_once(chan, None, deadline)
    except ChannelClosed:
        return
