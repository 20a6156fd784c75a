"""The tail of a job's stdout/stderr, read as the job's owner through the gateway.

``tail -c <PORTAL_LOG_TAIL_BYTES> -- <file>`` runs as the owner (sudo rule), so the portal sees
only what the owner may read. Results are cached in Redis for a few seconds per job and stream,
so many viewers or HTMX refreshes cost one read.
"""

from __future__ import annotations

import codecs
import re
from dataclasses import dataclass

from django.conf import settings
from django.core.cache import cache

from slurm import SlurmError, get_gateway

from ..models import Job

ACTIVE_CACHE_SECONDS = 3
#: Why no log is shown where the portal does not know the job's files (``where_unknown``): the job
#: page's sentence, also the API's (``GET /jobs/{ref}/log``) and so the CLI's. True of both such jobs:
#: one that ended before the poller saw it at all (imported from accounting) and an array it saw
#: only while every task waited (the queue gives an array's path once a task has started).
WHERE_UNKNOWN = (
    "Where this job wrote its output is not known: it ended before the portal saw it running, and this "
    "cluster's accounting does not keep the paths."
)
_UNREACHED = "The log could not be read right now"
FINAL_CACHE_SECONDS = 60


@dataclass(frozen=True)
class LogTail:
    """``text``: the last bytes decoded as UTF-8 (invalid bytes replaced; templates escape HTML);
    ``truncated``: the file is longer than what is shown; ``missing``: no file yet; ``error``: why
    it could not be read (empty when fine)."""

    text: str = ""
    truncated: bool = False
    missing: bool = False
    error: str = ""
    #: No path is known and none will be: a job submitted outside the portal that ended unseen on a
    #: Slurm whose accounting does not keep the paths (22.05's sacct has none). An outside job not
    #: ended (an array whose tasks all wait) may have no path yet, and one cancelled before it started
    #: wrote nothing: those are ``missing`` alone.
    where_unknown: bool = False


#: A line a checkpointing job prints when it starts again from its checkpoint ("resuming from epoch 4", as
#: examples/train_digits_job.sh does; "resumed from step 1200"): the unit and where.
RESUME_LINE = re.compile(r"\bresum(?:ing|ed) from (epoch|step|iteration|checkpoint) (\w+)", re.IGNORECASE)


def resumed_from(text: str) -> str:
    """Where the job's latest run resumed, as its log says it (the last :data:`RESUME_LINE` in
    ``text``): ``"epoch 4"``; ``""`` when the log says nothing of it."""
    found = RESUME_LINE.findall(text or "")
    return " ".join(found[-1]).lower() if found else ""


def _where_unknown(job: Job) -> bool:
    """Whether no path of ``job``'s is known and none will be (:attr:`LogTail.where_unknown`): an
    outside job that has ended without one. One not ended may yet get one from the queue (an
    array's first task to start gives the poller its path). One cancelled before it started
    (:attr:`Job.is_cancelled_before_start`: an array the poller saw with every task waiting, then
    cancelled) wrote nothing: "no output was written", as for a portal job cancelled while pending."""
    return job.is_outside and bool(job.slurm_job_id) and job.is_final and not job.is_cancelled_before_start


def log_path(job: Job, stream: str) -> str:
    """The file of ``stream`` (``out`` or ``err``), or "" before submission. A portal job's path is
    the one it was sent with, ``%j`` filled in; an outside job's is the one Slurm's job record gave,
    already filled in by the poller (:func:`jobs.worker.outside.log_paths`; an array's: its latest started
    task's)."""
    template = job.output_path if stream == "out" else job.error_path
    if not template or not job.slurm_job_id:
        return ""
    if job.is_outside:
        return template
    return template.replace("%j", str(job.slurm_job_id))


def job_log_tail(job: Job, stream: str) -> LogTail:
    """The tail of ``stream`` (``out``/``err``). Never raises: failures come back in ``error``."""
    path = log_path(job, stream)
    if not path:
        return LogTail(missing=True, where_unknown=_where_unknown(job))
    # The job's phase is part of the key: what was read while it ran (no file yet, an early tail) is
    # never shown once it has ended, as its final output.
    key = f"joblog:{job.key}:{stream}:{'final' if job.is_final else 'active'}"
    cached = cache.get(key)
    if cached is not None:
        return LogTail(**cached)
    tail = log_tail_read(job.cluster, path, as_user=job.user.username, limit=settings.PORTAL_LOG_TAIL_BYTES)
    if not tail.error.startswith(_UNREACHED):  # a failure to reach the cluster is asked again next time
        cache.set(key, tail.__dict__, FINAL_CACHE_SECONDS if job.is_final else ACTIVE_CACHE_SECONDS)
    return tail


