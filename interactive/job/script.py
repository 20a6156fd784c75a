"""A session's batch script: the portal renders it, as it renders a batch job's, from the Session
row the spawn check wrote, the session kind's registry entry (:mod:`interactive.kinds`), the site
image (:func:`interactive.options.image_settings`) and the hub's part (:class:`HubPart`: the single-user
server's environment and arguments, which only JupyterHub knows). The ``#SBATCH`` lines come from
the batch jobs' renderer (:func:`jobs.worker.batch.sbatch_directives`); every other word is quoted
(``shlex.quote``, :func:`runtimes.command_line`).

The hub's environment holds the server's API token (``JUPYTERHUB_API_TOKEN``). It is written into
the script as ``export`` lines and the script reaches ``sbatch`` on stdin (never argv, never a
file): Slurm keeps it in its state directory, readable by SlurmUser and root, and
``scontrol write batch_script`` gives it to the job's owner and root only; the job runs with
``--export=NONE``, so nothing of the submitting side's environment leaks in.
"""

from __future__ import annotations

import os
import re
import shlex
from dataclasses import dataclass, field

from jobs.worker.batch import gres_option, sbatch_directives
from portal.refusals import Problem, Refused
from runtimes import command_line, default_binds, runtime_get
from teams.priority_classes import session_class

from ..kinds import KINDS
from ..models import Session
from ..options import image_settings

#: Where a session's job log goes, relative to the user's home (``<key>.log``).
SESSION_LOG_DIR = ".gpuportal/sessions"
#: What the hub may put in a job's environment: JupyterHub's own variables only.
_HUB_ENV_NAME = re.compile(r"(JUPYTERHUB|JPY)_[A-Z0-9_]{1,64}")
#: A single-user server argument as JupyterHub makes them (``--debug``, ``--SingleUserNotebookApp.x=y``).
_HUB_ARG = re.compile(r"--[A-Za-z][A-Za-z0-9_.-]{0,127}(=[^\x00-\x1f\x7f]{0,1024})?")
_ABSOLUTE = re.compile(r"/[A-Za-z0-9._+@/-]{0,255}")


@dataclass(frozen=True)
class HubPart:
    """What the hub's spawner adds to a session's script: ``env`` (JupyterHub's ``JUPYTERHUB_*``/``JPY_*``
    variables for the server: its API token, URLs, OAuth client), ``args`` (the server's command-line
    options), ``venv`` (the Jupyter venv on the nodes) and ``image_venv`` (that venv inside a site image)."""

    env: dict[str, str] = field(default_factory=dict)
    args: tuple[str, ...] = ()
    venv: str = "/opt/gpuportal/jupyter"
    image_venv: str = "/opt/jupyter"


def hub_part(data: dict) -> HubPart:
    """The hub's part of a submit request (``{"env": {...}, "args": [...], "venv", "image_venv"}``),
    checked. Raises :class:`Refused` naming what is not of the expected shape."""
    env, args = data.get("env"), data.get("args", [])
    problems = []
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        problems.append(Problem("env", "env must be an object of text values."))
    elif bad := sorted(k for k in env if not isinstance(k, str) or not _HUB_ENV_NAME.fullmatch(k)):
        problems.append(Problem("env", f"Only JUPYTERHUB_* and JPY_* variables may come from the hub, not {bad[0]!r}."))
    if not isinstance(args, list) or not all(isinstance(a, str) and _HUB_ARG.fullmatch(a) for a in args):
        problems.append(Problem("args", "args must be a list of --option[=value] words."))
    venvs = {name: data.get(name, default) for name, default in (("venv", HubPart.venv), ("image_venv", HubPart.image_venv))}
    for name, value in venvs.items():
        if not isinstance(value, str) or not _ABSOLUTE.fullmatch(value):
            problems.append(Problem(name, f"{name} must be an absolute directory."))
    if problems:
        raise Refused(*problems)
    return HubPart(env=dict(env), args=tuple(args), **venvs)


def session_log_path(session: Session, home: str) -> str:
    """Where the session's job writes its output (``--output``): ``<home>/.gpuportal/sessions/<key>.log``."""
    return os.path.join(home, SESSION_LOG_DIR, f"{session.key}.log")


