"""The batch script a job is submitted with (rendered only from validated values).

Every ``#SBATCH`` value is double-quoted the way sbatch reads it (backslash escapes ``"`` and
``\\``), so a job name like ``$(id)`` or ``a "b"`` reaches Slurm exactly as typed and is never
interpreted. A no-op line follows the portal's ``#SBATCH`` block: sbatch stops reading directives
at the first command, so nothing in the user's script can override them.

A job with an image (``job.image_name``) runs its script inside it (:func:`image_wrapped`): the
portal's lines first say which image and environment, check that the image is still usable (exit
:data:`jobs.models.IMAGE_GONE_EXIT` with one sentence when it is not), write the user's script to a
file in the job's directory (a quoted here-document: nothing in it is expanded) and ``exec`` the
runtime's command (:mod:`runtimes`). Every word of those lines comes from
:func:`runtimes.command_line`: an image path, a bind or a name with shell metacharacters in it is
one quoted word, never code.
"""

from __future__ import annotations

import posixpath
import re

from django.conf import settings

from images.selectors import image_get
from runtimes import Bind, command_line, default_binds, path_owners_sh, runtime_get

from ..models import IMAGE_GONE_EXIT, Job, image_gone_sentence

_SHEBANG = re.compile(r"^#!.*\n?")


def sbatch_quote(value: str) -> str:
    """Quote one ``#SBATCH`` option value. Raises ``ValueError`` on a newline, carriage return or NUL
    (they would end the directive line); the policy refuses them earlier with a message."""
    if any(c in value for c in "\r\n\x00"):
        raise ValueError("#SBATCH values must be one line")
    return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'


def gres_option(gpu_type: str, gpu_count: int) -> str | None:
    """``gpu:a100:2`` / ``gpu:2``, or ``None`` for no GPUs."""
    if not gpu_count:
        return None
    return f"gpu:{gpu_type}:{gpu_count}" if gpu_type else f"gpu:{gpu_count}"


def sbatch_directives(options: list[tuple[str, str]]) -> list[str]:
    """The ``#SBATCH --name="value"`` lines of ``options`` ((long option name, value) pairs, in
    order), each value quoted by :func:`sbatch_quote`: the one place the portal writes ``#SBATCH``
    lines, for batch jobs (:func:`render_batch_script`) and sessions
    (:func:`interactive.job.script.session_script`). Raises ``ValueError`` as :func:`sbatch_quote`."""
    return [f"#SBATCH --{name}={sbatch_quote(value)}" for name, value in options]


def render_batch_script(job: Job, *, home: str = "") -> str:
    """The whole script sent to ``sbatch`` on stdin. Requires ``job.workdir``, ``job.output_path``
    and ``job.error_path`` to be set, and for a job with an image the user's ``home`` on the cluster
    (bound into the image). Options: name, partition, account (when known), QOS (the priority class, when chosen), GRES,
    CPUs per task, memory (MiB), time (minutes), chdir, output/error files, ``--comment=portal:<key>``,
    and ``--requeue`` or ``--no-requeue`` (``job.requeue``). Raises ``ValueError`` when the image's
    runtime cannot take a path (:mod:`runtimes`)."""
    options: list[tuple[str, str]] = [
        ("job-name", job.name),
        ("partition", job.partition),
    ]
    if job.account:
        options.append(("account", job.account))
    if job.priority_class:  # the class's QOS (teams.priority_classes: named as the class)
        options.append(("qos", job.priority_class))
    gres = gres_option(job.gpu_type, job.gpu_count)
    if gres:
        options.append(("gres", gres))
    options += [
        ("nodes", "1"),
        ("ntasks", "1"),
        ("cpus-per-task", str(job.cpus)),
        ("mem", f"{job.memory_mb}M"),
        ("time", str(job.time_limit_min)),
        ("chdir", job.workdir),
        ("output", job.output_path),
        ("error", job.error_path),
        ("comment", job.comment),
    ]
    header = ["#!/bin/bash", *sbatch_directives(options)]
    header.append("#SBATCH --requeue" if job.requeue else "#SBATCH --no-requeue")
    body = _SHEBANG.sub("", job.script.lstrip("\ufeff"), count=1) if job.script.startswith(("#!", "\ufeff#!")) else job.script
    body = body.replace("\r\n", "\n")
    if not body.endswith("\n"):
        body += "\n"
    if job.image_name:
        body = image_wrapped(job, body, home=home)
    return (
        "\n".join(header)
        + "\n: portal-job-script-begins  # directives above are the portal's; the user's script follows\n"
        + body
    )


def image_binds(job: Job, *, home: str) -> list[Bind]:
    """What a job in an image sees of the host (each at the same path): the user's home, the job's
    directory, the environment cache (:func:`runtimes.default_binds`), a working directory outside
    those, and for a job with a profile environment the directory of ``uv`` (PORTAL_ENV_UV), which
    builds it inside the image."""
    job_dir = posixpath.dirname(job.output_path)
    binds = default_binds(job_dir=job_dir, home=home, env_cache=settings.PORTAL_ENV_CACHE_DIR)
    covered = [b.target.rstrip("/") for b in binds]
    if job.workdir and not any(job.workdir == c or job.workdir.startswith(c + "/") for c in covered):
        binds.append(Bind(job.workdir, job.workdir))
    if _has_environment(job):
        tools = posixpath.dirname(settings.PORTAL_ENV_UV)
        binds.append(Bind(tools, tools))
    return binds


