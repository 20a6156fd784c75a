"""A real SMTP server on 127.0.0.1 for development and tests (aiosmtpd): every message it accepts is
written to a Maildir and kept in memory; nothing is relayed anywhere.

``make dev`` starts it (scripts/dev.sh: ``python -P notifications/sink.py serve``: ``-P`` keeps this
folder off ``sys.path``, where ``selectors.py`` would shadow the standard library's; port
``PORTAL_EMAIL_PORT``, default 8025, Maildir ``var/mail``); read the mail with
``.venv/bin/python -m notifications.sink show`` (``--last N``, ``--maildir DIR``). Tests start their own
on a free port (``tests/notifications/conftest.py``), and can make it stall on DATA or QUIT
(:attr:`SinkHandler.stall`, ``stall_after``, ``stall_quit_after``) to kill a sender mid-send. No
Django here: it runs on its own.
"""

from __future__ import annotations

import argparse
import asyncio
import email
import email.utils
import mailbox
import sys
import threading
import time
from email.message import EmailMessage
from email.policy import default
from pathlib import Path

DEFAULT_MAILDIR = Path(__file__).resolve().parent.parent / "var" / "mail"


class SinkHandler:
    """aiosmtpd handler. ``messages``: every accepted message (parsed), in order; ``maildir`` (a path,
    or None): also written there. ``stall``: while set, DATA waits (``in_data`` is set when one
    waits) until ``release`` is set, then answers 451 (not accepted), as a server that hangs would.
    ``stall_after`` (a count, or None): DATA stalls the same way once that many messages were
    accepted (a server that hangs in the middle of a batch). ``stall_quit_after`` (a count, or None):
    once that many messages were accepted, QUIT waits (``in_quit`` is set) until ``release``, then
    answers 221: the message is accepted, the conversation not yet over.
    ``refused``: recipient addresses answered 550 (a permanent refusal)."""

    def __init__(self, maildir: Path | None = None):
        self.maildir = mailbox.Maildir(str(maildir), create=True) if maildir else None
        self.messages: list[EmailMessage] = []
        self.stall = threading.Event()
        self.release = threading.Event()
        self.in_data = threading.Event()
        self.stall_after: int | None = None
        self.stall_quit_after: int | None = None
        self.in_quit = threading.Event()
        self.refused: set[str] = set()
        self._lock = threading.Lock()

    async def handle_RCPT(self, server, session, envelope, address, rcpt_options) -> str:
        if address in self.refused:
            return "550 5.1.1 No such mailbox here"
        envelope.rcpt_tos.append(address)
        return "250 OK"

    def _accepted(self, at_least: int | None) -> bool:
        with self._lock:
            return at_least is not None and len(self.messages) >= at_least

    async def _until_released(self) -> None:
        while not self.release.is_set():
            await asyncio.sleep(0.05)

    async def handle_DATA(self, server, session, envelope) -> str:
        if self.stall.is_set() or self._accepted(self.stall_after):
            self.in_data.set()
            await self._until_released()
            return "451 4.3.0 The test sink stalled on DATA; try again later"
        raw = envelope.original_content or envelope.content
        with self._lock:
            self.messages.append(email.message_from_bytes(raw, policy=default))
            if self.maildir is not None:
                self.maildir.add(raw)
        return "250 2.0.0 OK: queued in the sink"

    async def handle_QUIT(self, server, session, envelope) -> str:
        if self._accepted(self.stall_quit_after):
            self.in_quit.set()
            await self._until_released()
        return "221 Bye"

    def by_message_id(self, message_id: str) -> list[EmailMessage]:
        """The accepted messages with this Message-ID header."""
        with self._lock:
            return [m for m in self.messages if m["Message-ID"] == message_id]


def serve(host: str, port: int, maildir: Path) -> None:
    """Run the sink until interrupted (SIGTERM/SIGINT)."""
    from aiosmtpd.controller import Controller

    controller = Controller(SinkHandler(maildir), hostname=host, port=port)
    controller.start()
    print(f"SMTP sink on {host}:{port}, writing to the Maildir {maildir}", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        controller.stop()


def show(maildir: Path, last: int) -> int:
    """Print the ``last`` newest messages of the Maildir (headers and text), oldest first."""
    if not maildir.exists():
        print(f"No mail yet: {maildir} does not exist (is `make dev` running?).")
        return 0
    box = mailbox.Maildir(str(maildir), factory=None, create=False)
    found = []
    for key in box.keys():
        raw = box.get_bytes(key)
        found.append((key, email.message_from_bytes(raw, policy=default)))
    found.sort(key=lambda item: email.utils.parsedate_to_datetime(item[1]["Date"]).timestamp() if item[1]["Date"] else 0)
    for _, msg in found[-last:]:
        body = msg.get_body(preferencelist=("plain",))
        print(
            f"From: {msg['From']}\nTo: {msg['To']}\nDate: {msg['Date']}\nSubject: {msg['Subject']}\nMessage-ID: {msg['Message-ID']}\n"
        )
        print(body.get_content() if body else "")
        print("=" * 72)
    print(f"{len(found)} message(s) in {maildir}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m notifications.sink", description=__doc__.split("\n\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("serve", help="run the SMTP sink")
    run.add_argument("--host", default="127.0.0.1")
    run.add_argument("--port", type=int, default=8025)
    run.add_argument("--maildir", type=Path, default=DEFAULT_MAILDIR)
    look = sub.add_parser("show", help="print the mail the sink received")
    look.add_argument("--maildir", type=Path, default=DEFAULT_MAILDIR)
    look.add_argument("--last", type=int, default=20)
    args = parser.parse_args(argv)
    if args.command == "serve":
        serve(args.host, args.port, args.maildir)
        return 0
    return show(args.maildir, args.last)


if __name__ == "__main__":
    sys.exit(main())