def log_tail_read(cluster: str, path: str, *, as_user: str, limit: int) -> LogTail:
    """The last ``limit`` bytes of the file ``path`` on ``cluster``, read as ``as_user`` with ``tail -c
    <limit+1> -- <path>`` (one byte more tells whether the file is longer), uncached. Never raises:
    a failure comes back in ``error`` (``missing`` when there is no such file)."""
    try:
        result = get_gateway(cluster).run(["tail", "-c", str(limit + 1), "--", path], as_user=as_user, check=False, timeout=10)
    except SlurmError as exc:
        return LogTail(error=f"{_UNREACHED} ({exc.message}).")
    if result.returncode != 0:
        return LogTail(missing=True) if "No such file" in result.err else LogTail(error=result.err.strip()[:300])
    data = result.stdout
    return LogTail(text=data[-limit:].decode("utf-8", errors="replace"), truncated=len(data) > limit)


@dataclass(frozen=True)
class LogChunk:
    """Bytes ``offset`` .. ``next_offset`` of a log as text (``text``; a UTF-8 character split by the
    chunk's end is left for the next read), ``missing`` when there is no file yet, ``error`` why it
    could not be read ("" when fine), ``where_unknown`` (with ``missing``) when no path is known, as
    :attr:`LogTail.where_unknown`: no file will ever be read (:data:`WHERE_UNKNOWN`). ``tail``: the
    bytes asked for from the file's end, for a tail read (``None`` for a read from an offset)."""

    offset: int
    next_offset: int
    text: str = ""
    missing: bool = False
    error: str = ""
    where_unknown: bool = False
    tail: int | None = None

    def as_api(self) -> dict:
        """The fields of the API's log page (``GET /jobs/{ref}/log``) this chunk gives: ``offset``,
        ``next_offset`` (bytes), ``data``, ``missing``, ``error``, ``where_unknown``, ``message``
        (:data:`WHERE_UNKNOWN` with ``where_unknown``) and ``tail``."""
        return {
            "offset": self.offset,
            "next_offset": self.next_offset,
            "data": self.text,
            "missing": self.missing,
            "error": self.error,
            "where_unknown": self.where_unknown,
            "message": WHERE_UNKNOWN if self.where_unknown else "",
            "tail": self.tail,
        }


#: The bytes that continue a UTF-8 character (``10xxxxxx``): a tail read starting on one is inside a character.
_CONTINUATION = bytes(range(0x80, 0xC0))


def job_log_read(job: Job, stream: str, *, offset: int = 0, limit: int = 65536, tail: int | None = None) -> LogChunk:
    """At most ``limit`` bytes of ``stream`` (``out``/``err``) from byte ``offset``, read as the
    owner with ``dd if=<file> iflag=skip_bytes,count_bytes skip=<offset> count=<limit>`` (the CLI's
    ``logs -f`` follows a log with these). With ``tail`` (bytes, at most ``limit``; ``offset`` is
    then not used): the file's last ``tail`` bytes instead, read with the same ``dd`` from
    ``max(0, size - tail)``, ``size`` the file's length in bytes from ``stat -L -c %s -- <file>`` (as
    the owner too; ``-L``: of the file a link names, which ``dd`` reads, not of the link); a start inside a UTF-8 character moves past its continuation bytes (at most 3),
    and the chunk's ``offset`` with it. Cached for a few seconds per offset, or per tail. Never
    raises: a failure comes back in ``error`` (``missing`` when there is no such file)."""
    path = log_path(job, stream)
    if not path:
        return LogChunk(offset, offset, missing=True, where_unknown=_where_unknown(job), tail=tail)
    # A tail read's offset is learnt from the file: its key names the tail, never an offset.
    key = f"joblog:{job.key}:{stream}:{offset if tail is None else f'tail={tail}'}:{limit}"
    cached = cache.get(key)
    if cached is not None:
        return LogChunk(**cached)
    chunk = _read_offset(job, path, offset, limit) if tail is None else _read_tail(job, path, tail)
    if chunk.next_offset > chunk.offset:
        cache.set(key, chunk.__dict__, FINAL_CACHE_SECONDS if job.is_final else ACTIVE_CACHE_SECONDS)
    return chunk


def _read_offset(job: Job, path: str, offset: int, limit: int) -> LogChunk:
    """At most ``limit`` bytes of ``path`` from ``offset`` (:func:`job_log_read`), uncached."""
    data = _as_owner(job, _dd(path, offset, limit))
    if isinstance(data, LogChunk):
        return LogChunk(offset, offset, missing=data.missing, error=data.error)
    # Less than asked for from an ended job's file: its end, nothing more will come.
    return _decoded(offset, data, final=len(data) < limit and job.is_final)


