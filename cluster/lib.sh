# Shared settings and helpers for cluster/up.sh and cluster/down.sh (sourced, not run).
# Every setting may be overridden from the environment.

CLUSTER_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
REPO_DIR=$(dirname "$CLUSTER_DIR")
TEMPLATE_DIR=$CLUSTER_DIR/etc

: "${PORTAL_VAR_DIR:=$REPO_DIR/var}"          # portal's ssh key + known_hosts live in $PORTAL_VAR_DIR/ssh
: "${PORTAL_SSH_ADDR:=127.0.0.1}"             # second sshd, for the portal's service user only
: "${PORTAL_SSH_PORT:=2222}"
: "${PORTAL_USER:=portal}"                    # the portal's service user (not in $SLURM_GROUP)
: "${PORTAL_KEY_OWNER:=$(stat -c %U "$REPO_DIR")}"  # local user that owns the portal's client key
: "${SLURM_GROUP:=slurmusers}"                # the portal may act (via sudo) only as members of this group
# the submit helper (cluster/etc/gpuportal-sbatch): same variable and default as the portal's setting
: "${PORTAL_SBATCH_HELPER:=/usr/local/libexec/gpuportal/gpuportal-sbatch}"
SBATCH_HELPER=$PORTAL_SBATCH_HELPER
: "${DEMO_USERS:=alice bob carol dana}"
: "${OUTSIDER_USER:=outsider}"                # exists, but NOT in $SLURM_GROUP
: "${NEWCOMER_USER:=erin}"                    # in $SLURM_GROUP, no Slurm association: a researcher an admin links
: "${CLUSTER_NAME:=portal}"
: "${CONTROLLER_HOST:=$(hostname -s)}"        # slurmctld refuses to start unless this is the local host
: "${CONTROLLER_ADDR:=127.0.0.1}"
: "${SLURMCTLD_PORT:=6817}"
: "${SLURMDBD_PORT:=6819}"
: "${NODE1_PORT:=6818}"
: "${NODE2_PORT:=6821}"
: "${NODE3_PORT:=6822}"
: "${DB_PORT:=3306}"
: "${DB_NAME:=slurm_acct_db}"
: "${NODE_WAIT_S:=60}"                        # how long up.sh waits for the nodes to become usable
: "${STATE_DIR:=/run/portal-cluster}"         # records e.g. that up.sh started MariaDB

NODES=(node1 node2 node3)
# The stand-in GPU exporter of each node (cluster/fake_dcgm_exporter.py; cluster/etc/prometheus.yml scrapes these)
declare -A EXPORTER_PORT=([node1]=9401 [node2]=9402 [node3]=9403)
GPU_JOB_MAP_ROOT=/run/dcgm-job-map       # + /<node>: the mapping directory of each node (gpu-job-map.conf)
FAKE_GPU_LOAD_ROOT=/run/fake-gpu-load    # + /<node>: the loads jobs chose (gpuportal-fake-gpu-load)
SLURM_ETC=/etc/slurm
LOG_DIR=/var/log/slurm
SSHD_PORTAL_CONF=/etc/ssh/sshd_config_portal
SSHD_PORTAL_PID=/run/sshd-portal.pid
MUNGED_PID=/run/munge/munged.pid
SLURMDBD_PID=/run/slurmdbd.pid
SLURMCTLD_PID=/run/slurmctld.pid
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:$PATH
# host_apt ARGS...: apt-get on this host, one at a time (the same lock as scripts/lib.sh's apt_install):
# scripts/test.sh builds cluster2's root beside other set-up steps that install packages, and apt-get
# fails at once, not waiting, when another holds dpkg's or the package lists' lock.
host_apt() { flock -w 900 /run/lock/gpuportal-apt.lock apt-get "$@"; }  # waits 15 minutes at most

_T0=$(date +%s%N)
elapsed() { echo "$(( ($(date +%s%N) - _T0) / 1000000 ))" | awk '{printf "%.1f", $1/1000}'; }
log() { printf '[%s %5ss] %s\n' "${LOG_TAG:-cluster}" "$(elapsed)" "$*"; }
die() { printf '[%s] ERROR: %s\n' "${LOG_TAG:-cluster}" "$*" >&2; exit 1; }

# pid_of PIDFILE COMM: print the pid recorded in PIDFILE if that process is alive and its
# command name is COMM (or COMM-wlm) (guards against a stale pidfile whose pid was reused); else fail.
pid_of() {
    local file=$1 comm=$2 pid
    [[ -s $file ]] || return 1
    pid=$(tr -dc 0-9 <"$file")
    [[ -n $pid ]] && alive "$pid" || return 1
    local actual
    actual=$(cat "/proc/$pid/comm" 2>/dev/null) || return 1
    # Debian installs slurmctld/slurmd as alternatives for slurmctld-wlm/slurmd-wlm
    [[ $actual == "$comm" || $actual == "$comm-wlm" ]] || return 1
    echo "$pid"
}
running() { pid_of "$1" "$2" >/dev/null; }

