#!/usr/bin/env bash
# Bring up cluster2: a second, real Slurm cluster (Slurm 24.11 from Debian 13 "trixie") beside the host's
# Slurm 22.05 cluster, in a Debian 13 root at $CLUSTER2_ROOT (default /srv/cluster2) made once with
# 'debootstrap --variant=minbase trixie'. Inside it: its own munged (own socket and key), slurmdbd (the host's
# MariaDB, its own database), slurmctld, two slurmd (g1: 4 fake h100, g2: 2 fake l40s) and an sshd on
# 127.0.0.1:2223 through which the portal's service user submits jobs as the researcher with sudo, with the
# same key, sudoers rule and submit helper as on the host cluster; ch-run (charliecloud-runtime) as on the host
# cluster, and the host's image directory ($PORTAL_IMAGES_DIR) bound read-only at the same path.
# Run by cluster/up.sh after the host cluster is up (it needs the host's MariaDB, users and portal key);
# CLUSTER2=0 skips it there. scripts/test.sh runs it itself, beside its other set-up steps, after
# cluster/up.sh with CLUSTER2=0. Idempotent: every step checks first; a second run only verifies and takes a few seconds.
# Settings (environment overrides): cluster/cluster2/lib.sh. Stop it with cluster/cluster2/down.sh.
set -euo pipefail
LOG_TAG=cluster2
# shellcheck source=cluster/cluster2/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
shopt -u patsub_replacement 2>/dev/null || true   # '&' in ${var//x/y} replacements stays literal

[[ $(id -u) -eq 0 ]] || die "run as root"
R=$CLUSTER2_ROOT
[[ $R == /* && $R != / ]] || die "CLUSTER2_ROOT must be an absolute path other than / (it is '$R')"
[[ $PORTAL_IMAGES_DIR == /?* && $PORTAL_IMAGES_DIR != *..* ]] || \
    die "PORTAL_IMAGES_DIR must be an absolute path other than / without '..' (it is '$PORTAL_IMAGES_DIR')"
mkdir -p "$LOG_DIR"
BUILD_LOG=$LOG_DIR/cluster2-build.log
exec 3>&1   # lets functions polled by wait_for (whose output is discarded) still log
BUILD_S=

# The command prefix that runs something inside the root with a clean environment (see in_root in lib.sh).
ROOT_ENV=(env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LANG=C.UTF-8 TERM=dumb)
CHROOT=("${ROOT_ENV[@]}" chroot "$R")

# ids_in_root USER[:GROUP]: "uid:gid" of names in the root's own passwd/group (its system users, e.g. munge,
# have other ids than the host's).
ids_in_root() {
    local user=${1%%:*} group=${1#*:} uid gid
    [[ $1 == *:* ]] || group=$user
    uid=$(awk -F: -v n="$user" '$1 == n {print $3; exit}' "$R/etc/passwd")
    gid=$(awk -F: -v n="$group" '$1 == n {print $3; exit}' "$R/etc/group")
    [[ -n $uid && -n $gid ]] || die "no user '$user' or group '$group' in $R/etc/passwd, $R/etc/group"
    echo "$uid:$gid"
}

# render TEMPLATE DEST MODE OWNER: fill @NAME@ placeholders from the shell variables named in RENDER_NAMES,
# install DEST (a path inside the root) only if the content, mode or owner differ. OWNER is a name in the root.
# Sets RENDER_CHANGED=1 when DEST was (re)written. Pure bash: secrets never reach argv. RENDER_CHECK, if set,
# is a command that gets the new file's path inside the root before it replaces DEST.
RENDER_NAMES=(CLUSTER2_NAME CONTROLLER_HOST CLUSTER2_CTLD_PORT CLUSTER2_SLURMD_PORT CLUSTER2_SRUN_PORTS
              CLUSTER2_DBD_PORT CLUSTER2_NODE1_PORT CLUSTER2_NODE2_PORT C2_MUNGE_SOCKET C2_SLURMCTLD_PID
              C2_SLURMDBD_PID DB_PORT DB_PASSWORD CLUSTER2_DB_USER CLUSTER2_DB_NAME
              PORTAL_SSH_PORT PORTAL_SSH_ADDR PORTAL_USER SLURM_GROUP SBATCH_HELPER)
render() {
    local template=$1 dest=$R$2 mode=$3 ids text name
    ids=$(ids_in_root "$4")
    text=$(<"$template")
    for name in "${RENDER_NAMES[@]}"; do
        text=${text//@$name@/${!name:-}}
    done
    [[ $text != *@[A-Z_]*@* ]] || die "unfilled placeholder in $template"
    RENDER_CHANGED=0
    if [[ -f $dest ]] && [[ $(<"$dest") == "$text" ]] && [[ $(stat -c '%a %u:%g' "$dest") == "$mode $ids" ]]; then
        return 0
    fi
    local tmp
    tmp=$(mktemp "$dest.XXXXXX")
    printf '%s\n' "$text" >"$tmp"
    chmod "$mode" "$tmp"
    chown "$ids" "$tmp"
    if [[ -n ${RENDER_CHECK:-} ]] && ! $RENDER_CHECK "${tmp#"$R"}"; then
        rm -f "$tmp"
        die "$dest: rendered file failed the check '$RENDER_CHECK'"
    fi
    mv -f "$tmp" "$dest"
    RENDER_CHANGED=1
    log "installed $dest"
}
check_sshd_config() { "${CHROOT[@]}" /usr/sbin/sshd -t -f "$1"; }
check_sudoers() { "${CHROOT[@]}" /usr/sbin/visudo -qcf "$1"; }

# detached CMD...: run CMD with stdin from /dev/null and every inherited descriptor above 2 closed, so that a
# daemon it leaves behind holds no pipe of whoever called up.sh (e.g. 'up.sh | tee log' would never end).
detached() {
    (
        for fd in /proc/$BASHPID/fd/*; do
            fd=${fd##*/}
            if (( fd > 2 )); then eval "exec $fd>&-"; fi
        done
        exec "$@" </dev/null
    )
}