def _read_tail(job: Job, path: str, tail: int) -> LogChunk:
    """The last ``tail`` bytes of ``path`` (:func:`job_log_read`), uncached: ``stat`` for its size,
    then ``dd`` from there (none for nothing to read)."""
    size = _as_owner(job, ["stat", "-L", "-c", "%s", "--", path])
    if isinstance(size, LogChunk):
        return LogChunk(0, 0, missing=size.missing, error=size.error, tail=tail)
    if not size.strip().isdigit():
        return LogChunk(0, 0, error=f"stat gave no size for the log: {size[:100]!r}", tail=tail)
    end = int(size)
    start = max(0, end - tail)
    data = _as_owner(job, _dd(path, start, end - start)) if end > start else b""
    if isinstance(data, LogChunk):
        return LogChunk(start, start, missing=data.missing, error=data.error, tail=tail)
    cut = len(data[:3]) - len(data[:3].lstrip(_CONTINUATION)) if start else 0
    chunk = _decoded(start + cut, data[cut:], final=job.is_final)  # read to the end the size said
    return LogChunk(chunk.offset, chunk.next_offset, chunk.text, tail=tail)


def _dd(path: str, offset: int, count: int) -> list[str]:
    return ["dd", f"if={path}", "iflag=skip_bytes,count_bytes", f"skip={offset}", f"count={count}", "status=none"]


def _as_owner(job: Job, argv: list[str]) -> bytes | LogChunk:
    """The output of ``argv`` run as ``job``'s owner on its cluster, or a chunk (offsets 0) saying
    why not: ``missing`` for "No such file", else ``error``."""
    try:
        result = get_gateway(job.cluster).run(argv, as_user=job.user.username, check=False, timeout=10)
    except SlurmError as exc:
        return LogChunk(0, 0, error=f"{_UNREACHED} ({exc.message}).")
    if result.returncode != 0:
        missing = "No such file" in result.err
        return LogChunk(0, 0, missing=missing, error="" if missing else result.err.strip()[:300])
    return result.stdout


def _decoded(offset: int, data: bytes, *, final: bool) -> LogChunk:
    """``data`` read from ``offset`` as a chunk. Unless ``final`` more may follow (a full read, or a
    job still writing): never split a character. The incremental decoder keeps a sequence cut off
    at the end, and the next read starts there."""
    decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
    text = decoder.decode(data, final=final)
    return LogChunk(offset, offset + len(data) - len(decoder.getstate()[0]), text)


@dataclass(frozen=True)
class BatchScript:
    """A job's batch script as Slurm keeps it: ``text`` (decoded as UTF-8, invalid bytes replaced),
    ``source`` (``slurmctld`` while the controller holds the job, ``accounting`` from slurmdbd), or
    ``error`` why it could not be read ("" when fine)."""

    text: str = ""
    source: str = ""
    error: str = ""


SCRIPT_CACHE_SECONDS = 3600


def job_batch_script(job: Job) -> BatchScript:
    """The batch script of ``job`` (one a person submitted outside the portal: the portal did not
    write it), read on request only, as the job's owner on its cluster: ``scontrol write batch_script
    <id> -`` while slurmctld holds the job, else ``sacct -B -j <id>`` (accounting keeps scripts with
    ``AccountingStoreFlags=job_script``). Cached for an hour per job. Never raises."""
    key = f"jobscript:{job.key}"
    cached = cache.get(key)
    if cached is not None:
        return BatchScript(**cached)
    if not job.slurm_job_id:
        return BatchScript(error="The job has no Slurm job id yet.")
    gateway = get_gateway(job.cluster)
    ids = str(job.slurm_job_id)
    errors = []
    for source, argv in (
        ("slurmctld", ["scontrol", "write", "batch_script", ids, "-"]),
        ("accounting", ["sacct", "-B", "-X", "-n", "-j", ids]),
    ):
        try:
            result = gateway.run(argv, as_user=job.user.username, check=False, timeout=10)
        except SlurmError as exc:
            return BatchScript(error=f"The script could not be read right now ({exc.message}).")
        text = _without_header(result.stdout.decode("utf-8", errors="replace"), ids)
        if result.returncode == 0 and text.strip() and text.strip() != "NONE":
            script = BatchScript(text=text[:200_000], source=source)
            cache.set(key, script.__dict__, SCRIPT_CACHE_SECONDS)
            return script
        errors.append(result.err.strip() or text.strip())
    detail = "; ".join(e for e in errors if e)[:300]
    return BatchScript(
        error="Slurm no longer holds this job's script (the controller forgot the job and accounting keeps no "
        f"scripts here){': ' + detail if detail else ''}."
    )


def _without_header(text: str, job_id: str) -> str:
    """``sacct -B`` output without the heading it puts above the script ("Batch Script for 2409" and a
    line of dashes: recorded in ``tests/fixtures/slurm/22.05/outside/sacct_batch_script.txt``; 24.11
    prints the script alone)."""
    lines = text.split("\n")
    if len(lines) > 1 and lines[0].strip() == f"Batch Script for {job_id}" and set(lines[1].strip()) == {"-"}:
        return "\n".join(lines[2:])
    return text
