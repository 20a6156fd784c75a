# Shared settings and helpers for cluster/cluster2/up.sh, down.sh and check.sh (sourced, not run).
# cluster2 is a second, real Slurm cluster (Slurm 24.11 from Debian 13 "trixie") that runs in a chroot
# beside the host's Slurm 22.05 cluster: its own munged, slurmdbd, slurmctld, two slurmd and an sshd,
# on ports of its own. Every setting may be overridden from the environment.
# The host cluster's settings and helpers (log, die, wait_for, alive; DEMO_USERS, PORTAL_USER, ...)
# come from cluster/lib.sh.

# shellcheck source=cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/../lib.sh"
CLUSTER2_DIR=$CLUSTER_DIR/cluster2
CLUSTER2_TEMPLATES=$CLUSTER2_DIR/etc

: "${CLUSTER2_ROOT:=/srv/cluster2}"            # the Debian 13 root (debootstrap --variant=minbase)
: "${CLUSTER2_SUITE:=trixie}"
# the mirror apt already uses here (only Debian's registry may be reachable)
if [[ -z ${CLUSTER2_MIRROR:-} ]]; then
    CLUSTER2_MIRROR=$(awk '$1 == "URIs:" {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
    [[ -n $CLUSTER2_MIRROR ]] || CLUSTER2_MIRROR=$(awk '$1 == "deb" && $2 !~ /security/ {print $2; exit}' \
        /etc/apt/sources.list 2>/dev/null || true)
    : "${CLUSTER2_MIRROR:=http://deb.debian.org/debian}"
fi
: "${CLUSTER2_NAME:=cluster2}"
: "${CLUSTER2_SSH_ADDR:=127.0.0.1}"            # sshd inside the root, for the portal's service user only
: "${CLUSTER2_SSH_PORT:=2223}"
: "${CLUSTER2_CTLD_PORT:=6917}"
: "${CLUSTER2_SLURMD_PORT:=6918}"              # slurm.conf's default SlurmdPort (each node has its own)
: "${CLUSTER2_DBD_PORT:=6919}"
: "${CLUSTER2_NODE1_PORT:=6921}"
: "${CLUSTER2_NODE2_PORT:=6922}"
: "${CLUSTER2_SRUN_PORTS:=6923-6930}"
: "${CLUSTER2_DB_NAME:=slurm_acct_db_cluster2}" # on the host's MariaDB; never the host cluster's slurm_acct_db
: "${CLUSTER2_DB_USER:=slurm_cluster2}"

# Packages installed in the root (--no-install-recommends). python3: the system Python that profile
# environments are built from (trixie has 3.13).
CLUSTER2_PACKAGES=(slurmctld slurmd slurm-client slurmdbd munge openssh-server sudo python3)
# ch-run, the container runtime of the site's images: the host cluster's own packages at the host's versions
# (bookworm's Charliecloud 0.31 and the libraries it is linked with), fetched by the host's apt and held in the
# root. Not trixie's 0.38: its --home always overlays a tmpfs at /srv, which hides the site's images and
# environment cache (/srv/gpuportal/...) from ch-run. docs/containers.md says what else a cluster2 job needs.
CLUSTER2_HOST_PACKAGES=(charliecloud-runtime charliecloud-common squashfuse libsquashfuse0 libfuse3-3)
CLUSTER2_NODES=(g1 g2)
# The stand-in GPU exporter of each node, run on the host (cluster/fake_dcgm_exporter.py; cluster/etc/prometheus.yml
# scrapes these with cluster="cluster2"); it reads the node's mapping directory inside the root.
declare -A EXPORTER_PORT=([g1]=9411 [g2]=9412)
# /dev/fakegpuN minors of cluster2's fake GPUs (the host cluster uses 0-9): g1 20-23 (h100), g2 24-25 (l40s)
CLUSTER2_GPU_MINORS=(20 21 22 23 24 25)
CLUSTER2_STAMP=/etc/gpuportal-cluster2-root   # written last by the build: a root without it is half-built
# The site's image directory (scripts/build_image.sh), bound read-only at the same path: an image has one
# path in the portal's registry, and cluster2's nodes see the site's image storage as cluster1's do.
: "${PORTAL_IMAGES_DIR:=/srv/gpuportal/images}"
CLUSTER2_MOUNTS=(proc sys dev dev/pts "${PORTAL_IMAGES_DIR#/}")   # bind-mounted from the host, in this order
CLUSTER2_READ_ONLY=("${PORTAL_IMAGES_DIR#/}")                     # those of them mounted read-only

# Paths inside the root
C2_LOG_DIR=/var/log/slurm
C2_MUNGE_SOCKET=/run/munge2/munge.socket.2
C2_MUNGED_PID=/run/munge2/munged.pid
C2_SLURMDBD_PID=/run/slurm/slurmdbd.pid
C2_SLURMCTLD_PID=/run/slurm/slurmctld.pid
C2_SSHD_CONF=/etc/ssh/sshd_config_portal
C2_SSHD_PID=/run/sshd-portal.pid              # the PidFile of cluster/etc/sshd_config_portal, inside the root

# in_root CMD...: run CMD inside the root with a clean environment (no SLURM_CONF or the like from the
# host leaks in: the root's own /etc/slurm decides). 'in_root squeue' is 24.11; plain 'squeue' is the host's.
in_root() {
    (cd / && env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 \
        TERM=dumb chroot "$CLUSTER2_ROOT" "$@")
}

# root_of PID: the root directory of a process ("" if it is gone): the root's path for a chrooted process,
# "/" for one in a mount namespace pivoted into the root (up.sh's start_pivoted: the slurmd)
root_of() { readlink "/proc/$1/root" 2>/dev/null || true; }
# runs_in_root PID: the process's root directory is this root's, entered by chroot(2) or by pivot_root(2) in a
# mount namespace of its own (the same directory, by device and inode)
runs_in_root() { [[ /proc/$1/root/ -ef $CLUSTER2_ROOT/ ]]; }

# pid_in_root PIDFILE COMM: print the pid recorded in the root's PIDFILE (a path inside the root) if that
# process is alive, is named COMM and runs in this root (both clusters run processes named slurmctld, slurmd,
# munged, sshd: a name never identifies one); else fail.
pid_in_root() {
    local file=$CLUSTER2_ROOT$1 comm=$2 pid
    [[ -s $file ]] || return 1
    pid=$(tr -dc 0-9 <"$file")
    [[ -n $pid ]] && alive "$pid" || return 1
    [[ $(cat "/proc/$pid/comm" 2>/dev/null) == "$comm" ]] || return 1
    runs_in_root "$pid" || return 1
    echo "$pid"
}
running_in_root() { pid_in_root "$1" "$2" >/dev/null; }

# procs_in_root: pids of every live process whose root is this root (jobs, slurmstepd, ssh sessions too)
procs_in_root() {
    local d pid
    for d in /proc/[0-9]*; do
        pid=${d#/proc/}
        runs_in_root "$pid" && alive "$pid" && echo "$pid"
    done
    return 0
}

# stop_in_root "NAME|PIDFILE|COMM" ...: like cluster/lib.sh's stop_procs, for daemons of the root: SIGTERM all
# at once, wait (up to $STOP_TIMEOUT s) until each is gone or a zombie, SIGKILL what is left, remove the pidfiles.
stop_in_root() {
    local spec name file comm pid end i
    local -a names=() pids=() files=()
    for spec in "$@"; do
        IFS='|' read -r name file comm <<<"$spec"
        if pid=$(pid_in_root "$file" "$comm"); then
            kill -TERM "$pid" 2>/dev/null || true
            names+=("$name") pids+=("$pid") files+=("$CLUSTER2_ROOT$file")
        else
            log "$name: not running"
            rm -f "$CLUSTER2_ROOT$file"
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

# mounted PATH: PATH (on the host) is a mount point
mounted() { mountpoint -q "$1" 2>/dev/null; }
# mounts_below: the mount points at or below the root (from /proc/self/mountinfo)
mounts_below() { awk -v r="$CLUSTER2_ROOT" '$5 == r || index($5, r "/") == 1 {print $5}' /proc/self/mountinfo; }