# start_in_root NAME CMD...: start a self-daemonizing program inside the root; its early stderr goes to the
# root's /var/log/slurm/NAME.start.log.
start_in_root() {
    local name=$1 log_file=$R$C2_LOG_DIR/$1.start.log
    shift
    if ! detached "${CHROOT[@]}" "$@" >"$log_file" 2>&1; then
        cat "$log_file" >&2
        die "$name (cluster2) failed to start (see $R$C2_LOG_DIR)"
    fi
    [[ -s $log_file ]] || rm -f "$log_file"
}

# start_pivoted NAME CMD...: start_in_root, but CMD runs in a mount namespace of its own whose root is the
# root's directory by pivot_root(2), not chroot(2): the kernel refuses a new user namespace to a chrooted
# process (unshare(2): EPERM), and ch-run needs one for each job in a site image (docs/containers.md). The
# namespace holds a private copy of the mounts below the root as they are when it starts (mount_all runs first);
# the host's tree is detached from it. Its processes' root reads as "/" (runs_in_root in lib.sh tells them).
start_pivoted() {
    local name=$1 log_file=$R$C2_LOG_DIR/$1.start.log
    shift
    install -d -m 755 "$R/mnt"   # where pivot_root puts the host's tree, unmounted at once
    # shellcheck disable=SC2016  # the script is sh's, its arguments come after it
    if ! detached unshare --mount --propagation private -- /bin/sh -ec '
            root=$1; shift
            mount --rbind "$root" "$root"
            cd "$root"
            pivot_root . mnt
            umount -l /mnt
            cd /
            exec "$@"' sh "$R" "${ROOT_ENV[@]}" "$@" >"$log_file" 2>&1; then
        cat "$log_file" >&2
        die "$name (cluster2) failed to start (see $R$C2_LOG_DIR)"
    fi
    [[ -s $log_file ]] || rm -f "$log_file"
}