# exporter_pid PIDFILE NODE: the pid of the stand-in exporter of NODE recorded in PIDFILE, if it runs; else fail.
exporter_pid() {
    local pid
    pid=$(pid_of "$1" python3) || return 1
    tr '\0' ' ' <"/proc/$pid/cmdline" 2>/dev/null | grep -q -- "fake_dcgm_exporter.py --node $2 " || return 1
    echo "$pid"
}

# wait_for SECONDS WHAT CMD...: poll CMD every 0.2 s until it succeeds; fail after SECONDS.
wait_for() {
    local limit=$1 what=$2 end
    shift 2
    end=$(( $(date +%s) + limit ))
    until "$@" >/dev/null 2>&1; do
        (( $(date +%s) < end )) || { log "timed out after ${limit}s waiting for $what"; return 1; }
        sleep 0.2
    done
}

# alive PID: the process exists and is not a zombie (here PID 1 may reap exited daemons only every few seconds)
alive() {
    kill -0 "$1" 2>/dev/null || return 1
    local stat
    stat=$(cat "/proc/$1/stat" 2>/dev/null) || return 1
    stat=${stat##*) }
    [[ ${stat%% *} != Z ]]
}

# stop_procs "NAME|PIDFILE|COMM" ...: SIGTERM all of them at once, wait (up to $STOP_TIMEOUT s) until all are
# gone, SIGKILL what is left as a last resort, remove the pidfiles.
: "${STOP_TIMEOUT:=30}"
stop_procs() {
    local spec name file comm pid end i
    local -a names=() pids=() files=()
    for spec in "$@"; do
        IFS='|' read -r name file comm <<<"$spec"
        if pid=$(pid_of "$file" "$comm"); then
            kill -TERM "$pid" 2>/dev/null || true
            names+=("$name") pids+=("$pid") files+=("$file")
        else
            log "$name: not running"
            rm -f "$file"
        fi
    done
    end=$(( $(date +%s) + STOP_TIMEOUT ))
    for i in "${!pids[@]}"; do
        while alive "${pids[i]}"; do
            if (( $(date +%s) >= end )); then
                log "${names[i]}: pid ${pids[i]} still alive after ${STOP_TIMEOUT}s, sending SIGKILL"
                kill -KILL "${pids[i]}" 2>/dev/null || true
                sleep 0.5
                break
            fi
            sleep 0.1
        done
        rm -f "${files[i]}"
        log "${names[i]}: stopped (pid ${pids[i]})"
    done
}

# partition_change_only OLD_TEXT NEW_FILE: true when the two slurm.conf texts differ only in PartitionName lines
# and comments (what 'scontrol reconfigure' applies without restarting slurmctld and slurmd).
partition_change_only() {
    diff -q <(grep -v -e '^PartitionName=' -e '^#' <<<"$1") <(grep -v -e '^PartitionName=' -e '^#' "$2") >/dev/null
}

# The small-job pool (docs/policy.md): partition 'small' has the partition QOS 'small', whose per-job limits
# (MaxTRESPerJob gres/gpu, MaxWall; no DenyOnLimit: on a partition QOS it would turn the teams' quota holds into
# refusals) the portal's teams sync keeps (PORTAL_SMALL_POOL_*). slurmctld
# needs the QOS to exist when it reads slurm.conf, so it is created here with the portal's defaults if absent.
POOL_QOS=small
ensure_pool_qos() {  # ensure_pool_qos SACCTMGR_COMMAND: before slurmctld starts (slurm.conf names the QOS)
    local sacct=$1
    if ! "$sacct" -nP show qos format=name | grep -qx "$POOL_QOS"; then
        # Without its GPU limit: on a new slurmdbd the gres/gpu TRES does not exist until slurmctld has registered
        # (AccountingStorageTRES), and sacctmgr refuses the limit ("no TRES known by type gres/gpu").
        "$sacct" -i add qos "$POOL_QOS" MaxWall=01:00:00 >/dev/null
        log "sacctmgr: added QOS $POOL_QOS (the small-job pool's partition QOS)"
    fi
}

ensure_pool_qos_gpu_limit() {  # ensure_pool_qos_gpu_limit SACCTMGR_COMMAND: once slurmctld is up (gres/gpu known)
    local sacct=$1 limits i
    for i in $(seq 30); do
        "$sacct" -nP show tres type=gres format=name | grep -qx gpu && break
        sleep 1
    done
    limits=$("$sacct" -nP show qos "$POOL_QOS" format=maxtres)
    if [[ -z $limits ]]; then
        "$sacct" -i modify qos "$POOL_QOS" set MaxTRESPerJob=gres/gpu=1 >/dev/null
        log "sacctmgr: QOS $POOL_QOS allows 1 GPU per job"
    fi
}
