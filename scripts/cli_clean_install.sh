#!/usr/bin/env bash
# The CLI installs alone: `pip install ./cli` into a new, empty venv (in a temporary directory,
# removed after) must bring at most MAX_DEPS distributions besides the CLI itself (pip and
# setuptools aside), and `gpuportal --help` must then run there, without the portal's packages.
# pip reads the same index settings as scripts/bootstrap.sh's install (pip's configuration and
# PIP_* variables). Prints one line with the result; exits 1 when either check fails.
LOG_TAG=cli-install
source "$(dirname "$0")/lib.sh"
: "${MAX_DEPS:=3}"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$PYTHON" -m venv "$tmp/venv"
# From a copy: setuptools builds in the source directory (build/, *.egg-info), which is the checkout's.
cp -r "$REPO_DIR/cli" "$tmp/cli"
"$tmp/venv/bin/pip" install -q --disable-pip-version-check "$tmp/cli" >"$tmp/pip.log" 2>&1 \
    || { cat "$tmp/pip.log" >&2; die "pip install ./cli failed in a clean venv"; }
# Every installed distribution but the CLI and the installer's own. Isolated (-I) and from the
# temporary directory: a checkout's *.egg-info in the current directory would count otherwise.
mapfile -t deps < <(cd "$tmp" && "$tmp/venv/bin/python" -I - <<'PY'
from importlib.metadata import distributions

skip = {"gpuportal", "pip", "setuptools", "wheel"}
names = {d.metadata["Name"].lower().replace("_", "-") for d in distributions()}
print("\n".join(sorted(names - skip)))
PY
)
# Run from the temporary directory, so that the checkout's own packages cannot be imported.
if ! (cd "$tmp" && "$tmp/venv/bin/gpuportal" --help >"$tmp/help.txt" 2>&1); then
    cat "$tmp/help.txt" >&2
    die "gpuportal --help failed in the clean venv"
fi
names=$(IFS=,; echo "${deps[*]}")
if (( ${#deps[@]} > MAX_DEPS )); then
    die "pip install ./cli brought ${#deps[@]} dependencies (${names}); at most $MAX_DEPS"
fi
log "CLI alone in a clean venv: ${#deps[@]} dependencies (${names}), at most $MAX_DEPS; gpuportal --help runs"