# ---------------------------------------------------------------------------------------------------------------
# 1. The Debian 13 root: debootstrap once, then the packages (Debian's policy-rc.d keeps apt from starting daemons)
# ---------------------------------------------------------------------------------------------------------------
mount_all() {
    local m mode
    for m in "${CLUSTER2_MOUNTS[@]}"; do
        mounted "$R/$m" && continue
        [[ -d /$m ]] || install -d -m 755 "/$m"   # the image directory, before scripts/build_image.sh fills it
        mkdir -p "$R/$m"
        mount --bind "/$m" "$R/$m"
        mode=
        if [[ " ${CLUSTER2_READ_ONLY[*]} " == *" $m "* ]]; then
            mount -o remount,bind,ro "$R/$m"
            mode=" read-only"
        fi
        log "mounted /$m on $R/$m$mode"
    done
}
unmount_all() {
    local i m
    for (( i = ${#CLUSTER2_MOUNTS[@]} - 1; i >= 0; i-- )); do
        m=${CLUSTER2_MOUNTS[i]}
        mounted "$R/$m" && umount "$R/$m"
    done
    return 0
}
host_pkg_missing() { [[ $(dpkg-query -W -f='${db:Status-Status}' "$1" 2>/dev/null) != installed ]]; }

if [[ ! -f $R$CLUSTER2_STAMP ]]; then
    build_t0=$(date +%s%N)
    if host_pkg_missing debootstrap; then
        log "installing debootstrap"
        DEBIAN_FRONTEND=noninteractive host_apt install -y -qq --no-install-recommends debootstrap >/dev/null || {
            DEBIAN_FRONTEND=noninteractive host_apt update -qq
            DEBIAN_FRONTEND=noninteractive host_apt install -y -qq --no-install-recommends debootstrap >/dev/null
        } || die "could not install debootstrap with apt-get (is the Debian mirror reachable?)"
    fi
    if [[ -e $R ]]; then
        # a build that stopped half-way (no stamp): start again from nothing
        [[ -z $(procs_in_root) ]] || \
            die "$R has no $CLUSTER2_STAMP (half-built) but processes run in it: run cluster/cluster2/down.sh first"
        unmount_all
        [[ -z $(mounts_below) ]] || die "$R is half-built and has mounts below it ($(mounts_below | tr '\n' ' ')); unmount them first"
        log "removing the half-built root $R (it has no $CLUSTER2_STAMP)"
        rm -rf --one-file-system "$R"
    fi
    log "building the Debian $CLUSTER2_SUITE root in $R from $CLUSTER2_MIRROR (debootstrap --variant=minbase; log: $BUILD_LOG)"
    mkdir -p "$(dirname "$R")"
    if ! debootstrap --variant=minbase "$CLUSTER2_SUITE" "$R" "$CLUSTER2_MIRROR" >"$BUILD_LOG" 2>&1; then
        tail -n 15 "$BUILD_LOG" >&2
        die "debootstrap of $CLUSTER2_SUITE into $R failed (see $BUILD_LOG): is $CLUSTER2_MIRROR reachable?"
    fi
    printf '#!/bin/sh\n# apt must not start daemons in this root: cluster/cluster2/up.sh starts them\nexit 101\n' \
        >"$R/usr/sbin/policy-rc.d"
    chmod 755 "$R/usr/sbin/policy-rc.d"
    log "debootstrap done ($(du -sm --one-file-system "$R" | cut -f1) MB)"
fi
mount_all

missing=()
for p in "${CLUSTER2_PACKAGES[@]}"; do
    [[ $("${CHROOT[@]}" dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) == installed ]] || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing in the root: ${missing[*]}"
    {
        "${CHROOT[@]}" apt-get update -q &&
        "${CHROOT[@]}" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
    } >>"$BUILD_LOG" 2>&1 || { tail -n 15 "$BUILD_LOG" >&2; die "apt-get install in $R failed (see $BUILD_LOG)"; }
    "${CHROOT[@]}" apt-get clean
    log "installed $("${CHROOT[@]}" dpkg-query -W -f='${Version}' slurmctld | sed 's/^/slurmctld /') and the rest"
fi
# the host's packages at the host's versions (CLUSTER2_HOST_PACKAGES in lib.sh says why), by the host's apt
host_debs=()
for p in "${CLUSTER2_HOST_PACKAGES[@]}"; do
    host_pkg_missing "$p" && die "$p is not installed on the host: run cluster/up.sh first (cluster2 takes the host's)"
    v=$(dpkg-query -W -f='${Version}' "$p")
    [[ $("${CHROOT[@]}" dpkg-query -W -f='${db:Status-Status} ${Version}' "$p" 2>/dev/null) == "installed $v" ]] || \
        host_debs+=("$p=$v")
done
if ((${#host_debs[@]})); then
    log "installing the host's ${host_debs[*]} in the root"
    debs=$(mktemp -d "$R/tmp/host-debs.XXXXXX")
    chmod 755 "$debs"
    download() { (cd "$debs" && host_apt download "${host_debs[@]}"); }
    { download || { host_apt update -qq && download; }; } >>"$BUILD_LOG" 2>&1 || {
        rm -rf "$debs"; tail -n 15 "$BUILD_LOG" >&2; die "apt-get download ${host_debs[*]} on the host failed (see $BUILD_LOG)"
    }
    files=("$debs"/*.deb)
    {
        "${CHROOT[@]}" apt-get update -q &&
        "${CHROOT[@]}" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends \
            --allow-downgrades "${files[@]#"$R"}" &&
        "${CHROOT[@]}" apt-mark hold "${CLUSTER2_HOST_PACKAGES[@]}"
    } >>"$BUILD_LOG" 2>&1 || {
        rm -rf "$debs"; tail -n 15 "$BUILD_LOG" >&2; die "installing ${host_debs[*]} in $R failed (see $BUILD_LOG)"
    }
    rm -rf "$debs"
    "${CHROOT[@]}" apt-get clean
    log "installed $("${CHROOT[@]}" dpkg-query -W -f='charliecloud-runtime ${Version}' charliecloud-runtime) (the host's) in the root"
fi
if [[ ! -f $R$CLUSTER2_STAMP ]]; then
    printf 'Debian %s root for cluster2, built by cluster/cluster2/up.sh on %s from %s\npackages: %s\n' \
        "$CLUSTER2_SUITE" "$(date -u +%FT%TZ)" "$CLUSTER2_MIRROR" "${CLUSTER2_PACKAGES[*]} ${CLUSTER2_HOST_PACKAGES[*]}" >"$R$CLUSTER2_STAMP"
    BUILD_S=$(( ($(date +%s%N) - build_t0) / 1000000 ))
    BUILD_S=$(awk -v ms="$BUILD_S" 'BEGIN {printf "%.0f", ms / 1000}')
    log "root $R built in $BUILD_S s ($(du -sm --one-file-system "$R" | cut -f1) MB)"
else
    log "root $R present ($(head -n1 "$R$CLUSTER2_STAMP" | sed 's/.* on \([^ ]*\) from.*/built \1/'))"
fi
up_t0=$(date +%s%N)

# minbase has no /etc/hosts: the daemons find their address (127.0.0.1) from the host name
hosts=$(printf '127.0.0.1 localhost\n127.0.0.1 %s\n::1 localhost ip6-localhost ip6-loopback\n' "$CONTROLLER_HOST")
if [[ ! -f $R/etc/hosts ]] || [[ $(<"$R/etc/hosts") != "$hosts" ]]; then
    printf '%s\n' "$hosts" >"$R/etc/hosts"
    log "wrote $R/etc/hosts"
fi
install -d -m 755 "$R$C2_LOG_DIR" "$R/run/slurm" "$R/run/sshd" "$R/var/lib/slurm/slurmctld"
for node in "${CLUSTER2_NODES[@]}"; do install -d -m 755 "$R/var/lib/slurm/slurmd/$node"; done
slurm_ids=$(ids_in_root slurm)
chown "$slurm_ids" "$R$C2_LOG_DIR" "$R/run/slurm" "$R/var/lib/slurm" "$R/var/lib/slurm/slurmctld"

# ---------------------------------------------------------------------------------------------------------------
# 2. Unix users and groups: the same names, uids and gids as on the host, homes inside the root
# ---------------------------------------------------------------------------------------------------------------
# ensure_group NAME GID / ensure_user NAME: make them in the root as the host has them; a clash is an error
ensure_group() {
    local name=$1 gid=$2 have
    have=$(awk -F: -v n="$name" '$1 == n {print $3; exit}' "$R/etc/group")
    if [[ -z $have ]]; then
        ! awk -F: -v g="$gid" '$3 == g {found = 1} END {exit !found}' "$R/etc/group" || \
            die "gid $gid (group $name on the host) is taken by another group in $R/etc/group"
        "${CHROOT[@]}" groupadd -g "$gid" "$name"
        log "created group $name (gid $gid) in the root"
    elif [[ $have != "$gid" ]]; then
        die "group $name has gid $have in the root but $gid on the host: remove the root (cluster/cluster2/down.sh, then rm -rf --one-file-system $R) and run again"
    fi
}
ensure_user() {
    local name=$1 uid gid group home mode have
    uid=$(id -u "$name") gid=$(id -g "$name") group=$(id -gn "$name")
    ensure_group "$group" "$gid"
    have=$(awk -F: -v n="$name" '$1 == n {print $3 ":" $4; exit}' "$R/etc/passwd")
    if [[ -z $have ]]; then
        ! awk -F: -v u="$uid" '$3 == u {found = 1} END {exit !found}' "$R/etc/passwd" || \
            die "uid $uid ($name on the host) is taken by another user in $R/etc/passwd"
        "${CHROOT[@]}" useradd -u "$uid" -g "$gid" -d "/home/$name" -M -s /bin/bash "$name"
        log "created user $name (uid $uid) in the root"
    elif [[ $have != "$uid:$gid" ]]; then
        die "user $name has uid:gid $have in the root but $uid:$gid on the host: remove the root (cluster/cluster2/down.sh, then rm -rf --one-file-system $R) and run again"
    fi
    mode=$(stat -c %a "$(getent passwd "$name" | cut -d: -f6)" 2>/dev/null || echo 755)
    home=$R/home/$name
    if [[ ! -d $home ]] || [[ $(stat -c '%u:%g %a' "$home") != "$uid:$gid $mode" ]]; then
        install -d -m "$mode" -o "$uid" -g "$gid" "$home"
        log "made $name's home $home"
    fi
}
getent group "$SLURM_GROUP" >/dev/null || die "group $SLURM_GROUP is missing on the host: run cluster/up.sh first"
for u in $DEMO_USERS $NEWCOMER_USER $OUTSIDER_USER $PORTAL_USER; do
    getent passwd "$u" >/dev/null || die "user $u is missing on the host: run cluster/up.sh first (cluster2 mirrors the host's users)"
    ensure_user "$u"
done
ensure_group "$SLURM_GROUP" "$(getent group "$SLURM_GROUP" | cut -d: -f3)"
members=$(getent group "$SLURM_GROUP" | cut -d: -f4)
if [[ $(awk -F: -v n="$SLURM_GROUP" '$1 == n {print $4; exit}' "$R/etc/group") != "$members" ]]; then
    "${CHROOT[@]}" gpasswd -M "$members" "$SLURM_GROUP" >/dev/null
    log "members of $SLURM_GROUP in the root: $members"
fi
# sshd with UsePAM refuses locked accounts even for keys: '*' = no password can match, but not locked
if [[ $(awk -F: -v n="$PORTAL_USER" '$1 == n {print $2; exit}' "$R/etc/shadow") != '*' ]]; then
    "${CHROOT[@]}" usermod -p '*' "$PORTAL_USER"
fi

# ---------------------------------------------------------------------------------------------------------------
# 3. munged (its own key and socket), the accounting database, slurmdbd
# ---------------------------------------------------------------------------------------------------------------
munge_ids=$(ids_in_root munge)
if [[ ! -s $R/etc/munge/munge.key ]]; then
    "${CHROOT[@]}" runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key
    log "created cluster2's munge key"
fi
chown "$munge_ids" "$R/etc/munge/munge.key"
chmod 600 "$R/etc/munge/munge.key"
munge_ok() { "${CHROOT[@]}" sh -c "munge -n -S $C2_MUNGE_SOCKET | unmunge -S $C2_MUNGE_SOCKET"; }
if running_in_root "$C2_MUNGED_PID" munged; then
    log "munged running"
else
    install -d -m 755 "$R$(dirname "$C2_MUNGE_SOCKET")"
    chown "$munge_ids" "$R$(dirname "$C2_MUNGE_SOCKET")"
    start_in_root munged runuser -u munge -- /usr/sbin/munged "--socket=$C2_MUNGE_SOCKET" "--pid-file=$C2_MUNGED_PID"
    wait_for 10 munged munge_ok || die "cluster2's munged does not answer (see $R/var/log/munge/munged.log)"
    log "munged started (socket $C2_MUNGE_SOCKET)"
fi

mysqladmin --protocol=socket ping >/dev/null 2>&1 || \
    die "MariaDB is not running on the host: cluster/up.sh starts it (cluster2's slurmdbd keeps its database there)"
DB_PASSWORD=
if [[ -f $R/etc/slurm/slurmdbd.conf ]]; then
    DB_PASSWORD=$(sed -n 's/^StoragePass=//p' "$R/etc/slurm/slurmdbd.conf" | head -n1)
fi
if [[ -z $DB_PASSWORD || $DB_PASSWORD == *[!A-Za-z0-9]* ]]; then
    DB_PASSWORD=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
fi
# via stdin, so the password never shows in the process list; ALTER keeps DB and file in step. slurmdbd in the
# root reaches MariaDB over TCP (127.0.0.1), which MariaDB may name 'localhost' or '127.0.0.1': both get the user.
mysql <<SQL
CREATE DATABASE IF NOT EXISTS \`$CLUSTER2_DB_NAME\`;
CREATE USER IF NOT EXISTS '$CLUSTER2_DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASSWORD';
ALTER USER '$CLUSTER2_DB_USER'@'127.0.0.1' IDENTIFIED BY '$DB_PASSWORD';
CREATE USER IF NOT EXISTS '$CLUSTER2_DB_USER'@'localhost' IDENTIFIED BY '$DB_PASSWORD';
ALTER USER '$CLUSTER2_DB_USER'@'localhost' IDENTIFIED BY '$DB_PASSWORD';
GRANT ALL ON \`$CLUSTER2_DB_NAME\`.* TO '$CLUSTER2_DB_USER'@'127.0.0.1';
GRANT ALL ON \`$CLUSTER2_DB_NAME\`.* TO '$CLUSTER2_DB_USER'@'localhost';
SQL

render "$CLUSTER2_TEMPLATES/slurmdbd.conf" /etc/slurm/slurmdbd.conf 600 slurm
dbd_conf_changed=$RENDER_CHANGED

# ---------------------------------------------------------------------------------------------------------------
# 4. slurm.conf, gres.conf, cgroup.conf, fake GPU devices (the root's /dev is the host's)
# ---------------------------------------------------------------------------------------------------------------
conf_before=$(cat "$R/etc/slurm/slurm.conf" 2>/dev/null || true)
render "$CLUSTER2_TEMPLATES/slurm.conf" /etc/slurm/slurm.conf 644 root
slurm_conf_changed=$RENDER_CHANGED
# only PartitionName lines (or comments) changed: 'scontrol reconfigure' applies it, no daemon restart
partitions_only=0
(( slurm_conf_changed )) && [[ -n $conf_before ]] && partition_change_only "$conf_before" "$R/etc/slurm/slurm.conf" \
    && partitions_only=1
render "$CLUSTER2_TEMPLATES/gres.conf" /etc/slurm/gres.conf 644 root
(( RENDER_CHANGED )) && slurm_conf_changed=1 partitions_only=0
render "$CLUSTER2_TEMPLATES/cgroup.conf" /etc/slurm/cgroup.conf 644 root
(( RENDER_CHANGED )) && slurm_conf_changed=1 partitions_only=0
# GPU job mapping (dcgm-exporter's hpc_job label): the host cluster's prolog/epilog, settings and load command
mkdir -p "$R/etc/slurm/prolog.d" "$R/etc/slurm/epilog.d"
render "$TEMPLATE_DIR/prolog.d/gpu-job-map.sh" /etc/slurm/prolog.d/gpu-job-map.sh 755 root
render "$TEMPLATE_DIR/epilog.d/gpu-job-map.sh" /etc/slurm/epilog.d/gpu-job-map.sh 755 root
render "$TEMPLATE_DIR/gpu-job-map.conf" /etc/slurm/gpu-job-map.conf 644 root
render "$TEMPLATE_DIR/gpuportal-fake-gpu-load" /usr/local/bin/gpuportal-fake-gpu-load 755 root
for n in "${CLUSTER2_GPU_MINORS[@]}"; do
    dev=/dev/fakegpu$n
    if [[ ! -c $dev ]] || [[ $(stat -c '%t:%T %a' "$dev") != "c3:$(printf '%x' "$n") 666" ]]; then
        rm -f "$dev"
        mknod -m 666 "$dev" c 195 "$n"
        log "created $dev"
    fi
done

if running_in_root "$C2_SLURMDBD_PID" slurmdbd && (( dbd_conf_changed )); then
    log "slurmdbd.conf changed: restarting slurmdbd"
    stop_in_root "slurmdbd|$C2_SLURMDBD_PID|slurmdbd"
fi
dbd_up() { "${CHROOT[@]}" sacctmgr -nP show cluster format=cluster; }
if running_in_root "$C2_SLURMDBD_PID" slurmdbd; then
    log "slurmdbd running"
else
    start_in_root slurmdbd /usr/sbin/slurmdbd
    # the very first start creates the database, then retries its connection after 5 s
    wait_for 60 slurmdbd dbd_up || die "cluster2's slurmdbd does not answer (see $R$C2_LOG_DIR/slurmdbd.log)"
    log "slurmdbd started (database $CLUSTER2_DB_NAME, port $CLUSTER2_DBD_PORT)"
fi

# ---------------------------------------------------------------------------------------------------------------
# 5. accounting records (the demo teams as on the host cluster), slurmctld, slurmd x2
# ---------------------------------------------------------------------------------------------------------------
sacctmgr2() { "${CHROOT[@]}" sacctmgr "$@"; }
if ! sacctmgr2 -nP show cluster format=cluster | grep -qx "$CLUSTER2_NAME"; then
    sacctmgr2 -i add cluster "$CLUSTER2_NAME" >/dev/null
    log "sacctmgr: added cluster $CLUSTER2_NAME"
fi
declare -A ACCOUNT_DESC=([vision]="Computer vision team" [nlp]="Language team")
declare -A USER_ACCOUNT=([alice]=vision [carol]=vision [bob]=nlp [dana]=nlp)
accounts=$(sacctmgr2 -nP show account format=account)
for a in vision nlp; do
    if ! grep -qx "$a" <<<"$accounts"; then
        sacctmgr2 -i add account "$a" Cluster="$CLUSTER2_NAME" Description="${ACCOUNT_DESC[$a]}" Organization="$a" >/dev/null
        log "sacctmgr: added account $a"
    fi
done
assocs=$(sacctmgr2 -nP show assoc where cluster="$CLUSTER2_NAME" format=account,user)
defaults=$(sacctmgr2 -nP show user format=user,defaultaccount)
for u in alice carol bob dana; do
    a=${USER_ACCOUNT[$u]}
    if ! grep -qx "$a|$u" <<<"$assocs"; then
        sacctmgr2 -i add user "$u" Cluster="$CLUSTER2_NAME" Account="$a" DefaultAccount="$a" >/dev/null
        log "sacctmgr: added user $u to $a"
    elif ! grep -qx "$u|$a" <<<"$defaults"; then
        sacctmgr2 -i modify user where name="$u" set DefaultAccount="$a" >/dev/null
        log "sacctmgr: default account of $u set to $a"
    fi
done
# The portal's service user is a Slurm administrator, as on the host cluster: the teams sync runs sacctmgr and the
# cluster page scontrol (drain, resume, maintenance reservations: docs/cluster-page.md) as
# itself (no sudo). Its association is in root, which the sync never touches.
portal_admin=$(sacctmgr2 -nP show user "$PORTAL_USER" format=user,adminlevel)
if [[ -z $portal_admin ]]; then
    sacctmgr2 -i add user "$PORTAL_USER" Cluster="$CLUSTER2_NAME" Account=root DefaultAccount=root \
        AdminLevel=Administrator >/dev/null
    log "sacctmgr: added $PORTAL_USER as a Slurm administrator"
elif [[ $portal_admin != "$PORTAL_USER|Administrator" ]]; then
    sacctmgr2 -i modify user where name="$PORTAL_USER" set AdminLevel=Administrator >/dev/null
    log "sacctmgr: $PORTAL_USER made a Slurm administrator"
fi

# the small-job pool's partition QOS, before slurmctld reads slurm.conf (as on the host cluster)
ensure_pool_qos sacctmgr2
if (( slurm_conf_changed && partitions_only )) && running_in_root "$C2_SLURMCTLD_PID" slurmctld; then
    "${CHROOT[@]}" scontrol reconfigure
    log "slurm.conf: partitions changed: scontrol reconfigure"
    slurm_conf_changed=0
fi
if (( slurm_conf_changed )) && running_in_root "$C2_SLURMCTLD_PID" slurmctld; then
    # node definitions and ports cannot change by 'scontrol reconfigure': restart controller and nodes
    log "slurm.conf/gres.conf/cgroup.conf changed: restarting slurmctld and slurmd"
    specs=()
    for node in "${CLUSTER2_NODES[@]}"; do specs+=("slurmd $node|/run/slurm/slurmd-$node.pid|slurmd"); done
    stop_in_root "${specs[@]}"
    stop_in_root "slurmctld|$C2_SLURMCTLD_PID|slurmctld"
fi
ctld_up() { "${CHROOT[@]}" scontrol ping | grep -q 'is UP'; }
if running_in_root "$C2_SLURMCTLD_PID" slurmctld; then
    log "slurmctld running"
else
    start_in_root slurmctld /usr/sbin/slurmctld
    wait_for 30 slurmctld ctld_up || die "cluster2's slurmctld does not answer (see $R$C2_LOG_DIR/slurmctld.log)"
    log "slurmctld started (port $CLUSTER2_CTLD_PORT)"
fi
declare -A SLURMD_STARTED_AT=()
for node in "${CLUSTER2_NODES[@]}"; do
    if slurmd_pid=$(pid_in_root "/run/slurm/slurmd-$node.pid" slurmd) && [[ $(root_of "$slurmd_pid") == "$R" ]]; then
        # started chrooted by an up.sh before start_pivoted: its jobs cannot start containers. Stopped and started
        # pivoted (slurmd's restart leaves running jobs alone: their slurmstepd go on).
        log "slurmd $node runs chrooted (an older up.sh started it): restarting it pivoted into the root"
        stop_in_root "slurmd $node|/run/slurm/slurmd-$node.pid|slurmd"
    fi
    if running_in_root "/run/slurm/slurmd-$node.pid" slurmd; then
        log "slurmd $node running"
    else
        SLURMD_STARTED_AT[$node]=$(date +%s)
        start_pivoted "slurmd-$node" /usr/sbin/slurmd -N "$node"
        log "slurmd $node started (in a mount namespace pivoted into the root)"
    fi
done

# Wait until every node is usable; a node left down/drained by an earlier run is resumed. For a slurmd started
# by this run, wait until it has registered (its SlurmdStartTime is not older than our start).
nodes_ready() {
    local out name state started bad=0
    out=$("${CHROOT[@]}" sinfo -h -N -o '%N %T') || return 1
    for name in "${CLUSTER2_NODES[@]}"; do
        if [[ -n ${SLURMD_STARTED_AT[$name]:-} ]]; then
            started=$("${CHROOT[@]}" scontrol -o show node "$name" | grep -o 'SlurmdStartTime=[^ ]*' | cut -d= -f2)
            if [[ -z $started || $started == None ]] || \
               (( $(date -d "$started" +%s) < SLURMD_STARTED_AT[$name] )); then
                bad=1
                continue
            fi
        fi
        state=$(awk -v n="$name" '$1 == n {print $2; exit}' <<<"$out")
        case $state in
            idle|mixed|allocated|completing|planned|mixed+planned|idle+planned) ;;
            down|drained|draining|drain|fail|failing)
                log "resuming $name (was $state)" >&3
                "${CHROOT[@]}" scontrol update nodename="$name" state=resume >/dev/null 2>&1 || true
                bad=1 ;;
            *) bad=1 ;;
        esac
    done
    return "$bad"
}
if ! wait_for "$NODE_WAIT_S" "cluster2's nodes to become idle" nodes_ready; then
    "${CHROOT[@]}" sinfo -N -l >&2 || true
    die "cluster2's nodes not ready after ${NODE_WAIT_S}s (see $R$C2_LOG_DIR/slurmd-g*.log)"
fi
log "nodes ready: $("${CHROOT[@]}" sinfo -h -N -o '%N:%T' | sort -u | tr '\n' ' ')"
ensure_pool_qos_gpu_limit sacctmgr2   # the pool QOS's GPU limit, now that slurmctld has registered gres/gpu

# ---------------------------------------------------------------------------------------------------------------
# 5b. the stand-in GPU exporters (cluster/fake_dcgm_exporter.py), on the host as nobody, one per node on
#     127.0.0.1:EXPORTER_PORT, each reading its node's mapping directory inside the root ($R/run/dcgm-job-map/<node>)
# ---------------------------------------------------------------------------------------------------------------
EXPORTER=$CLUSTER_DIR/fake_dcgm_exporter.py
exporter_sum=$(cat "$EXPORTER" "$R/etc/slurm/gres.conf" | sha256sum | cut -d' ' -f1)
exporter_up() { curl -fsS -o /dev/null "http://127.0.0.1:$1/metrics"; }
# in_background CMD... &: like detached, but CMD replaces the background shell itself, so $! is its pid
in_background() {
    local fd
    for fd in /proc/$BASHPID/fd/*; do
        fd=${fd##*/}
        if (( fd > 2 )); then eval "exec $fd>&-"; fi
    done
    exec "$@" </dev/null
}
mkdir -p "$STATE_DIR"
for node in "${CLUSTER2_NODES[@]}"; do
    install -d -m 755 "$R$GPU_JOB_MAP_ROOT" "$R$GPU_JOB_MAP_ROOT/$node" "$R$FAKE_GPU_LOAD_ROOT" "$R$FAKE_GPU_LOAD_ROOT/$node"
    pidfile=/run/fake-dcgm-exporter-cluster2-$node.pid
    port=${EXPORTER_PORT[$node]}
    if exporter_pid "$pidfile" "$node" >/dev/null; then
        [[ $(cat "$STATE_DIR/fake-dcgm-exporter-cluster2-$node.sum" 2>/dev/null) == "$exporter_sum" ]] && \
            { log "GPU exporter $node running on 127.0.0.1:$port"; continue; }
        log "GPU exporter $node: script or gres.conf changed, restarting"
        kill -TERM "$(exporter_pid "$pidfile" "$node")" 2>/dev/null || true
        wait_for 10 "exporter $node to stop" bash -c "! ss -Hltn 'sport = :$port' | grep -q ." || true
    fi
    in_background setsid setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 "$EXPORTER" \
        --node "$node" --port "$port" --gres-conf "$R/etc/slurm/gres.conf" --job-map-dir "$R$GPU_JOB_MAP_ROOT/$node" \
        --load-dir "$R$FAKE_GPU_LOAD_ROOT/$node" >>"$LOG_DIR/fake-dcgm-exporter-cluster2-$node.log" 2>&1 &
    echo $! >"$pidfile"
    echo "$exporter_sum" >"$STATE_DIR/fake-dcgm-exporter-cluster2-$node.sum"
    wait_for 10 "GPU exporter $node" exporter_up "$port" || \
        die "GPU exporter $node does not answer (see $LOG_DIR/fake-dcgm-exporter-cluster2-$node.log)"
    log "GPU exporter $node started on 127.0.0.1:$port (stand-in for dcgm-exporter)"
done

# ---------------------------------------------------------------------------------------------------------------
# 6. sshd in the root for the portal (127.0.0.1:2223), the same client key, its host key pinned in known_hosts
# ---------------------------------------------------------------------------------------------------------------
SSH_DIR=$PORTAL_VAR_DIR/ssh
KEY=$SSH_DIR/portal_ed25519
[[ -s $KEY.pub ]] || die "no portal key at $KEY.pub: run cluster/up.sh first (it makes the key cluster2 also uses)"
[[ -s $R/etc/ssh/ssh_host_ed25519_key ]] || { "${CHROOT[@]}" ssh-keygen -A >/dev/null; log "generated the root's ssh host keys"; }
PORTAL_SSH_PORT=$CLUSTER2_SSH_PORT PORTAL_SSH_ADDR=$CLUSTER2_SSH_ADDR RENDER_CHECK=check_sshd_config \
    render "$TEMPLATE_DIR/sshd_config_portal" "$C2_SSHD_CONF" 644 root
sshd_conf_changed=$RENDER_CHANGED
sshd_listening() { ss -Hltn "sport = :$CLUSTER2_SSH_PORT" | grep -q .; }
if sshd_pid=$(pid_in_root "$C2_SSHD_PID" sshd); then
    if (( sshd_conf_changed )); then
        kill -HUP "$sshd_pid"      # sshd re-executes itself with the new config
        sleep 0.5
        log "portal sshd reloaded"
    else
        log "portal sshd running on $CLUSTER2_SSH_ADDR:$CLUSTER2_SSH_PORT"
    fi
else
    if sshd_listening; then
        die "port $CLUSTER2_SSH_PORT is taken by another program ($(ss -Hltnp "sport = :$CLUSTER2_SSH_PORT" | grep -o 'users:.*')): set CLUSTER2_SSH_PORT"
    fi
    start_in_root sshd-portal /usr/sbin/sshd -f "$C2_SSHD_CONF" -E "$C2_LOG_DIR/sshd-portal.log"
    wait_for 10 "cluster2's portal sshd" sshd_listening || die "cluster2's portal sshd not listening (see $R$C2_LOG_DIR/sshd-portal.log)"
    log "portal sshd started on $CLUSTER2_SSH_ADDR:$CLUSTER2_SSH_PORT"
fi

portal_ids="$(id -u "$PORTAL_USER"):$(id -g "$PORTAL_USER")"
install -d -m 700 -o "${portal_ids%:*}" -g "${portal_ids#*:}" "$R/home/$PORTAL_USER/.ssh"
auth=$R/home/$PORTAL_USER/.ssh/authorized_keys
pub=$(awk '{print $1, $2}' "$KEY.pub")
if ! { [[ -f $auth ]] && grep -qF "$pub" "$auth"; }; then
    cat "$KEY.pub" >>"$auth"
    log "installed the portal key in $auth"
fi
chown "$portal_ids" "$auth"
chmod 600 "$auth"

# known_hosts: the root's own host key file, no trust-on-first-use; the host cluster's line stays as it is
host_pattern="[$CLUSTER2_SSH_ADDR]:$CLUSTER2_SSH_PORT"
known="$host_pattern $(awk '{print $1, $2}' "$R/etc/ssh/ssh_host_ed25519_key.pub")"
kh=$SSH_DIR/known_hosts
others=$(awk -v p="$host_pattern" '$1 != p' "$kh" 2>/dev/null || true)
want=$(printf '%s\n%s\n' "$others" "$known" | sed '/^$/d')
if [[ ! -f $kh ]] || [[ $(<"$kh") != "$want" ]]; then
    printf '%s\n' "$want" >"$kh"
    chmod 644 "$kh"
    chown "$PORTAL_KEY_OWNER:" "$kh"
    log "pinned cluster2's host key in $kh ($host_pattern)"
fi

# ---------------------------------------------------------------------------------------------------------------
# 7. sudoers and the submit helper: the host cluster's templates (cluster/etc/sudoers-portal, gpuportal-sbatch),
#    at the same paths inside the root; each command they name must exist there
# ---------------------------------------------------------------------------------------------------------------
install -d -m 755 "$R$(dirname "$SBATCH_HELPER")"
render "$TEMPLATE_DIR/gpuportal-sbatch" "$SBATCH_HELPER" 755 root
RENDER_CHECK=check_sudoers render "$TEMPLATE_DIR/sudoers-portal" /etc/sudoers.d/portal 440 root
for cmd in $(grep '^Cmnd_Alias' "$R/etc/sudoers.d/portal" | grep -o '/[^ ,]*') /usr/bin/mkdir /usr/bin/sbatch; do
    [[ -x $R$cmd ]] || die "the sudoers rule or submit helper names $cmd, which the root does not have"
done

# ---------------------------------------------------------------------------------------------------------------
# 8. job environments: the same layout as on the host, inside the root (a cluster of its own has its own
#    storage): uv at /opt/gpuportal/tools/bin/uv, the cache /srv/gpuportal/envs with one area per user
# ---------------------------------------------------------------------------------------------------------------
TOOLS_DIR=/opt/gpuportal/tools
host_uv=$("$TOOLS_DIR/bin/uv" --version 2>/dev/null | awk '{print $2}' || true)
[[ -n $host_uv ]] || die "uv is not installed at $TOOLS_DIR/bin/uv on the host: run cluster/up.sh first (cluster2 copies it)"
if [[ $("${CHROOT[@]}" "$TOOLS_DIR/bin/uv" --version 2>/dev/null | awk '{print $2}' || true) != "$host_uv" ]]; then
    rm -rf "$R$TOOLS_DIR"
    mkdir -p "$(dirname "$R$TOOLS_DIR")"
    cp -a "$TOOLS_DIR" "$R$TOOLS_DIR"
    log "installed uv $host_uv in $R$TOOLS_DIR"
fi
PORTAL_ENV_CACHE_DIR=$R/srv/gpuportal/envs SLURM_GROUP=$SLURM_GROUP LOG_TAG=$LOG_TAG bash "$CLUSTER_DIR/env_cache.sh"
for u in $DEMO_USERS; do
    uid=$(id -u "$u") gid=$(id -g "$u")
    home=$R/home/$u
    dest=$home/gpuportal-examples/digits/train_digits.py
    if [[ ! -f $dest ]] || ! cmp -s "$REPO_DIR/examples/train_digits.py" "$dest"; then
        install -d -o "$uid" -g "$gid" -m 755 "$home/gpuportal-examples" "$home/gpuportal-examples/digits"
        install -o "$uid" -g "$gid" -m 644 "$REPO_DIR/examples/train_digits.py" "$dest"
    fi
done

# ---------------------------------------------------------------------------------------------------------------
# 9. summary
# ---------------------------------------------------------------------------------------------------------------
echo
echo "Slurm cluster '$CLUSTER2_NAME' is up (Slurm $("${CHROOT[@]}" sinfo -V | awk '{print $2}') in the Debian $CLUSTER2_SUITE root $R)"
echo "  nodes:"
"${CHROOT[@]}" sinfo -h -N -o '    %N %T cpus=%c mem=%m gres=%G' | sort -u
echo "  partitions:"
"${CHROOT[@]}" sinfo -h -o '    %P nodes=%N timelimit=%l'
echo "  accounts:"
sacctmgr2 -nP show assoc where cluster="$CLUSTER2_NAME" format=account,user | awk -F'|' '
    $2 != "" && $1 != "root" {u[$1] = u[$1] " " $2} END {for (a in u) print "    " a ":" u[a]}' | sort
echo "  ports:        slurmctld $CLUSTER2_CTLD_PORT, slurmdbd $CLUSTER2_DBD_PORT, slurmd g1 $CLUSTER2_NODE1_PORT g2 $CLUSTER2_NODE2_PORT, srun $CLUSTER2_SRUN_PORTS (127.0.0.1)"
echo "  portal sshd:  $PORTAL_USER@$CLUSTER2_SSH_ADDR:$CLUSTER2_SSH_PORT (config $R$C2_SSHD_CONF; key $KEY; pinned in $kh)"
echo "  commands:     chroot $R squeue --json   (plain 'squeue' is the host cluster's)"
echo "  GPU metrics:  stand-in dcgm-exporters $(for n in "${CLUSTER2_NODES[@]}"; do printf '%s=127.0.0.1:%s ' "$n" "${EXPORTER_PORT[$n]}"; done)(job mapping $R$GPU_JOB_MAP_ROOT/<node>)"
echo "  logs:         $R$C2_LOG_DIR/"
up_s=$(awk -v ms="$(( ($(date +%s%N) - up_t0) / 1000000 ))" 'BEGIN {printf "%.1f", ms / 1000}')
if [[ -n $BUILD_S ]]; then
    echo "cluster2 up in $up_s s (built the root in $BUILD_S s; $(elapsed) s in all)"
else
    echo "cluster2 up in $up_s s (root already built)"
fi
