#!/usr/bin/env bash
# JupyterHub and its proxy (configurable-http-proxy), as the portal's service user, with the dev
# defaults below; every one can be overridden from the environment (see hub/jupyterhub_config.py for
# what each means). scripts/dev.sh starts it in the background; the tests start their own hub with
# their own ports and IdP.
#
#   scripts/hub.sh              start the proxy unless it already runs, then run the hub in the foreground
#   scripts/hub.sh proxy        start the proxy only (in the background), unless it already runs
#   scripts/hub.sh stop-proxy   stop the proxy
#
# The proxy is a process of its own (its own session, pid in $PORTAL_HUB_STATE_DIR/proxy.pid, log in
# $PORTAL_HUB_PROXY_LOG): stopping or restarting the hub (an upgrade, a crash) leaves it and the
# open notebook and VS Code connections through it up. The hub finds its routes there when it comes
# back. Stop the proxy (stop-proxy) after changing its ports or token.
LOG_TAG=hub
source "$(dirname "$0")/lib.sh"
: "${PORTAL_JUPYTER_VENV:=/opt/gpuportal/jupyter}"
: "${PORTAL_USER:=portal}"
export PORTAL_HUB_STATE_DIR=${PORTAL_HUB_STATE_DIR:-$PORTAL_VAR_DIR/hub}
export PORTAL_HUB_URL=${PORTAL_HUB_URL:-http://127.0.0.1:8001}
export PORTAL_HUB_API_PORT=${PORTAL_HUB_API_PORT:-8081}
export PORTAL_HUB_PROXY_API_PORT=${PORTAL_HUB_PROXY_API_PORT:-8002}
export PORTAL_HUB_TOKEN=${PORTAL_HUB_TOKEN:-dev-hub-token-not-secret}
export PORTAL_HUB_PROXY_TOKEN=${PORTAL_HUB_PROXY_TOKEN:-$PORTAL_HUB_TOKEN-proxy}
export PORTAL_URL=${PORTAL_URL:-http://$PORTAL_HOST:$PORTAL_PORT}
export OIDC_ISSUER=${OIDC_ISSUER:-http://127.0.0.1:8800}
export PORTAL_HUB_OIDC_CLIENT_ID=${PORTAL_HUB_OIDC_CLIENT_ID:-jupyterhub}
export PORTAL_HUB_OIDC_CLIENT_SECRET=${PORTAL_HUB_OIDC_CLIENT_SECRET:-jupyterhub-dev-secret}
export PORTAL_JUPYTER_VENV
: "${PORTAL_HUB_PROXY_LOG:=$LOG_DIR/hub-proxy.log}"
PROXY_PID=$PORTAL_HUB_STATE_DIR/proxy.pid
# The local clusters' nodes are slurmd instances on this machine (cluster1's node1-3, cluster2's g1 and g2).
export PORTAL_HUB_NODE_ADDRESSES=${PORTAL_HUB_NODE_ADDRESSES:-node1=127.0.0.1,node2=127.0.0.1,node3=127.0.0.1,g1=127.0.0.1,g2=127.0.0.1}

# start_proxy: configurable-http-proxy in its own session, as the service user; waits for its API.
start_proxy() {
    if pid_alive "$PROXY_PID"; then log "proxy already running (pid $(cat "$PROXY_PID"))"; return 0; fi
    local node chp public_host public_port
    node=$(node_bin) || die "no Node.js >= 20 (run scripts/bootstrap.sh)"
    chp=$REPO_DIR/hub/node_modules/.bin/configurable-http-proxy
    [[ -x $chp ]] || die "no configurable-http-proxy in hub/node_modules: run scripts/hub_setup.sh"
    public_host=${PORTAL_HUB_URL#*://}; public_host=${public_host%%/*}
    public_port=${public_host##*:}; public_host=${public_host%:*}
    [[ $public_port =~ ^[0-9]+$ ]] || die "PORTAL_HUB_URL must name a port (http://HOST:PORT), not $PORTAL_HUB_URL"
    # The token reaches the proxy in its environment, never on a command line (ps shows those).
    CONFIGPROXY_AUTH_TOKEN=$PORTAL_HUB_PROXY_TOKEN \
        setsid runuser -u "$PORTAL_USER" -- "$node" "$chp" --ip "$public_host" --port "$public_port" \
        --api-ip 127.0.0.1 --api-port "$PORTAL_HUB_PROXY_API_PORT" \
        --error-target "http://127.0.0.1:$PORTAL_HUB_API_PORT/hub/error" --log-level info \
        >>"$PORTAL_HUB_PROXY_LOG" 2>&1 </dev/null &
    echo $! >"$PROXY_PID"
    local end=$(( $(date +%s) + 30 ))
    until (exec 3<>"/dev/tcp/127.0.0.1/$PORTAL_HUB_PROXY_API_PORT") 2>/dev/null; do
        pid_alive "$PROXY_PID" || die "the proxy exited at once (see $PORTAL_HUB_PROXY_LOG)"
        (( $(date +%s) < end )) || die "the proxy's API did not answer within 30 s (see $PORTAL_HUB_PROXY_LOG)"
        sleep 0.2
    done
    log "started the proxy on $public_host:$public_port (pid $(cat "$PROXY_PID"), log $PORTAL_HUB_PROXY_LOG)"
}

stop_proxy() {
    pid_alive "$PROXY_PID" || { rm -f "$PROXY_PID"; return 0; }
    local pid; pid=$(cat "$PROXY_PID")
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 75); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$PROXY_PID"
    log "stopped the proxy"
}

case ${1:-hub} in
    stop-proxy) stop_proxy; exit 0 ;;
    proxy | hub) ;;
    *) die "usage: scripts/hub.sh [proxy|stop-proxy]" ;;
esac
mkdir -p "$PORTAL_HUB_STATE_DIR"; chown "$PORTAL_USER" "$PORTAL_HUB_STATE_DIR"; chmod 700 "$PORTAL_HUB_STATE_DIR"
[[ ${1:-hub} == proxy ]] && { start_proxy; exit 0; }
[[ -x $PORTAL_JUPYTER_VENV/bin/jupyterhub ]] || die "no JupyterHub in $PORTAL_JUPYTER_VENV: run scripts/hub_setup.sh"
start_proxy
cd "$PORTAL_HUB_STATE_DIR"
exec runuser -u "$PORTAL_USER" -- "$PORTAL_JUPYTER_VENV/bin/jupyterhub" -f "$REPO_DIR/hub/jupyterhub_config.py"
