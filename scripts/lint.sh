#!/usr/bin/env bash
# Static checks that run before the tests (make test, make test-fast): the import layers of
# docs/architecture.md (import-linter, contracts in pyproject.toml) and ruff (rules in pyproject.toml;
# `ruff format --check` on the whole tree) and the size limits of the app code (scripts/check_sizes.py).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV=${VENV:-.venv}
# The CLI's package is in cli/ (its own pyproject.toml): import-linter reads it from this tree.
export PYTHONPATH=cli${PYTHONPATH:+:$PYTHONPATH}
"$VENV/bin/lint-imports"
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/python" scripts/check_sizes.py
