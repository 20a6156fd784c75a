#!/usr/bin/env bash
# Run the whole test suite against the real stack. Installs and starts what the tests need first
# (idempotent): the portal's dependencies (bootstrap.sh), the local Slurm cluster with sshd + sudo
# (cluster/up.sh, with the stand-in GPU exporters), Prometheus (scripts/prometheus.sh), the Jupyter venv and
# proxy (hub_setup.sh), the demo container image (build_image.sh) and Chromium for the browser tests. The tests start their own IdP and live portal.
# The import layers and ruff (scripts/lint.sh) and the CLI's install alone in an empty venv
# (scripts/cli_clean_install.sh) are checked beside the last of that set-up.
#
# Then pytest runs in tiers (docs/testing.md): the integration and browser tests that can share the
# clusters on TEST_WORKERS workers, and beside them the hub's tests in one process and the tests that
# stop the poller or restart Redis (own_redis) in another; then the ones
# marked `serial` (they stop a daemon or Redis, drain a node or change Slurm's limits), with the unit
# tests on one worker beside them: those that change cluster1 (or no cluster) in one process and those
# that change cluster2 alone in another, side by side, each configured with its one cluster; then those
# that need both clusters, alone. Branch coverage is measured over all of them and printed; the run ends with scripts/test_summary.py (each
# tier's count and time, the failed tests and their first error line) and the run's logs in
# test-artifacts/.
#
# Extra arguments run one plain pytest instead, e.g. scripts/test.sh tests/jobs -m "not e2e" -x
LOG_TAG=test
source "$(dirname "$0")/lib.sh"
source "$(dirname "$0")/test_lock.sh"
take_test_lock  # one run at a time on the lab clusters; under CI=true a leftover run is stopped

