#!/usr/bin/env bash
# Stop what cluster/up.sh started, in reverse order: cluster2 (cluster/cluster2/down.sh), the portal sshd, the
# stand-in GPU exporters, the three slurmd, slurmctld, slurmdbd, munged (each by its pidfile, waiting until it is
# gone). MariaDB is stopped only if up.sh started it.
# Configs, users, keys, accounting data and the Slurm state are kept: up.sh brings it all back.
set -euo pipefail
LOG_TAG=down
# shellcheck source=cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $(id -u) -eq 0 ]] || die "run as root"

# cluster2 first (cluster/cluster2/down.sh; nothing to do if it has no root): it cancels its own jobs, and its
# slurmstepd processes must be gone before the pkill below.
bash "$CLUSTER_DIR/cluster2/down.sh" || log "cluster/cluster2/down.sh failed (see above); stopping this cluster anyway"

# Running jobs (sessions included) would outlive their slurmd as orphaned slurmstepd processes:
# cancel them while slurmctld can still do it, and kill any step daemon left after slurmd stops.
if pgrep -x slurmctld >/dev/null; then
    jobs=$(squeue -h -t RUNNING,PENDING,COMPLETING -o %i 2>/dev/null || true)
    if [[ -n $jobs ]]; then
        log "cancelling $(wc -w <<<"$jobs") job(s) still in the queue"
        scancel $jobs 2>/dev/null || true
        sleep 2
    fi
fi
stop_procs "portal sshd|$SSHD_PORTAL_PID|sshd"
specs=()
for node in "${NODES[@]}"; do
    if pid=$(exporter_pid "/run/fake-dcgm-exporter-$node.pid" "$node"); then
        specs+=("GPU exporter $node|/run/fake-dcgm-exporter-$node.pid|python3")
    else
        rm -f "/run/fake-dcgm-exporter-$node.pid"
    fi
done
(( ${#specs[@]} )) && stop_procs "${specs[@]}"
specs=()
for (( i = ${#NODES[@]} - 1; i >= 0; i-- )); do
    specs+=("slurmd ${NODES[i]}|/run/slurmd-${NODES[i]}.pid|slurmd")
done
stop_procs "${specs[@]}"     # the three slurmd together
pkill -KILL -x slurmstepd 2>/dev/null && log "killed leftover slurmstepd processes" || true
stop_procs "slurmctld|$SLURMCTLD_PID|slurmctld"
stop_procs "slurmdbd|$SLURMDBD_PID|slurmdbd"
stop_procs "munged|$MUNGED_PID|munged"

if [[ -f $STATE_DIR/mariadb-started-by-up ]]; then
    mariadb_pid=$(cat /run/mysqld/mysqld.pid 2>/dev/null || true)
    if mysqladmin --protocol=socket shutdown >/dev/null 2>&1; then
        if [[ -n $mariadb_pid ]]; then
            wait_for 60 "MariaDB to exit" bash -c "source '$CLUSTER_DIR/lib.sh'; ! alive $mariadb_pid" || true
        fi
        log "MariaDB: stopped (up.sh had started it)"
    else
        log "MariaDB: not running"
    fi
    rm -f "$STATE_DIR/mariadb-started-by-up"
else
    log "MariaDB: left running (up.sh did not start it)"
fi
log "done"
