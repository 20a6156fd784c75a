"""``gpuportal logs``: print a job's output, once or following it until the job ends."""

from __future__ import annotations

import sys
import time

from .args import job_reference, non_negative_int, positive_float
from .base import Commands, Context, err, out
from .client import Client
from .output import dumps_json

#: The most bytes one log page holds (the server's read: 64 KiB).
FULL_PAGE = 64 * 1024
#: A page at least this big is full, so more is probably waiting: read again without sleeping. The
#: server keeps back a UTF-8 character cut by the page's end (at most 3 of its at most 4 bytes), so
#: a full page of non-ASCII text is up to 3 bytes short of :data:`FULL_PAGE`.
FULL_PAGE_AT_LEAST = FULL_PAGE - 3
#: With -f, give up reading an ended job's log after this many failed reads in a row.
MAX_READ_FAILURES = 5
#: The REF help of the commands that take one job: what ``gpuportal ls`` prints in its ID column works
#: (an argparse help string: a literal % is written %%).
REF_HELP = "the job's ID as `gpuportal ls` prints it (123, 123_[1-50%%5], 123+0-1) or its key"
#: The ``--cluster`` help of the commands that take a job's REF.
CLUSTER_HELP = "for a Slurm job id: the cluster it is on (ids are per cluster; default: your newest job with that id)"


def add_commands(commands: Commands) -> None:
    """Register ``logs``."""
    p = commands.add("logs", cmd_logs, "print a job's output (stdout, or stderr with --err)")
    p.add_argument("ref", metavar="REF", type=job_reference, help=REF_HELP)
    p.add_argument("--cluster", metavar="NAME", help=CLUSTER_HELP)
    p.add_argument("-f", "--follow", action="store_true", help="keep printing new output until the job ends")
    p.add_argument("--err", action="store_true", help="the job's stderr instead of stdout")
    p.add_argument("--tail", type=non_negative_int, metavar="BYTES", help="start with only the last BYTES bytes")
    p.add_argument(
        "--interval", type=positive_float, default=2.0, metavar="SECONDS", help="seconds between polls with -f (default 2)"
    )


def cmd_logs(ctx: Context) -> int:
    """``logs [-f] [--err] [--tail BYTES] [--interval S] REF``: see :func:`follow_log`."""
    a = ctx.args
    return follow_log(
        ctx, a.ref, stream="err" if a.err else "out", follow=a.follow, interval=a.interval, tail=a.tail, cluster=a.cluster or ""
    )


def follow_log(
    ctx: Context,
    ref: str,
    *,
    stream: str = "out",
    follow: bool = True,
    interval: float = 2.0,
    tail: int | None = None,
    cluster: str = "",
) -> int:
    """Print job ``ref``'s log (``stream`` ``"out"``/``"err"``) from the start (or only its last
    ``tail`` bytes). Without ``follow``: read pages until one is empty, return 0. With ``follow``: poll
    every ``interval`` seconds until a page says ``final`` and has no new data, then report the
    job's end on stderr; returns 0 when the job COMPLETED, else 1. With ``--json`` each page is one
    JSON line on stdout (``tail`` then does not apply)."""
    client = ctx.client()
    offset = 0
    if tail is not None and not ctx.json:
        offset, last = _print_tail(client, ref, stream, cluster, tail)
        if not follow:
            return _read_end(ref, stream, last, offset)
    reader = _LogReader(ctx, client, ref, stream, cluster, interval)
    code = reader.read(offset, follow)
    if code is not None:
        return code
    return _report_end(client, ref, cluster, reader.page)


def _write(data: str) -> None:
    sys.stdout.write(data)
    sys.stdout.flush()


def _next_offset(page: dict, offset: int) -> int:
    nxt = page.get("next_offset")
    if isinstance(nxt, int) and not isinstance(nxt, bool):
        return nxt
    return offset + len((page.get("data") or "").encode("utf-8"))


def _print_tail(client: Client, ref: str, stream: str, cluster: str, tail: int) -> tuple[int, dict]:
    """Print the log's last ``tail`` bytes (never a split character): one tail read (the server's
    ``tail``, at most :data:`FULL_PAGE`), and for more than it held the pages from ``tail`` bytes
    before where it ended. Returns the byte offset where the log ended and the last page read (it
    may say why nothing came, ``error``, or that there is no file, ``missing``). A server that did
    not read a tail (older ones: no ``tail`` echoed; they answer from offset 0) or could not (an
    ``error``, a sudo rule without ``stat``, say) has the whole log read instead, as before."""
    page = client.job_log(ref, stream, cluster=cluster, tail=min(tail, FULL_PAGE))
    if page.get("tail") is None:
        return _print_last(client, ref, stream, cluster, tail, 0, page)
    if page.get("error"):
        return _print_last(client, ref, stream, cluster, tail, 0)
    start = page.get("offset") or 0
    end = _next_offset(page, start)
    if start == 0 or page["tail"] >= tail:  # the page holds it all
        _write(page.get("data") or "")
        return end, page
    return _print_last(client, ref, stream, cluster, tail, max(0, end - tail))


def _print_last(
    client: Client, ref: str, stream: str, cluster: str, tail: int, offset: int, page: dict | None = None
) -> tuple[int, dict]:
    """Read the log from byte ``offset`` (``page``: its first page, when already read) until a page
    brings nothing new, and print the last ``tail`` bytes read (see :func:`_print_tail`). A start
    inside a character is the server's U+FFFD (one per byte, at most 3), left out."""
    kept = bytearray()
    while True:
        page = page if page is not None else client.job_log(ref, stream, offset, cluster)
        data = page.get("data") or ""
        nxt = _next_offset(page, offset)
        if not data and nxt == offset:
            break
        if not kept and offset:
            data = data[:3].lstrip("\ufffd") + data[3:]
        kept += data.encode("utf-8")
        if len(kept) > tail:
            del kept[: len(kept) - tail]
        offset, page = nxt, None
    _write(kept.decode("utf-8", errors="ignore"))
    return offset, page