def session_directives(session: Session, *, home: str) -> list[tuple[str, str]]:
    """The session's sbatch options, in the order of a batch job's (:func:`jobs.worker.batch.render_batch_script`):
    name ``session-<kind>``, partition, account (the team it is billed to), QOS (the site's session
    class, :func:`teams.priority_classes.session_class`; none: the association's default), GRES, one
    task, CPUs, memory (MiB), time (minutes), ``--chdir`` the home, ``--output`` the log,
    ``--comment=portal:<key>``, ``--export=NONE``."""
    options = [("job-name", f"session-{session.ide}"), ("partition", session.partition)]
    if session.account:
        options.append(("account", session.account))
    if (priority := session_class()) is not None:
        options.append(("qos", priority.qos))
    if gres := gres_option(session.gpu_type, session.gpu_count):
        options.append(("gres", gres))
    return options + [
        ("nodes", "1"),
        ("ntasks", "1"),
        ("cpus-per-task", str(session.cpus)),
        ("mem", f"{session.memory_mb}M"),
        ("time", str(session.time_limit_min)),
        ("chdir", home),
        ("output", session_log_path(session, home)),
        ("comment", f"portal:{session.key}"),
        ("export", "NONE"),
    ]


def session_script(session: Session, *, home: str, hub: HubPart, username: str) -> str:
    """The whole batch script of ``session`` for ``username`` (its owner's cluster account, whose
    home is ``home``): the ``#SBATCH`` lines, the environment (the hub's, the kind's, then the
    portal's own: ``HOME``, ``USER``, ``SHELL``, ``PATH``, ``GPUPORTAL_SESSION_KEY``), then ``exec``
    of the single-user server: the portal's launcher with ``--port=0`` (it reports its port once it
    listens) on the node's system, or batchspawner's wrapper inside the session's site image."""
    kind = KINDS[session.ide].spawn_settings()
    image = image_settings(session.image_name)
    venv = hub.image_venv if image else hub.venv
    env = {**hub.env, **kind["env"]}
    env.update(
        {
            "HOME": home,
            "USER": username,
            "SHELL": "/bin/bash",
            "PATH": ":".join([os.path.join(venv, "bin"), *kind["path"]]) + ":/usr/local/bin:/usr/bin:/bin",
            "GPUPORTAL_SESSION_KEY": str(session.key),
        }
    )
    if not image:
        env["GPUPORTAL_REPORT_PORT"] = "1"
    lines = [
        "#!/bin/bash",
        *sbatch_directives(session_directives(session, home=home)),
        # Preempted, a session is cancelled rather than requeued: a notebook's kernel cannot resume.
        *(["#SBATCH --no-requeue"] if (priority := session_class()) is not None and priority.preemptible else []),
        "set -eu",
        # Unix seconds to the nanosecond: bench/session_start.py reads where a start's time goes.
        'echo "session job $SLURM_JOB_ID on $(hostname) as $USER, started $(date -Is) (gpuportal-t script=$(date +%s.%N))"',
        *(f"export {k}={shlex.quote(str(v))}" for k, v in sorted(env.items())),
    ]
    if image:  # a site image's venv may hold an older session extension: batchspawner's wrapper reports the port
        command = [os.path.join(venv, "bin", "batchspawner-singleuser"), "jupyterhub-singleuser", *hub.args]
        lines += _image_lines(image)
        binds = default_binds(job_dir=home, home=home, env_cache=image["env_cache"])
        lines.append(
            "exec " + command_line(runtime_get(image["runtime"]).exec_argv(image["path"], command, binds=binds, workdir=home))
        )
    else:  # the launcher (hub/session/gpuportal_launch.py) takes a free port itself and reports it
        command = [os.path.join(venv, "bin", "gpuportal-singleuser"), "--port=0", *hub.args]
        lines += ['echo "gpuportal-t exec=$(date +%s.%N)"', "exec " + shlex.join(command)]
    return "\n".join(lines) + "\n"


def _image_lines(image: dict) -> list[str]:
    """Say which image, and fail fast with one sentence when it is no longer usable on the node
    (the runtime's ``check_argv``), not with the runtime's own errors."""
    name, path = image["name"], image["path"]
    gone = f"The image {name} ({path}) is no longer on the cluster: ask your admins or choose another image"
    return [
        "echo " + shlex.quote(f"session in image {name} ({image.get('digest') or 'no digest'}), runtime {image['runtime']}"),
        f"if ! {command_line(runtime_get(image['runtime']).check_argv(path))} >/dev/null 2>&1; then",
        f"  echo {shlex.quote(gone)} >&2",
        "  exit 2",
        "fi",
    ]
