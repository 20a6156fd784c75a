#!/usr/bin/env bash
# Stop what cluster/cluster2/up.sh started, in reverse order: cancel cluster2's jobs, then its portal sshd, the
# two slurmd, what is left of their jobs, slurmctld, slurmdbd and munged (each by its pidfile inside the root, and
# only if the process runs in that root: the host cluster runs daemons of the same names), then unmount the
# root's image directory, /dev/pts, /dev, /sys and /proc. Called by cluster/down.sh. The root, its configs, users,
# keys, Slurm state and accounting database are kept: up.sh brings it all back in seconds.
# To remove cluster2 entirely afterwards: rm -rf --one-file-system /srv/cluster2, and
# mysql -e 'DROP DATABASE slurm_acct_db_cluster2' (the names are settings in cluster/cluster2/lib.sh).
set -euo pipefail
LOG_TAG=cluster2-down
# shellcheck source=cluster/cluster2/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

[[ $(id -u) -eq 0 ]] || die "run as root"
R=$CLUSTER2_ROOT
if [[ ! -d $R ]]; then
    log "no root at $R: nothing to stop"
    exit 0
fi

# Running jobs would outlive their slurmd: cancel them while slurmctld can still do it.
if running_in_root "$C2_SLURMCTLD_PID" slurmctld; then
    jobs=$(in_root squeue -h -t PENDING,RUNNING,SUSPENDED,COMPLETING,CONFIGURING -o %i 2>/dev/null || true)
    if [[ -n $jobs ]]; then
        log "cancelling $(wc -w <<<"$jobs") job(s) still in cluster2's queue"
        # shellcheck disable=SC2086  # job ids, one word each
        in_root scancel $jobs 2>/dev/null || true
        queue_empty() { [[ -z $(in_root squeue -h -t PENDING,RUNNING,SUSPENDED,COMPLETING,CONFIGURING -o %i) ]]; }
        wait_for 15 "cluster2's jobs to end" queue_empty || true
    fi
fi
stop_in_root "portal sshd|$C2_SSHD_PID|sshd"
exporters=()   # the stand-in GPU exporters run on the host
for node in "${CLUSTER2_NODES[@]}"; do
    if exporter_pid "/run/fake-dcgm-exporter-cluster2-$node.pid" "$node" >/dev/null; then
        exporters+=("GPU exporter $node|/run/fake-dcgm-exporter-cluster2-$node.pid|python3")
    else
        rm -f "/run/fake-dcgm-exporter-cluster2-$node.pid"
    fi
done
(( ${#exporters[@]} )) && stop_procs "${exporters[@]}"
specs=()
for (( i = ${#CLUSTER2_NODES[@]} - 1; i >= 0; i-- )); do
    specs+=("slurmd ${CLUSTER2_NODES[i]}|/run/slurm/slurmd-${CLUSTER2_NODES[i]}.pid|slurmd")
done
stop_in_root "${specs[@]}"

# kill_in_root WHAT PID...: SIGTERM, up to 5 s, then SIGKILL
kill_in_root() {
    local what=$1 pid end
    shift
    (( $# )) || return 0
    log "stopping $# leftover process(es) in the root ($what): $(for pid in "$@"; do cat "/proc/$pid/comm" 2>/dev/null; done | sort | uniq -c | awk '{printf "%s%s x%s", sep, $2, $1; sep=", "}')"
    kill -TERM "$@" 2>/dev/null || true
    end=$(( $(date +%s) + 5 ))
    for pid in "$@"; do
        while alive "$pid" && (( $(date +%s) < end )); do sleep 0.1; done
        alive "$pid" && kill -KILL "$pid" 2>/dev/null || true
    done
    for pid in "$@"; do
        while alive "$pid"; do sleep 0.1; done
    done
}
# job processes, slurmstepd and ssh sessions left after slurmd and sshd stopped (never the controller's own)
leftover=()
for pid in $(procs_in_root); do
    case $(cat "/proc/$pid/comm" 2>/dev/null) in
        slurmctld|slurmscriptd|slurmdbd|munged) ;;
        *) leftover+=("$pid") ;;
    esac
done
kill_in_root "jobs and sessions" "${leftover[@]}"

stop_in_root "slurmctld|$C2_SLURMCTLD_PID|slurmctld"
stop_in_root "slurmdbd|$C2_SLURMDBD_PID|slurmdbd"
stop_in_root "munged|$C2_MUNGED_PID|munged"
mapfile -t leftover < <(procs_in_root)
kill_in_root "after the daemons" "${leftover[@]}"

for (( i = ${#CLUSTER2_MOUNTS[@]} - 1; i >= 0; i-- )); do
    m=$R/${CLUSTER2_MOUNTS[i]}
    if mounted "$m"; then
        umount "$m" || die "could not unmount $m: a process on the host still uses it ('fuser -vm $m' shows which)"
        log "unmounted $m"
    fi
done
left=$(mounts_below)
[[ -z $left ]] || die "mounts left below $R: $(tr '\n' ' ' <<<"$left")"
[[ -z $(procs_in_root) ]] || die "processes still run in $R: $(procs_in_root | tr '\n' ' ')"
log "done: nothing of cluster2 runs, nothing is mounted below $R"
