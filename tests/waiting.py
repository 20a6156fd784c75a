"""The one way a test waits: for an event on the real thing (a job state, a row, a log line, a port),
with a deadline, and on timeout a message that says what it waited for and the last thing it saw.

    job = wait_for("job 42 to run", lambda: squeue_state(42) == "RUNNING" and squeue_state(42),
                   timeout=90, seen=lambda: scontrol_show_job(42))

No other test code calls ``time.sleep``: a pause of a known length is ``pause(seconds, why)`` here,
for the few tests whose subject is time itself (an idle limit, a rate-limit window).
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import TypeVar

import pytest

T = TypeVar("T")

#: How long a probe's last value may be in the failure message (characters).
SHOWN = 2000


def wait_for(
    what: str,
    probe: Callable[[], T],
    *,
    timeout: float = 60.0,
    every: float = 0.25,
    seen: Callable[[], object] | None = None,
) -> T:
    """Call ``probe`` every ``every`` seconds until it returns something true, and return that value.

    After ``timeout`` seconds (``time.monotonic``, so the unit tests' moved clock does not matter) the
    test fails with "timed out after N s waiting for <what>", the probe's last value (or the exception
    it last raised) and, when given, ``seen()``: the state of the thing waited on (``scontrol show
    job``, a log's tail). An exception from ``probe`` counts as "not yet"; the probe is always called
    at least once, and once more at the deadline."""
    deadline = time.monotonic() + timeout
    last: object = None
    while True:
        try:
            value = probe()
        except Exception as exc:  # noqa: BLE001 - "not yet": the last one is shown on timeout
            value, last = None, exc
        else:
            last = value
        if value:
            return value
        if time.monotonic() >= deadline:
            pytest.fail(_timeout_message(what, timeout, last, seen), pytrace=False)
        time.sleep(min(every, max(0.0, deadline - time.monotonic())))


def _timeout_message(what: str, timeout: float, last: object, seen: Callable[[], object] | None) -> str:
    lines = [f"timed out after {timeout:.0f} s waiting for {what}", f"last value: {_short(last)}"]
    if seen is not None:
        try:
            lines.append(f"seen: {_short(seen())}")
        except Exception as exc:  # noqa: BLE001 - the message must still be made
            lines.append(f"seen: (could not be read: {exc!r})")
    return "\n".join(lines)


def _short(value: object) -> str:
    text = value if isinstance(value, str) else repr(value)
    return text if len(text) <= SHOWN else "..." + text[-SHOWN:]


def pause(seconds: float, why: str) -> None:
    """Let ``seconds`` of real time pass, for a test whose subject is time itself (a job that must run
    for a while, a window that must close). ``why`` says which; it is shown if the test is stopped."""
    assert why, "say why the test must let time pass"
    time.sleep(seconds)


def log_tail(path, lines: int = 40) -> str:
    """The last ``lines`` lines of a log file, for ``seen=`` (empty if it cannot be read)."""
    try:
        with open(path, errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError as exc:
        return f"({path}: {exc})"


#: Each lab cluster's root on this host: cluster2's daemons and commands run in a chroot.
CLUSTER_ROOT = {"cluster1": None, "cluster2": "/srv/cluster2"}


def scontrol_show_job(job_id, *, cluster: str = "cluster1") -> str:
    """``scontrol show job <id>`` on lab cluster ``cluster`` (cluster2's in its root, ``/srv/cluster2``),
    for ``seen=``: what Slurm says of the job when a wait times out."""
    argv = ["scontrol", "show", "job", str(job_id)]
    if root := CLUSTER_ROOT.get(cluster):
        argv = ["chroot", root, *argv]
    done = subprocess.run(argv, capture_output=True, text=True, timeout=30)
    return (done.stdout + done.stderr).strip()


def wait_for_job(job, states, *, timeout: float = 90, accounting_read: bool = False):
    """The portal's ``Job`` once a poll of its cluster (``jobs.worker.services.snapshot_refresh``, once a
    second) shows it in one of ``states``; with ``accounting_read``, also once accounting's figures
    replaced the queue's (``accounting_pending`` false). On timeout the failure shows the portal's
    state and reason and ``scontrol show job``."""
    from jobs.worker.services import snapshot_refresh

    def probe():
        snapshot_refresh(cluster=job.cluster)
        job.refresh_from_db()
        return job if job.state in states and not (accounting_read and job.accounting_pending) else None

    return wait_for(
        f"job {job.slurm_job_id} on {job.cluster} to be {'/'.join(sorted(states))}"
        + (", its accounting read" if accounting_read else ""),
        probe,
        timeout=timeout,
        every=1,
        seen=lambda: (
            f"portal: {job.state} ({job.reason}) accounting_pending={job.accounting_pending}\n"
            f"{scontrol_show_job(job.slurm_job_id, cluster=job.cluster)}"
        ),
    )
