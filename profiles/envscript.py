"""The job script a profile runs: set up its declared environment, then its entry point.

Rendered only from a validated :class:`profiles.schema.ProfileSpec`; every value from the profile
reaches bash through ``shlex.quote`` here (the one place this script is made), so a package name,
path or argument is never interpreted. ``run.command`` is the researcher's own bash and runs as
written, as their script would in the form.

The environment (docs/decisions.md#environments-are-declared-and-cached-per-user): a Python virtual
environment built with ``uv`` in the job user's own area of the cache directory ``PORTAL_ENV_CACHE_DIR``, ``<cache>/<user>/<hash>``, one per
hash of its spec (the normalised ``environment`` block, the node's architecture and the requirements
file's content). Only the user writes in their area, so no other user can plant or change an
environment that the user's jobs run; an entry is used only after the checks of ``portal_env.sh``
(owners and modes of the cache, the area and every file, and the manifest's checksum of the file
list), and a finished entry is read-only. A file lock (``flock`` on ``<hash>.lock``) makes sure two of
the user's jobs never build the same environment at once; the second waits, then finds it ready. A
build that failed is removed. The job log says ``portal-env: cache hit <hash>``, ``portal-env: built
<hash> in N.N s``, or what it refused and why. Packages come from the site's Python package index
(PyPI here). The bash is ``portal_env.sh`` after ``runtimes/path_owners.sh`` (who may own the directories
above the cache), embedded in every script (a job needs nothing from this
repository).
"""

from __future__ import annotations

import functools
import json
import shlex
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from runtimes import path_owners_sh

from .schema import ProfileSpec


@dataclass(frozen=True)
class EnvSite:
    """What the site offers. ``cache_dir``: the environment cache on every node (root's, mode 755,
    with one area per user: cluster/up.sh, docs/profiles.md); ``uv``: the
    path of uv on the nodes; ``pythons``: Python versions offered (the first is the default);
    ``cuda_modules``: CUDA version -> environment module name; ``container_runtime``: e.g.
    ``apptainer`` ("" = none); ``index_url``: the Python package index ("" = PyPI). uv trusts the
    node's system certificate store (a site's own CA included)."""

    cache_dir: str
    uv: str
    pythons: tuple[str, ...]
    cuda_modules: dict[str, str]
    container_runtime: str
    index_url: str = ""

    @classmethod
    def from_settings(cls, cluster: str | None = None) -> EnvSite:
        """What ``cluster`` offers (``None``: the default cluster; the Python versions are each
        cluster's ``env_pythons``, the rest the site's settings)."""
        from slurm.clusters import cluster_get

        found = cluster_get(cluster)
        return cls(
            cache_dir=settings.PORTAL_ENV_CACHE_DIR.rstrip("/"),
            uv=settings.PORTAL_ENV_UV,
            pythons=tuple(found.env_pythons) if found else tuple(settings.PORTAL_ENV_PYTHONS),
            cuda_modules=dict(settings.PORTAL_ENV_CUDA_MODULES),
            container_runtime=settings.PORTAL_CONTAINER_RUNTIME,
            index_url=settings.PORTAL_ENV_INDEX_URL,
        )


@dataclass(frozen=True)
class EnvImage:
    """The image a profile's job runs in, as the environment needs it: ``name`` and ``digest``
    (``images.models.Image.name``/``.digest``: the digest is the image's content checksum, written
    by scripts/build_image.sh or the admin), ``python`` the image's Python version
    (``Image.python_version``, e.g. "3.11"; "" = unknown). The job's script runs inside the image
    (jobs/worker/batch.py wraps it with the image's runtime), so the venv is built there, on top of this Python."""

    name: str
    digest: str
    python: str = ""

    @classmethod
    def of(cls, image) -> EnvImage:
        """From an ``images.models.Image``; ``python`` as major.minor ("3.11.2" -> "3.11": what uv's
        ``--python`` finds in the image, and what the environment's hash holds)."""
        return cls(name=image.name, digest=image.digest, python=".".join((image.python_version or "").split(".")[:2]))

    def python_matches(self, asked: str) -> bool:
        """Whether a profile's ``environment.python`` (``3.11`` or ``3.11.2``) is this image's Python."""
        return not self.python or asked == self.python or asked.startswith(self.python + ".")


def env_spec_json(env: dict, site: EnvSite, image: EnvImage | None = None) -> str:
    """The canonical JSON of an environment (sorted keys, python filled in), the first input of its
    hash. In an ``image``, the python is the image's (unless the profile names one) and the image's
    digest is part of the spec, so the cache key is hash(image digest, spec): a changed image gets a
    new environment. ``system_site_packages`` unset means yes in an image (its packages stay
    visible under the venv), no on the node's own system."""
    own = env.get("system_site_packages")
    spec = {
        "python": env.get("python") or (image.python if image and image.python else site.pythons[0]),
        "cuda": env.get("cuda") or "",
        "pip": list(env.get("pip") or []),
        "requirements": env.get("requirements") or "",
        "system_site_packages": bool(image is not None if own is None else own),
    }
    if image is not None:
        spec["image"] = image.digest
    return json.dumps(spec, sort_keys=True, separators=(",", ":"))


