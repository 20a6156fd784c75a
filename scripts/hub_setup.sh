#!/usr/bin/env bash
# Install the Jupyter side, idempotently: one venv with JupyterHub, batchspawner, JupyterLab and the
# server proxies (hub/requirements.txt), made from /usr/bin/python3 so that job users can run it;
# configurable-http-proxy from npm (hub/node_modules); the hub's state directory, owned by the
# service user that runs the hub; and VS Code (code-server), which is optional: when its install
# fails, sessions offer JupyterLab only and the sessions page says why.
# Needs the service user (cluster/up.sh creates it).
LOG_TAG=hub-setup
source "$(dirname "$0")/lib.sh"
: "${PORTAL_JUPYTER_VENV:=/opt/gpuportal/jupyter}"
: "${PORTAL_USER:=portal}"
: "${PORTAL_HUB_STATE_DIR:=$PORTAL_VAR_DIR/hub}"
SYSTEM_PYTHON=${HUB_PYTHON:-/usr/bin/python3}

[[ -x $SYSTEM_PYTHON ]] || apt_install python3
"$SYSTEM_PYTHON" -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv
id "$PORTAL_USER" >/dev/null 2>&1 || die "user $PORTAL_USER is missing: run cluster/up.sh first"

# --- the Jupyter venv (hub + single-user servers) ---
stamp=$PORTAL_JUPYTER_VENV/.installed-$(cat "$REPO_DIR/hub/requirements.txt" | sha256sum | cut -c1-16)
if [[ ! -e $stamp ]]; then
    [[ -x $PORTAL_JUPYTER_VENV/bin/python ]] || { log "creating $PORTAL_JUPYTER_VENV"; "$SYSTEM_PYTHON" -m venv "$PORTAL_JUPYTER_VENV"; }
    log "pip install -r hub/requirements.txt into $PORTAL_JUPYTER_VENV"
    "$PORTAL_JUPYTER_VENV/bin/pip" install -q --disable-pip-version-check -r "$REPO_DIR/hub/requirements.txt" 2>&1 \
        | grep -v "^WARNING: Location" || true
    "$PORTAL_JUPYTER_VENV/bin/python" -c 'import jupyterhub, batchspawner, jupyterlab, jupyter_server_proxy' \
        || die "the Jupyter venv is incomplete (see pip's output above)"
    rm -f "$PORTAL_JUPYTER_VENV"/.installed-*; touch "$stamp"
fi
# The portal's jupyter-server extension (hub/session/gpuportal_session): when a person last used a
# session, for the idle limit; enabled for every single-user server of this venv.
# Also gpuportal-singleuser (hub/session/gpuportal_launch.py), what a session's batch script runs.
session_stamp=$PORTAL_JUPYTER_VENV/.session-$(cat "$REPO_DIR"/hub/session/pyproject.toml "$REPO_DIR"/hub/session/*.py "$REPO_DIR"/hub/session/gpuportal_session/*.py | sha256sum | cut -c1-16)
if [[ ! -e $session_stamp ]]; then
    log "pip install hub/session (gpuportal_session) into $PORTAL_JUPYTER_VENV"
    build=$(mktemp -d); cp -r "$REPO_DIR/hub/session/." "$build/"   # setuptools builds in the tree: not in the repo
    "$PORTAL_JUPYTER_VENV/bin/pip" install -q --disable-pip-version-check --no-deps "$build" 2>&1 \
        | grep -v "^WARNING: Location" || true
    rm -rf "$build"
    "$PORTAL_JUPYTER_VENV/bin/python" -c 'import gpuportal_session, gpuportal_launch' && [[ -x $PORTAL_JUPYTER_VENV/bin/gpuportal-singleuser ]] \
        || die "gpuportal_session did not install (see pip's output above)"
    rm -f "$PORTAL_JUPYTER_VENV"/.session-*; touch "$session_stamp"
fi
install -D -m 644 "$REPO_DIR/hub/session/jupyter_server_config.json" \
    "$PORTAL_JUPYTER_VENV/etc/jupyter/jupyter_server_config.d/gpuportal_session.json"
# Site-level JupyterLab defaults shipped by the portal (hub/site-settings/): no "Jupyter news" pop-up and
# no update checks in sessions (a researcher may still change them in Settings).
install -D -m 644 "$REPO_DIR/hub/site-settings/jupyterlab-overrides.json" "$PORTAL_JUPYTER_VENV/share/jupyter/lab/settings/overrides.json"
chmod -R a+rX "$PORTAL_JUPYTER_VENV"

# --- configurable-http-proxy ---
NODE=$(node_bin) || die "no Node.js >= 20 (run scripts/bootstrap.sh)"
if [[ ! -x $REPO_DIR/hub/node_modules/.bin/configurable-http-proxy ]]; then
    log "npm ci (hub: configurable-http-proxy)"
    PATH=$(dirname "$NODE"):$PATH npm ci --prefix "$REPO_DIR/hub" --no-audit --no-fund --silent
fi

# --- the hub's state (sqlite database, cookie secret), writable by the service user only ---
mkdir -p "$PORTAL_HUB_STATE_DIR"
chown "$PORTAL_USER" "$PORTAL_HUB_STATE_DIR"; chmod 700 "$PORTAL_HUB_STATE_DIR"

# --- VS Code (optional) ---
if [[ ${PORTAL_SKIP_CODE_SERVER:-0} != 1 ]]; then
    bash "$REPO_DIR/scripts/install_code_server.sh" \
        || log "WARNING: code-server could not be installed; sessions offer JupyterLab only (see above)"
fi
log "hub setup done"