def _has_environment(job: Job) -> bool:
    """Whether ``job`` is a profile's with an ``environment`` block (its script builds or uses a venv in the cache)."""
    return isinstance(job.profile_spec, dict) and bool(job.profile_spec.get("environment"))


def env_cache_host_check(source: str, target: str) -> list[str]:
    """The batch script's lines that check the environment cache ``source`` on the host, before the container
    starts, where it is bound at ``target``: inside, root's directories and other users' look the same (the
    overflow uid), so only the host can tell them apart (runtimes/path_owners.sh, docs/profiles.md, "Who may own
    the directories above the cache"). They export ``PORTAL_ENV_HOST_CHECKED=<target>`` when ``source`` and every
    directory above it are root's or the user's and writable by nobody else, and otherwise
    ``PORTAL_ENV_HOST_REFUSED=<why and what to do>``; ``portal_env`` reads them inside (the runtime passes the
    environment through). A ``source`` that goes through a symbolic link is refused: the runtime follows the
    link again when it binds it, after this check. Never fail the job: inside, a refused cache means a private
    environment."""
    src = source.rstrip("/") or "/"
    q = command_line([src])
    link = command_line(
        [
            "printf",
            "%s goes through a symbolic link (to %s), which the container runtime would follow again after this check: "
            "the cluster staff should set PORTAL_ENV_CACHE_DIR to %s",
            src,
        ]
    )
    return [
        "# The environment cache, checked on the host before the container starts (docs/profiles.md).",
        *path_owners_sh().rstrip("\n").splitlines(),
        "unset PORTAL_ENV_HOST_CHECKED PORTAL_ENV_HOST_REFUSED",
        "PORTAL_ENV_UNMAPPED=$(portal_env_unmapped_uid)",
        f"portal_env_real=$(readlink -e -- {q}) || portal_env_real={q}",
        f'if [ "$portal_env_real" != {q} ]; then',
        f'  export PORTAL_ENV_HOST_REFUSED="$({link} "$portal_env_real" "$portal_env_real")"',
        f'elif portal_env_path_ok {q} "$(id -u)"; then',
        f"  export PORTAL_ENV_HOST_CHECKED={command_line([target.rstrip('/') or '/'])}",
        "else",
        '  export PORTAL_ENV_HOST_REFUSED="$PORTAL_ENV_WHY"',
        "fi",
    ]


def _say(text: str, *, err: bool = False) -> str:
    return command_line(["printf", "%s\\n", text]) + (" | tee /dev/stderr" if err else "")


def image_wrapped(job: Job, body: str, *, home: str) -> str:
    """The lines that run ``body`` (the user's script) inside ``job``'s image (see the module):
    ``portal: image ...`` and ``portal: environment ...`` on stdout; the runtime's ``check_argv``,
    and when it fails the sentence of :func:`jobs.models.image_gone_sentence` on stdout and stderr
    (and the runtime's own words on stderr) and exit :data:`IMAGE_GONE_EXIT`; the script written to
    ``<job dir>/portal-script.sh``; then ``exec`` of the runtime's ``exec_argv`` running
    ``/bin/bash`` on it with :func:`image_binds`, in ``job.workdir``. For a profile's job with an environment,
    :func:`env_cache_host_check`'s lines come before the script is written."""
    runtime = runtime_get(_runtime_of(job))
    script_path = posixpath.join(posixpath.dirname(job.output_path), "portal-script.sh")
    run = runtime.exec_argv(
        job.image_path, ["/bin/bash", script_path], binds=image_binds(job, home=home), workdir=job.workdir or None
    )
    check = command_line(runtime.check_argv(job.image_path))
    delimiter = f"PORTAL_SCRIPT_{job.key.hex}"
    while delimiter in body:
        delimiter += "_"
    gone = image_gone_sentence(job.image_name, job.image_path)
    cache = settings.PORTAL_ENV_CACHE_DIR
    host_check = env_cache_host_check(cache, cache) if _has_environment(job) else []
    return "\n".join(
        [
            _say(
                f"portal: image {job.image_name} ({job.image_digest or 'no digest recorded'}) at {job.image_path}, run by {runtime.name}"
            ),
            _say(f"portal: environment: {job.environment_text}"),
            f"if ! portal_image_check=$({check} 2>&1); then",
            "  " + _say(gone, err=True),
            "  printf 'portal: %s said: %s\\n' " + command_line([runtime.name]) + ' "$portal_image_check" >&2',
            f"  exit {IMAGE_GONE_EXIT}",
            "fi",
            *host_check,
            f"cat > {command_line([script_path])} <<'{delimiter}'",
            body + delimiter,
            "exec " + command_line(run),
            "",
        ]
    )


def _runtime_of(job: Job) -> str:
    """The runtime of the job's image: the registry's (the row may be gone: Charliecloud, the only
    one run here)."""
    image = image_get(name=job.image_name)
    return image.runtime if image is not None else "charliecloud"