def _read_end(ref: str, stream: str, page: dict, offset: int) -> int:
    """The exit status of a read without ``-f`` that ended at ``page`` (nothing new in it), at byte
    ``offset``: 1 after printing the server's ``error`` (it could not read the file this time); else
    0, saying on stderr that the portal does not know where the job wrote (``where_unknown``) or that
    there is no file yet (``missing``), at offset 0."""
    # Not in the contract, but the server may say why it could not read the file this time.
    read_error = str(page.get("error") or "")
    if read_error:
        err(f"error: {read_error}")
        return 1
    if page.get("where_unknown") and offset == 0:
        err(_where_unknown(ref, page))
    elif page.get("missing") and offset == 0:
        err(_no_file(ref, stream, page))
    return 0


def _no_file(ref: str, stream: str, page: dict, *, end_follows: bool = False) -> str:
    """What to say for a ``page`` with ``missing`` (no file at the path the portal knows), read at
    offset 0: a job still to run has none *yet*; an ended one (``final``) will not get one.
    ``end_follows``: the next line says how the job ended (``logs -f``), so this one does not."""
    what = "stderr" if stream == "err" else "output"
    state = page.get("state") or "unknown state"
    if page.get("final"):
        why = f"no {what} file: it wrote none, or the file was moved or removed"
        return f"job {ref}: {why}" if end_follows else f"job {ref} ended ({state}) and has {why}"
    return f"job {ref} has no {what} yet ({state})"


def _where_unknown(ref: str, page: dict) -> str:
    """What to say for a ``page`` whose ``where_unknown`` says the portal does not know where job
    ``ref`` wrote: the server's sentence (``message``, the job page's), else a short one."""
    return str(page.get("message") or f"where job {ref} wrote its output is not known to the portal")


class _LogReader:
    """Reads one job's log page by page from a byte offset and prints it (see :func:`follow_log`);
    :attr:`page` is the last page read."""

    def __init__(self, ctx: Context, client: Client, ref: str, stream: str, cluster: str, interval: float):
        self.ctx, self.client, self.ref, self.stream, self.cluster, self.interval = ctx, client, ref, stream, cluster, interval
        self.page: dict = {}
        self.announced = False
        self.last_error = ""
        self.failures = 0

    def read(self, offset: int, follow: bool) -> int | None:
        """Print pages from ``offset``. Returns the exit status when done without ``follow``, or
        ``None`` once a followed job's log has ended (:attr:`page` then says so)."""
        while True:
            page = self.page = self.client.job_log(self.ref, self.stream, offset, self.cluster)
            data = page.get("data") or ""
            nxt = _next_offset(page, offset)
            advanced = bool(data) or nxt != offset
            if self.ctx.json:
                out(dumps_json(page, pretty=False))
            elif data:
                _write(data)
            size = nxt - offset
            offset = nxt
            # Not in the contract, but the server may say why it could not read the file this time
            # (``"error": "..."``); such a page says nothing about the end of the log.
            read_error = "" if advanced else str(page.get("error") or "")
            if not follow:
                if advanced:
                    continue
                return _read_end(self.ref, self.stream, page, offset)
            if read_error:
                if self._read_failed(read_error, page):
                    time.sleep(self.interval)
                    continue
            else:
                self.failures = 0
            if page.get("final") and not advanced:
                if page.get("where_unknown") and offset == 0:
                    err(_where_unknown(self.ref, page))
                elif page.get("missing") and offset == 0:
                    err(_no_file(self.ref, self.stream, page, end_follows=True))
                return None
            if page.get("missing") and not page.get("final") and not self.announced:
                self._announce_wait()
            if advanced and (page.get("final") or size >= FULL_PAGE_AT_LEAST):
                continue  # drain what is already there
            time.sleep(self.interval)

    def _read_failed(self, read_error: str, page: dict) -> bool:
        """Count a failed read (saying why once per new reason); whether to try again (an ended
        job's log is given up after :data:`MAX_READ_FAILURES` failures in a row)."""
        self.failures += 1
        if read_error != self.last_error:
            err(f"warning: {read_error}")
            self.last_error = read_error
        return not (page.get("final") and self.failures >= MAX_READ_FAILURES)

    def _announce_wait(self) -> None:
        job = self.client.get_job(self.ref, self.cluster)
        page = self.page
        why = job.get("explanation") or job.get("state_label") or job.get("state") or page.get("state") or "no output yet"
        err(f"waiting for the job to start ({why})")
        self.announced = True


def _report_end(client: Client, ref: str, cluster: str, page: dict) -> int:
    """Say on stderr how job ``ref`` ended; returns 0 when it COMPLETED, else 1."""
    job = client.get_job(ref, cluster)
    state = job.get("state") or page.get("state") or "UNKNOWN"
    code = job.get("exit_code")
    text = f"job {ref} ended: {state}"
    if code is not None:
        text += f" (exit code {code})"
    elif job.get("signal") is not None:
        text += f" (signal {job['signal']})"
    err(text)
    if state == "SUBMIT_FAILED" and job.get("submit_error"):
        err(f"  {job['submit_error']}")
    return 0 if state == "COMPLETED" else 1
