#!/usr/bin/env bash
# Prometheus for make dev and make test (Debian's prometheus package): 127.0.0.1:$PORTAL_PROMETHEUS_PORT (9090),
# config cluster/etc/prometheus.yml (scrapes the nodes' GPU exporters every 5 s and the portal's /metrics; alert
# rules cluster/etc/prometheus-rules.yml), storage in var/prometheus, pid var/run/prometheus.pid, log
# var/log/prometheus.log. Idempotent: a running one has its config reloaded if the files changed.
#   scripts/prometheus.sh [start]   install if missing, check the config, start or reload, wait until ready
#   scripts/prometheus.sh stop
LOG_TAG=prometheus
source "$(dirname "$0")/lib.sh"
: "${PORTAL_PROMETHEUS_PORT:=9090}"
: "${PORTAL_PROMETHEUS_RETENTION:=15d}"
CONFIG=$REPO_DIR/cluster/etc/prometheus.yml
RULES=$REPO_DIR/cluster/etc/prometheus-rules.yml
DATA=$PORTAL_VAR_DIR/prometheus
STAMP=$RUN_DIR/prometheus.config-sum
URL=http://127.0.0.1:$PORTAL_PROMETHEUS_PORT

config_sum() { cat "$CONFIG" "$RULES" | sha256sum | cut -d' ' -f1; }

case ${1:-start} in
stop)
    stop_bg prometheus
    exit 0 ;;
start) ;;
*) die "usage: scripts/prometheus.sh [start|stop]" ;;
esac

fresh_install=0
dpkg-query -W -f='${Status}' prometheus 2>/dev/null | grep -q "install ok installed" || fresh_install=1
apt_install prometheus
# On a machine with systemd, Debian's package starts its own prometheus.service (/etc/prometheus, :9090). The
# portal's is this one, with the repo's config: stop and disable the packaged service we just installed.
if (( fresh_install )) && [[ -d /run/systemd/system ]] && systemctl is-active --quiet prometheus 2>/dev/null; then
    systemctl disable --now prometheus >/dev/null 2>&1 && log "stopped and disabled Debian's prometheus.service (the portal runs its own)"
fi
promtool check config "$CONFIG" >/dev/null || die "$CONFIG or its rules are not valid (promtool check config $CONFIG)"
mkdir -p "$DATA"

if pid_alive "$RUN_DIR/prometheus.pid"; then
    if [[ $(cat "$STAMP" 2>/dev/null) != "$(config_sum)" ]]; then
        kill -HUP "$(cat "$RUN_DIR/prometheus.pid")"
        config_sum >"$STAMP"
        log "config changed: reloaded Prometheus"
    else
        log "Prometheus running on $URL"
    fi
    exit 0
fi
if ss -Hltn "sport = :$PORTAL_PROMETHEUS_PORT" | grep -q .; then
    # Another checkout's (e.g. a CI clone's, or this one's before its var/ was removed) Prometheus with this
    # repo's config: use it, leave it alone. But one whose config or data directory is gone (a CI run
    # deletes its clone and clones it again) is an orphan writing into a removed directory: stop it and
    # start this checkout's.
    flags=$(curl -fsS --max-time 5 "$URL/api/v1/status/flags" 2>/dev/null || true)
    other=$(grep -o '"config.file":"[^"]*"' <<<"$flags" | cut -d'"' -f4 || true)
    other_data=$(grep -o '"storage.tsdb.path":"[^"]*"' <<<"$flags" | cut -d'"' -f4 || true)
    if [[ $other == */cluster/etc/prometheus.yml ]]; then
        if [[ -f $other && -d $other_data ]]; then
            cmp -s "$other" "$CONFIG" || log "WARNING: its config ($other) differs from this checkout's ($CONFIG)"
            log "Prometheus of another checkout runs on $URL (config $other, data $other_data): using it"
            exit 0
        fi
        pid=$(ss -Hltnp "sport = :$PORTAL_PROMETHEUS_PORT" | grep -o 'pid=[0-9]*' | head -1 | cut -d= -f2)
        [[ -n $pid ]] || die "port $PORTAL_PROMETHEUS_PORT: an orphaned Prometheus (config $other), but no pid to stop (ss -ltnp)"
        log "Prometheus on $URL has lost its checkout (config $other, data $other_data: removed); stopping it (pid $pid)"
        kill "$pid"
        for _ in $(seq 100); do
            ss -Hltn "sport = :$PORTAL_PROMETHEUS_PORT" | grep -q . || break
            sleep 0.2
        done
    fi
fi
if ss -Hltn "sport = :$PORTAL_PROMETHEUS_PORT" | grep -q .; then
    die "port $PORTAL_PROMETHEUS_PORT is taken by another program (ss -ltnp 'sport = :$PORTAL_PROMETHEUS_PORT'; a packaged prometheus.service: systemctl disable --now prometheus), or set PORTAL_PROMETHEUS_PORT"
fi
start_bg prometheus prometheus --config.file="$CONFIG" --storage.tsdb.path="$DATA" \
    --storage.tsdb.retention.time="$PORTAL_PROMETHEUS_RETENTION" --web.listen-address="127.0.0.1:$PORTAL_PROMETHEUS_PORT" \
    --web.enable-lifecycle
config_sum >"$STAMP"
wait_http "$URL/-/ready" 60
log "Prometheus ready on $URL (config $CONFIG, data $DATA)"
