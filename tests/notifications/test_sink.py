"""The dev SMTP sink as make dev runs it (scripts/dev.sh: ``python -P notifications/sink.py serve``, a
process of its own) and docs/admin-guide.md's command that reads its mail (``python -m notifications.sink show``)."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path

import pytest
from django.core.mail import EmailMessage, get_connection

from tests.conftest import free_port
from tests.waiting import wait_for

REPO = Path(__file__).resolve().parents[2]


def test_the_sink_process_keeps_each_message_and_show_prints_it(tmp_path):
    port, maildir = free_port(), tmp_path / "mail"
    argv = [
        sys.executable,
        "-P",
        str(REPO / "notifications" / "sink.py"),
        "serve",
        "--port",
        str(port),
        "--maildir",
        str(maildir),
    ]
    sink = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:

        def listening() -> bool:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                return True
            except OSError:
                if sink.poll() is not None:  # it exited: no use waiting (pytest.fail is not a "not yet")
                    pytest.fail(sink.stdout.read(), pytrace=False)
                return False

        wait_for(
            f"the sink listening on 127.0.0.1:{port}",
            listening,
            timeout=15,
            every=0.1,
            seen=lambda: f"sink exit code: {sink.poll()}",
        )
        connection = get_connection("django.core.mail.backends.smtp.EmailBackend", host="127.0.0.1", port=port, timeout=5)
        message = EmailMessage(
            "[GPU portal] Failed: job 7", "exit code 3", "portal@localhost", ["alice@example.org"], connection=connection
        )
        message.extra_headers["Message-ID"] = "<notification-job.cluster1.7.x.failed@portal>"
        assert message.send() == 1
    finally:
        sink.terminate()
        sink.wait(10)
    shown = subprocess.run(
        [sys.executable, "-m", "notifications.sink", "show", "--maildir", str(maildir)],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    assert "Subject: [GPU portal] Failed: job 7" in shown and "exit code 3" in shown and "1 message(s)" in shown
