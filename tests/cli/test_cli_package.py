"""The CLI is a package of its own (cli/pyproject.toml): few dependencies, none of the portal's code.

scripts/cli_clean_install.sh (run by make test) installs it into an empty venv; these tests read
its sources, so they fail at once when a dependency or an import of the portal creeps in."""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]
CLI = ROOT / "cli"
MODULES = sorted((CLI / "gpuportal").rglob("*.py"))
#: The portal's own packages and the server libraries the CLI must never need.
PORTAL = {
    "accounts",
    "adoption",
    "api",
    "audit",
    "gpuusage",
    "images",
    "interactive",
    "jobs",
    "notifications",
    "ops",
    "portal",
    "profiles",
    "runtimes",
    "slurm",
    "teams",
    "django",
    "ninja",
    "celery",
}


def _project(path: Path) -> dict:
    return tomllib.loads(path.read_text(encoding="utf-8"))["project"]


def _names(requirements: list[str]) -> set[str]:
    return {Requirement(r).name.lower().replace("_", "-") for r in requirements}


def test_the_cli_declares_at_most_three_dependencies():
    dependencies = _project(CLI / "pyproject.toml")["dependencies"]
    assert len(dependencies) <= 3, dependencies


def test_the_portal_installs_what_the_cli_needs():
    """The root project installs the CLI's package too (package-dir), so it must carry its dependencies."""
    assert _names(_project(CLI / "pyproject.toml")["dependencies"]) <= _names(_project(ROOT / "pyproject.toml")["dependencies"])


def _top_level_imports(path: Path) -> set[str]:
    """The top-level names ``path`` imports (absolute imports only; relative ones stay in the package)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
    return found


def test_the_cli_has_modules():
    assert len(MODULES) >= 5  # the glob found the package (a moved package would make the test below pass vacuously)


@pytest.mark.parametrize("path", MODULES, ids=lambda p: p.name)
def test_no_cli_module_imports_django_or_the_portal(path):
    assert not _top_level_imports(path) & PORTAL


def test_the_check_sees_an_import_of_the_portal(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text(
        "import os\nfrom django.conf import settings\nfrom jobs.worker.services import job_submit\nfrom . import base\n"
    )
    assert _top_level_imports(bad) & PORTAL == {"django", "jobs"}
