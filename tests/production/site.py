"""What a site is given for production, read the way the production test follows it: docs/production.md's
numbered commands, docker-compose.yml's service commands, the Dockerfile's build and start lines,
and ``deploy/env.example`` edited into a ``.env``.

Nothing here starts anything; ``test_production_path.py`` runs what these functions return."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import psycopg
import yaml

REPO = Path(__file__).resolve().parents[2]
#: The comment docs/production.md puts right above its block of production commands.
README_MARKER = "<!-- tests/production/test_production_path.py runs this block"
ENV_LOADER = "set -a; . ./.env; set +a"


@dataclass(frozen=True)
class ReadmeCommands:
    """docs/production.md's block of production commands, line by line: ``copy_env`` (``cp deploy/env.example .env``),
    ``load_env`` (the line that loads ``.env`` into the shell), ``once`` (commands that run to their
    end, in order) and ``services`` (commands that keep running), each as written there."""

    copy_env: str
    load_env: str
    once: list[str]
    services: list[str]


def readme_commands(readme: Path = REPO / "docs" / "production.md") -> ReadmeCommands:
    """Parse the fenced ``sh`` block under :data:`README_MARKER` in docs/production.md's "Production" section.
    Its lines are, in order: the copy of the example, the loader, the one-shot commands (``manage.py``
    ...), then the services (``gunicorn``, ``celery``). Raises AssertionError when the block is
    missing or out of that order."""
    text = readme.read_text()
    section = text.split("\n## Production", 1)[1].split("\n## ", 1)[0]
    assert README_MARKER in section, "docs/production.md's production section lost its command block"
    block = section.split(README_MARKER, 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line.split(" # ", 1)[0].strip() for line in block.splitlines() if line.strip()]
    assert lines[0] == "cp deploy/env.example .env", lines[0]
    assert lines[1] == ENV_LOADER, lines[1]
    rest = lines[2:]
    services = [line for line in rest if shlex.split(line)[0] in ("gunicorn", "celery")]
    once = [line for line in rest if line not in services]
    assert rest == once + services, "docs/production.md starts the services after the one-shot commands"
    return ReadmeCommands(lines[0], lines[1], once, services)


def compose_services(path: Path = REPO / "docker-compose.yml") -> dict[str, dict]:
    """The portal's services of docker-compose.yml (those built from this repository), by name."""
    services = yaml.safe_load(path.read_text())["services"]
    return {name: spec for name, spec in services.items() if spec.get("build") == "."}


def dockerfile_lines(path: Path = REPO / "Dockerfile") -> tuple[list[list[str]], list[str]]:
    """The commands of the Dockerfile's ``RUN`` instructions (continuation lines joined, split at
    ``&&``), each as an argv list without its leading ``NAME=value`` environment assignments, and its
    ``CMD`` as an argv list."""
    text = path.read_text().replace("\\\n", " ")
    runs = []
    for line in text.splitlines():
        if line.startswith("RUN "):
            for part in line[4:].split("&&"):
                argv = shlex.split(part)
                while argv and re.match(r"^[A-Z_]+=", argv[0]):
                    argv.pop(0)
                runs.append(argv)
    cmd = next(line for line in text.splitlines() if line.startswith("CMD "))
    return runs, json.loads(cmd[4:])


def checkout_copy(dest: Path) -> Path:
    """Copy the working tree's files (tracked and untracked, ignored ones left out: no .venv, var/,
    staticfiles/ or .env) to ``dest``: a site's checkout of this release. Returns ``dest``."""
    names = subprocess.run(
        ["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=REPO, capture_output=True, check=True
    ).stdout.decode()
    for name in filter(None, names.split("\0")):
        source = REPO / name
        if not source.is_file():  # deleted in the tree but still tracked
            continue
        target = dest / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(source, target, follow_symlinks=False)
    return dest


def env_edited(example: str, values: dict[str, str]) -> str:
    """``example`` (deploy/env.example's text) with each ``KEY=...`` line, or commented-out
    ``# KEY=...`` line, whose key is in ``values`` set to that value (double-quoted when it has a
    space), as a site edits it. Raises AssertionError for a key the example does not have, so the
    example names every variable a site must set."""
    lines = example.splitlines()
    for key, value in values.items():
        pattern = re.compile(rf"^(# )?{re.escape(key)}=")
        found = [i for i, line in enumerate(lines) if pattern.match(line)]
        assert found, f"deploy/env.example has no {key}= line"
        lines[found[0]] = f'{key}="{value}"' if " " in value else f"{key}={value}"
    return "\n".join(lines) + "\n"


def pg_url(name: str) -> str:
    """The test's PostgreSQL server (the DATABASE_URL the tests run with), database ``name``."""
    base = os.environ.get("DATABASE_URL", "postgres://portal:portal@127.0.0.1:5432/portal")
    return base.rsplit("/", 1)[0] + "/" + name


def own_database(suffix: str) -> str:
    """A database of the test's own: the tests' database name (DATABASE_URL's) with ``_<suffix>``, so
    two checkouts' runs keep apart."""
    return os.environ.get("DATABASE_URL", "/portal").rsplit("/", 1)[1] + "_" + suffix


def recreate_database(name: str, *, drop_only: bool = False) -> None:
    """Drop database ``name`` (its connections ended) and, unless ``drop_only``, create it empty."""
    with psycopg.connect(pg_url("postgres"), autocommit=True) as conn:
        conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        if not drop_only:
            conn.execute(f'CREATE DATABASE "{name}"')