def render_profile_script(spec: ProfileSpec, *, site: EnvSite | None = None, image: EnvImage | None = None) -> str:
    """The bash script body (no ``#SBATCH`` lines: :func:`jobs.worker.batch.render_batch_script` adds them,
    and for a profile with ``image:`` runs this whole script inside the image). ``image``: the
    checked image of ``spec.image`` (``None`` = the node's own system)."""
    site = site or EnvSite.from_settings()
    q = shlex.quote
    out = [
        "#!/bin/bash",
        f"# Generated by the portal from job profile {q(spec.name)} (schema version {spec.data.get('version', 1)}).",
        "set -euo pipefail",
        "",
    ]
    env = spec.environment
    if image is not None:
        out.append(f"echo {q(f'portal-env: in image {image.name} ({image.digest})')}")
    if env is not None:
        out += _env_lines(env, site, image)
    elif image is not None:
        out.append(f"echo {q('portal-env: no environment block: the Python of image ' + image.name)}")
    if spec.script:
        out += [
            f"if [ ! -f {q(spec.script)} ]; then",
            f"  printf 'portal: run.script %s is not in the project directory %s\\n' {q(spec.script)} \"$PWD\" >&2",
            "  exit 2",
            "fi",
        ]
        runner = "python" if spec.script.endswith(".py") else "bash"
        if spec.script.endswith(".py") and env is None:
            runner = "python3"
        out.append(" ".join(q(a) for a in [runner, spec.script, *spec.args]))
    else:
        out.append(spec.command.replace("\r\n", "\n").rstrip("\n"))
    return "\n".join(out) + "\n"


#: The environment's bash functions (``portal_env`` and its checks), embedded in every script.
PORTAL_ENV_SH = Path(__file__).with_name("portal_env.sh")


@functools.cache
def _portal_env_sh() -> str:
    return PORTAL_ENV_SH.read_text(encoding="utf-8")


def _env_lines(env: dict, site: EnvSite, image: EnvImage | None = None) -> list[str]:
    q = shlex.quote
    spec_json = env_spec_json(env, site, image)
    python = json.loads(spec_json)["python"]
    pip = list(env.get("pip") or [])
    req = env.get("requirements") or ""
    lines = []
    if env.get("cuda"):
        module = site.cuda_modules.get(env["cuda"], f"cuda/{env['cuda']}")
        lines += [
            f"export CUDA_VERSION={q(env['cuda'])}",
            "if type module >/dev/null 2>&1; then",
            f"  module load {q(module)}",
            f'  echo "portal-env: loaded environment module {module}"',
            "else",
            f"  echo \"portal-env: environment module {module} cannot be loaded: there is no 'module' command on $(hostname)\" >&2",
            "  exit 2",
            "fi",
        ]
    venv_args = [site.uv, "venv", "--quiet", "--python", python, "--python-preference", "only-system"]
    if json.loads(spec_json)["system_site_packages"]:
        venv_args.append("--system-site-packages")
    venv_cmd = " ".join(q(a) for a in venv_args) + ' "$1"'
    install = ""
    if pip or req:
        install = " ".join(q(a) for a in [site.uv, "pip", "install", "--quiet"]) + ' --python "$1/bin/python"'
        if req:
            install += " -r " + q(req)
        if pip:
            install += " -- " + " ".join(q(p) for p in pip)
    what = f"python {python}{f' of image {image.name}' if image else ''}, {len(pip)} package{'s' if len(pip) != 1 else ''}"
    build_env = "UV_LINK_MODE=copy UV_COMPILE_BYTECODE=1 UV_PYTHON_DOWNLOADS=never UV_NO_PROGRESS=1 UV_SYSTEM_CERTS=1"
    if site.index_url:
        build_env += f" UV_DEFAULT_INDEX={q(site.index_url)}"
    lines += [
        "# portal_env_build DIR: make the environment in DIR (generated from the environment block of the profile).",
        "portal_env_build() {",
        f"  ( umask 022; export {build_env}",
        f"    {venv_cmd}" + (f" && \\\n    {install}" if install else ""),
        "  )",
        "}",
        *path_owners_sh().rstrip("\n").splitlines(),
        *_portal_env_sh().rstrip("\n").splitlines(),
        " ".join(["portal_env", *(q(a) for a in (site.uv, site.cache_dir, spec_json, req, what))]),
        "",
    ]
    return lines
