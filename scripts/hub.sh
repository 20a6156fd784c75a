#!/usr/bin/env bash
# Run JupyterHub (with configurable-http-proxy) in the foreground as the portal's service user, with
# the dev defaults below; every one can be overridden from the environment (see
# hub/jupyterhub_config.py for what each means). scripts/dev.sh starts it in the background; the
# tests start their own hub with their own ports and IdP.
LOG_TAG=hub
source "$(dirname "$0")/lib.sh"
: "${PORTAL_JUPYTER_VENV:=/opt/gpuportal/jupyter}"
: "${PORTAL_USER:=portal}"
export PORTAL_HUB_STATE_DIR=${PORTAL_HUB_STATE_DIR:-$PORTAL_VAR_DIR/hub}
export PORTAL_HUB_URL=${PORTAL_HUB_URL:-http://127.0.0.1:8001}
export PORTAL_HUB_API_PORT=${PORTAL_HUB_API_PORT:-8081}
export PORTAL_HUB_PROXY_API_PORT=${PORTAL_HUB_PROXY_API_PORT:-8002}
export PORTAL_HUB_TOKEN=${PORTAL_HUB_TOKEN:-dev-hub-token-not-secret}
export PORTAL_URL=${PORTAL_URL:-http://$PORTAL_HOST:$PORTAL_PORT}
export OIDC_ISSUER=${OIDC_ISSUER:-http://127.0.0.1:8800}
export PORTAL_HUB_OIDC_CLIENT_ID=${PORTAL_HUB_OIDC_CLIENT_ID:-jupyterhub}
export PORTAL_HUB_OIDC_CLIENT_SECRET=${PORTAL_HUB_OIDC_CLIENT_SECRET:-jupyterhub-dev-secret}
export PORTAL_JUPYTER_VENV
# The local cluster's nodes are slurmd instances on this machine.
export PORTAL_HUB_NODE_ADDRESSES=${PORTAL_HUB_NODE_ADDRESSES:-node1=127.0.0.1,node2=127.0.0.1,node3=127.0.0.1}
NODE=$(node_bin) || die "no Node.js >= 20 (run scripts/bootstrap.sh)"
export PATH=$(dirname "$NODE"):$PATH
[[ -x $PORTAL_JUPYTER_VENV/bin/jupyterhub ]] || die "no JupyterHub in $PORTAL_JUPYTER_VENV: run scripts/hub_setup.sh"
mkdir -p "$PORTAL_HUB_STATE_DIR"; chown "$PORTAL_USER" "$PORTAL_HUB_STATE_DIR"; chmod 700 "$PORTAL_HUB_STATE_DIR"
cd "$PORTAL_HUB_STATE_DIR"
exec runuser -u "$PORTAL_USER" -- "$PORTAL_JUPYTER_VENV/bin/jupyterhub" -f "$REPO_DIR/hub/jupyterhub_config.py"