# cancel_leftover_jobs: the jobs already in the lab clusters' queues (cluster1 on this machine, cluster2
# in ${CLUSTER2_ROOT:-/srv/cluster2}), counted; under CI=true, where the machine is CI's alone, they are
# leftovers (a run cut short, a benchmark's held jobs kept in slurmctld's saved state) and are cancelled
# as root, waiting up to 30 s until none is pending or running. They would change what the tests see:
# a test that signs in as alice gets every job of hers in My jobs (5,000 held ones made a page too tall
# to screenshot in 20 s), and each poll reads them all. Their ended records stay in squeue for
# MinJobAge (300 s) as any ended job's do. Otherwise the count is only logged.
# lab_prefix NAME: sets the array prefix to what runs a Slurm command on lab cluster NAME (nothing for
# cluster1; for cluster2, as cluster/cluster2/lib.sh's in_root: chroot with none of this shell's
# environment, SLURM_CONF..., going in). Fails when cluster2's root is not there.
lab_prefix() {
    prefix=()
    [[ $1 == cluster2 ]] || return 0
    [[ -d ${CLUSTER2_ROOT:-/srv/cluster2} ]] || return 1
    prefix=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8
        chroot "${CLUSTER2_ROOT:-/srv/cluster2}")
}
cancel_leftover_jobs() {
    local name prefix ids
    for name in cluster1 cluster2; do
        lab_prefix "$name" || continue
        # %A: a job's own id, a pending array's as one; scancel of it takes every task
        if ! ids=$(cd / && "${prefix[@]}" squeue -h -t PENDING,RUNNING,SUSPENDED,CONFIGURING,REQUEUED -o %A | sort -u); then
            log "$name: squeue failed (above); jobs left in its queue, if any, stay"
            continue
        fi
        [[ -n $ids ]] || continue
        if [[ ${CI:-} != true ]]; then
            log "$name: $(wc -w <<<"$ids") job(s) already queued; the tests see them (CI=true would cancel them)"
            continue
        fi
        log "CI=true: cancelling $(wc -w <<<"$ids") leftover job(s) in $name's queue"
        # 2>/dev/null: a running array's tasks go with it, and scancel names each as already gone
        (cd / && xargs -n 500 "${prefix[@]}" scancel <<<"$ids" 2>/dev/null) || true
        local deadline=$(( $(date +%s) + 30 ))
        while [[ -n $(cd / && "${prefix[@]}" squeue -h -t PENDING,RUNNING,SUSPENDED,CONFIGURING,REQUEUED,COMPLETING -o %A || echo failed) ]]; do
            (( $(date +%s) < deadline )) || { log "$name: jobs still queued after 30 s (see squeue)"; break; }
            sleep 0.5
        done
    done
}
# A run stopped mid-test (Ctrl-C, a killed CI) can leave a maintenance test's reservation on a lab
# cluster's nodes; once it starts, no job longer than the time left before it starts there (a 1 h
# session on cluster2's g2 waited 4 min and failed). With CI=true every reservation of the lab
# clusters is deleted before the tests, as the leftover jobs are cancelled; otherwise they are listed.
delete_leftover_reservations() {
    local name prefix names
    for name in cluster1 cluster2; do
        lab_prefix "$name" || continue
        names=$(cd / && "${prefix[@]}" scontrol -o show reservation 2>/dev/null | sed -n 's/^ReservationName=\([^ ]*\).*/\1/p')
        [[ -n $names ]] || continue
        if [[ ${CI:-} != true ]]; then
            log "$name: reservation(s) $(tr '\n' ' ' <<<"$names")already there; the tests see them (CI=true would delete them)"
            continue
        fi
        log "CI=true: deleting leftover reservation(s) on $name: $(tr '\n' ' ' <<<"$names")"
        local one
        for one in $names; do
            (cd / && "${prefix[@]}" scontrol delete "ReservationName=$one") || log "$name: could not delete reservation $one"
        done
    done
}
unset PYTHONDONTWRITEBYTECODE  # each pytest process and the portal, hub and Celery processes the tests start reuse __pycache__ (Makefile)
# Workers for the shared tier (beside the hub's process): under --dist loadgroup one of them runs the
# work unit "scarce" (tests/conftest.py: pytest_xdist_make_scheduler) one after another (their jobs need node3 or cluster2's nodes within a
# deadline), the others the tests of tests/conftest.py's SPREAD (docs/testing.md)
: "${TEST_WORKERS:=2}"
bash "$REPO_DIR/scripts/bootstrap.sh" 9>&-
# cluster1 first: its users (portal, the demo users) and uv are what the steps after it need.
CLUSTER2=0 bash "$REPO_DIR/cluster/up.sh" 9>&-
# The rest of the set-up needs nothing of itself but those, so it runs side by side: on a new machine
# cluster2's root (debootstrap and Slurm 24.11: about 40 s), the hub's venv (pip: about 70 s), VS Code
# (code-server's native modules: about 150 s; its own step, so it no longer waits for the hub's pip, and
# a failed install fails the set-up instead of the VS Code tests later) and the image's (debootstrap and
# pip: about 90 s) would otherwise take turns; on
# a machine set up before, each is "up to date" in a second or two. One apt-get runs at a time
# (scripts/lib.sh's apt_install, cluster/cluster2/up.sh). Every step is waited for, and any that failed
# is named, before a test runs. A stopped run stops its steps: bash starts a background job with SIGINT
# ignored, which beside() undoes, so a Ctrl-C reaches each step as it reached the one step of a run
# that took them in turn; a SIGTERM to this script alone (a later CI run stopping a leftover one) is
# passed on to every step and what it started (stop_setup_steps). Otherwise a step stopped half-way
# would go on beside the next run's same step (two debootstraps into one root, two pip installs into
# one venv).
declare -A setup_steps=()
beside() { ( trap - INT QUIT; "$@" ) 9>&- & setup_steps[$!]="$*"; }
# kill_tree PID: SIGTERM to PID and every process below it, children first
kill_tree() {
    local child
    for child in $(pgrep -P "$1" || true); do kill_tree "$child"; done
    kill -TERM "$1" 2>/dev/null || true
}
stop_setup_steps() { local pid; for pid in "${!setup_steps[@]}"; do kill_tree "$pid"; done; }
trap 'stop_setup_steps; exit 143' TERM
trap 'stop_setup_steps; exit 130' INT
cd "$REPO_DIR"
beside bash "$REPO_DIR/cluster/cluster2/up.sh"  # the second cluster, Slurm 24.11 (docs/clusters.md)
beside env PORTAL_SKIP_CODE_SERVER=1 bash "$REPO_DIR/scripts/hub_setup.sh"  # the tests start their own hub from it
beside bash "$REPO_DIR/scripts/install_code_server.sh"  # VS Code for sessions (hub_setup.sh's last step, here beside it)
beside bash "$REPO_DIR/scripts/build_image.sh"  # the demo container image (docs/containers.md)
beside apt_install chromium fonts-dejavu-core   # for the browser tests
beside bash "$REPO_DIR/scripts/lint.sh"
beside bash "$REPO_DIR/scripts/cli_clean_install.sh"  # the CLI installs alone: at most 3 dependencies, gpuportal --help runs
setup_failed=()
for pid in "${!setup_steps[@]}"; do wait "$pid" || setup_failed+=("${setup_steps[$pid]}"); done
trap - TERM INT
(( ${#setup_failed[@]} == 0 )) || die "set-up failed (the lines above say why): $(printf '%s; ' "${setup_failed[@]}")"
cancel_leftover_jobs 9>&-  # under CI=true: the lab queues start empty
delete_leftover_reservations 9>&-  # and no reservation of a stopped run holds their nodes
bash "$REPO_DIR/scripts/prometheus.sh" 9>&-  # 127.0.0.1:9090, scraping the nodes' GPU exporters (docs/gpu-usage.md)
export PORTAL_TEST_RUN
if (( $# )); then
    log "running pytest $*"
    exec "$VENV/bin/pytest" "$@"
fi

ART=$REPO_DIR/test-artifacts
rm -rf "$ART"
mkdir -p "$ART/logs"
export TEST_ARTIFACTS=$ART          # the IdP fixture writes its log here
export COVERAGE_FILE=$ART/.coverage # each tier's data (.coverage.<tier>) is combined into it at the end
export PORTAL_TESTS_NO_SKIP=1       # a test that skips fails, with its reason (tests/no_skip.py): nothing vanishes from a green run

# start_redis PORT: a Redis server of a tier's own (see below) on PORT, unless one answers there already,
# started as tests/fault/conftest.py's redis_start_argv starts it again (no persistence; its log in
# $LOG_DIR/redis-PORT.log). Started before the logs are listed, so its log is among them.
start_redis() {
    local port=$1
    redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1 && return 0
    redis-server --daemonize yes --bind 127.0.0.1 --port "$port" --save "" --appendonly no \
        --dir /tmp --logfile "$LOG_DIR/redis-$port.log" 9>&-
    for _ in $(seq 50); do redis-cli -h 127.0.0.1 -p "$port" ping >/dev/null 2>&1 && break; sleep 0.2; done
    redis-cli -h 127.0.0.1 -p "$port" ping 2>/dev/null | grep -qx PONG \
        || die "a test tier's Redis does not answer on port $port (see $LOG_DIR/redis-$port.log; SERIAL_REDIS_PORT=, OWN_REDIS_PORT= or SERIAL_C2_REDIS_PORT= picks another)"
}
: "${SERIAL_REDIS_PORT:=6380}" "${OWN_REDIS_PORT:=6381}" "${SERIAL_C2_REDIS_PORT:=6382}"
start_redis "$SERIAL_REDIS_PORT"
start_redis "$OWN_REDIS_PORT"
start_redis "$SERIAL_C2_REDIS_PORT"

# The logs the run appends to, and their sizes now: what is past that size is this run's.
LOGS=(/var/log/slurm/*.log /srv/cluster2/var/log/slurm/*.log /var/log/prometheus/*.log "$LOG_DIR"/*.log)
declare -A LOG_START=()
for f in "${LOGS[@]}"; do [[ -f $f ]] && LOG_START[$f]=$(stat -c %s "$f"); done
RUN_START=$(date +%s)
# The machine's CPU time every 5 s (the cpu line of /proc/stat): the summary says how busy the CPUs were in
# each tier, which tells whether a tier waits (and could run beside another) or computes.
( while :; do echo "$(date +%s) $(head -1 /proc/stat)"; sleep 5; done ) >"$ART/cpu.log" 2>/dev/null 9>&- &
cpu_sampler=$!
trap 'kill "$cpu_sampler" 2>/dev/null || true' EXIT

# tier NAME MARK_EXPRESSION PYTEST_ARGS...: one pytest run; its JUnit file, exit status, wall time and
# coverage data go to $ART (a coverage file per tier: two tiers run at once).
tier() {
    local name=$1 mark=$2 t0 rc=0
    shift 2
    t0=$(date +%s)
    echo "$t0" >"$ART/$name.start"
    log "tier $name: pytest -m \"$mark\" $*"
    local prefix=()  # TIER_NICE=N: the tier's pytest at a lower CPU priority (nice -n N)
    [[ -n ${TIER_NICE:-} ]] && prefix=(nice -n "$TIER_NICE")
    COVERAGE_FILE=$ART/.coverage.$name "${prefix[@]}" "$VENV/bin/pytest" -m "$mark" --junitxml="$ART/junit-$name.xml" --cov --cov-report= "$@" || rc=$?
    echo "$rc" >"$ART/$name.rc"
    echo $(( $(date +%s) - t0 )) >"$ART/$name.seconds"
    log "tier $name: exit $rc in $(cat "$ART/$name.seconds") s"
}
# A clusters file of cluster1 alone (the comments and the first table of cluster/clusters.toml), and one
# of cluster2 alone (the comments and the second table), for the tiers that serve one cluster.
awk '/^\[\[clusters\]\]/ { n++ } n < 2' "$REPO_DIR/cluster/clusters.toml" >"$ART/clusters-cluster1.toml"
awk '/^\[\[clusters\]\]/ { n++ } n != 1 && n < 3' "$REPO_DIR/cluster/clusters.toml" >"$ART/clusters-cluster2.toml"
grep -q '^name = "cluster2"' "$ART/clusters-cluster2.toml" || die "cluster/clusters.toml's second table is not cluster2"
# The hub's tests in one process (Redis database 15, PostgreSQL test_portal) beside the other shared
# tests on TEST_WORKERS workers (Redis 14, 13, ...; test_portal_gw0, ...); its output follows theirs.
# Beside them too, the tests marked own_redis (tests/conftest.py's OWN_REDIS: they stop the poller or
# restart Redis and change neither cluster) in one process with a Redis server (OWN_REDIS_PORT) and a
# PostgreSQL test database (test_portal_own_redis) of their own, serving cluster1 alone (the first
# table of cluster/clusters.toml): their Celery stack polls every 2 s, and its beat runs the teams
# sync, usage and image reads as it starts; on cluster2 these would spend the portal user's RPC
# rate-limit bucket there, which the shared tier's cluster2 tests need within their deadlines.
tier hub "(integration or e2e) and not serial and not own_redis and hub" >"$ART/hub.out" 2>&1 &
hub_tier=$!
REDIS_URL=redis://127.0.0.1:$OWN_REDIS_PORT/0 DATABASE_URL=${DATABASE_URL%/*}/portal_own_redis \
    PORTAL_CLUSTERS_FILE=$ART/clusters-cluster1.toml \
    tier own_redis "(integration or e2e) and own_redis" >"$ART/own_redis.out" 2>&1 &
own_redis_tier=$!
PORTAL_TEST_REDIS_DB=14 tier shared "(integration or e2e) and not serial and not own_redis and not hub" -n "$TEST_WORKERS" --dist loadgroup
wait "$hub_tier" || true
cat "$ART/hub.out"
wait "$own_redis_tier" || true
cat "$ART/own_redis.out"
# The serial tests mostly wait (their CPUs about 12-25 % busy): the unit tests run beside them, on one
# worker at a lower priority (test_portal_gw0, Redis database 15 of port 6379), leaving the other CPU
# to the serial tests. They run in three tiers (tests/conftest.py's SERIAL_CLUSTERS says which test
# changes which cluster), each with a Redis server of its own (started above): their fault tests stop
# and restart Redis (tests/fault/conftest.py: redis_port), never the one another tier uses.
# - serial: the tests that change cluster1 (or no cluster), configured with cluster1 alone, so that
#   their syncs, polls and pages never read cluster2, which serial_c2 changes meanwhile; CLUSTER2=0 for
#   the tests that run cluster/up.sh to start a daemon again: it would run cluster/cluster2/up.sh too,
#   which resumes drained nodes and resets the demo users' default accounts there.
# - serial_c2, beside it: the tests that change cluster2 alone, configured with cluster2 alone, with a
#   PostgreSQL test database of their own (test_portal_serial_c2).
# - serial_both, after both: the tests that need both clusters (and any serial test not yet sorted).
TIER_NICE=10 tier unit "not integration and not e2e" -n 1 >"$ART/unit.out" 2>&1 &
unit_tier=$!
REDIS_URL=redis://127.0.0.1:$SERIAL_C2_REDIS_PORT/0 DATABASE_URL=${DATABASE_URL%/*}/portal_serial_c2 \
    PORTAL_CLUSTERS_FILE=$ART/clusters-cluster2.toml \
    tier serial_c2 "(integration or e2e) and serial_c2" >"$ART/serial_c2.out" 2>&1 &
serial_c2_tier=$!
REDIS_URL=redis://127.0.0.1:$SERIAL_REDIS_PORT/0 PORTAL_CLUSTERS_FILE=$ART/clusters-cluster1.toml CLUSTER2=0 \
    tier serial "(integration or e2e) and serial and not serial_c2 and not serial_both"
wait "$serial_c2_tier" || true
cat "$ART/serial_c2.out"
REDIS_URL=redis://127.0.0.1:$SERIAL_REDIS_PORT/0 tier serial_both "(integration or e2e) and serial_both"
wait "$unit_tier" || true
cat "$ART/unit.out"

# This run's part of each daemon's log, the test hubs' logs, and the IdP logs (already in $ART).
for f in "${LOGS[@]}"; do
    [[ -f $f ]] || continue
    name=$(sed 's|^/||; s|/|_|g' <<<"$f")
    tail -c +"$(( ${LOG_START[$f]:-0} + 1 ))" "$f" >"$ART/logs/$name"
done
find "$PORTAL_VAR_DIR" -maxdepth 1 -name 'test-hub-*.log' -newermt "@$RUN_START" -exec cp {} "$ART/logs/" \;

log "branch coverage of the app code (coverage.py; docs/testing.md keeps the figure)"
"$VENV/bin/coverage" combine --quiet "$ART"/.coverage.* || log "coverage: no data to combine"
echo "branch coverage: $("$VENV/bin/coverage" report --format=total --precision=1)%"
failed=0
"$VENV/bin/python" "$REPO_DIR/scripts/test_summary.py" "$ART" || failed=1
for rc in "$ART"/*.rc; do [[ $(cat "$rc") == 0 ]] || failed=1; done
exit "$failed"
