#!/usr/bin/env bash
# Bring up a small but real Slurm cluster on this one machine (Debian 12, run as root, no systemd needed):
# munged, MariaDB + slurmdbd, slurmctld, three slurmd (node1, node2, node3) with fake GPUs, and a second sshd
# on 127.0.0.1:2222 through which the portal's service user submits jobs as the researcher with sudo.
# Idempotent: every step checks first; a second run only verifies and takes a second or two.
# Settings (environment overrides): see cluster/lib.sh. Stop it all with cluster/down.sh.
set -euo pipefail
LOG_TAG=up
# shellcheck source=cluster/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
shopt -u patsub_replacement 2>/dev/null || true   # '&' in ${var//x/y} replacements stays literal

[[ $(id -u) -eq 0 ]] || die "run as root"
mkdir -p "$STATE_DIR"
exec 3>&1   # lets functions polled by wait_for (whose output is discarded) still log

# render TEMPLATE DEST MODE OWNER: fill @NAME@ placeholders from shell variables, install DEST only if the
# content differs. Sets RENDER_CHANGED=1 when DEST was (re)written. Pure bash: secrets never reach argv.
render() {
    local template=$1 dest=$2 mode=$3 owner=$4 text name
    text=$(<"$template")
    for name in CLUSTER_NAME CONTROLLER_HOST CONTROLLER_ADDR SLURMCTLD_PORT SLURMDBD_PORT NODE1_PORT NODE2_PORT \
                NODE3_PORT DB_PORT DB_NAME DB_PASSWORD PORTAL_SSH_PORT PORTAL_SSH_ADDR PORTAL_USER SLURM_GROUP SBATCH_HELPER; do
        text=${text//@$name@/${!name:-}}
    done
    [[ $text != *@[A-Z_]*@* ]] || die "unfilled placeholder in $template"
    RENDER_CHANGED=0
    if [[ -f $dest ]] && [[ $(<"$dest") == "$text" ]] && \
       [[ $(stat -c '%a %U' "$dest") == "$mode ${owner%%:*}" ]]; then
        return 0
    fi
    local tmp
    tmp=$(mktemp "$dest.XXXXXX")
    printf '%s\n' "$text" >"$tmp"
    chmod "$mode" "$tmp"
    chown "$owner" "$tmp"
    if [[ -n ${RENDER_CHECK:-} ]] && ! $RENDER_CHECK "$tmp"; then
        rm -f "$tmp"
        die "$dest: rendered file failed the check '$RENDER_CHECK'"
    fi
    mv -f "$tmp" "$dest"
    RENDER_CHANGED=1
    log "installed $dest"
}

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

# start_daemon NAME CMD...: start a self-daemonizing program; its early stderr goes to $LOG_DIR/NAME.start.log.
start_daemon() {
    local name=$1
    shift
    if ! detached "$@" >"$LOG_DIR/$name.start.log" 2>&1; then
        cat "$LOG_DIR/$name.start.log" >&2
        die "$name failed to start (see $LOG_DIR)"
    fi
    [[ -s $LOG_DIR/$name.start.log ]] || rm -f "$LOG_DIR/$name.start.log"
}

# ---------------------------------------------------------------------------------------------------------------
# 1. Debian packages (Debian's policy-rc.d keeps apt from starting daemons: we start them below)
# ---------------------------------------------------------------------------------------------------------------
# charliecloud-runtime: ch-run, the container runtime jobs in the site's images use on cluster1 (docs/containers.md;
# unprivileged user namespaces, no daemon, no setuid)
PACKAGES=(slurm-wlm slurmdbd munge mariadb-server openssh-server sudo python3-numpy python3-sklearn charliecloud-runtime)
missing=()
for p in "${PACKAGES[@]}"; do
    [[ $(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null) == installed ]] || missing+=("$p")
done
if ((${#missing[@]})); then
    log "installing ${missing[*]}"
    export DEBIAN_FRONTEND=noninteractive
    host_apt update -qq
    host_apt install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
    log "packages present"
fi

mkdir -p "$LOG_DIR" /var/spool/slurmctld /var/spool/slurmd
chown slurm:slurm "$LOG_DIR" /var/spool/slurmctld
chmod 755 "$LOG_DIR" /var/spool/slurmctld /var/spool/slurmd

# ---------------------------------------------------------------------------------------------------------------
# 2. Unix users and groups
# ---------------------------------------------------------------------------------------------------------------
in_group() { id -nG "$1" 2>/dev/null | tr ' ' '\n' | grep -qx "$2"; }
getent group "$SLURM_GROUP" >/dev/null || { groupadd "$SLURM_GROUP"; log "created group $SLURM_GROUP"; }
for u in $DEMO_USERS $NEWCOMER_USER; do
    if ! getent passwd "$u" >/dev/null; then
        useradd --create-home --shell /bin/bash --groups "$SLURM_GROUP" "$u"   # password stays locked
        log "created user $u"
    elif ! in_group "$u" "$SLURM_GROUP"; then
        usermod -aG "$SLURM_GROUP" "$u"
        log "added $u to $SLURM_GROUP"
    fi
done
for u in "$OUTSIDER_USER" "$PORTAL_USER"; do
    if ! getent passwd "$u" >/dev/null; then
        useradd --create-home --home-dir "/home/$u" --shell /bin/bash "$u"
        log "created user $u"
    fi
    if in_group "$u" "$SLURM_GROUP"; then
        gpasswd -d "$u" "$SLURM_GROUP" >/dev/null
        log "removed $u from $SLURM_GROUP"
    fi
done
# useradd leaves the password '!' (locked): sshd with UsePAM refuses locked accounts even for keys. '*' = no
# password can ever match, but the account is not locked.
if [[ $(getent shadow "$PORTAL_USER" | cut -d: -f2) != '*' ]]; then
    usermod -p '*' "$PORTAL_USER"
fi

# ---------------------------------------------------------------------------------------------------------------
# 3. munge, MariaDB, slurmdbd
# ---------------------------------------------------------------------------------------------------------------
if [[ ! -s /etc/munge/munge.key ]]; then
    runuser -u munge -- mungekey --create --keyfile=/etc/munge/munge.key
    log "created munge key"
fi
chown munge:munge /etc/munge/munge.key
chmod 600 /etc/munge/munge.key
if running "$MUNGED_PID" munged; then
    log "munged running"
else
    install -d -o munge -g munge -m 755 /run/munge
    start_daemon munged runuser -u munge -- /usr/sbin/munged
    # munged refuses a log file in a directory not owned by munge/root: it logs to /var/log/munge; link it
    [[ -e $LOG_DIR/munged.log ]] || ln -s /var/log/munge/munged.log "$LOG_DIR/munged.log"
    wait_for 10 munged bash -c 'munge -n | unmunge' || die "munged does not answer (see /var/log/munge/munged.log)"
    log "munged started"
fi

db_up() { mysqladmin --protocol=socket ping >/dev/null 2>&1; }
if db_up; then
    log "MariaDB running"
else
    install -d -o mysql -g mysql -m 755 /run/mysqld
    if [[ -x /etc/init.d/mariadb ]]; then
        detached /etc/init.d/mariadb start >"$LOG_DIR/mariadb.start.log" 2>&1 || true
    fi
    if ! db_up; then
        detached start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd -- --user=mysql \
            >>"$LOG_DIR/mariadb.start.log" 2>&1
    fi
    wait_for 60 MariaDB db_up || die "MariaDB does not answer"
    touch "$STATE_DIR/mariadb-started-by-up"   # down.sh stops MariaDB only when this file exists
    log "MariaDB started"
fi
# Tuning the Slurm docs ask for. innodb_lock_wait_timeout is dynamic and cheap: set it now. The two sizes need
# a restart (or a costly online resize): they go into a drop-in, read if my.cnf includes mariadb.conf.d.
if [[ $(mysql -Nse 'SELECT @@GLOBAL.innodb_lock_wait_timeout') -lt 900 ]]; then
    mysql -e 'SET GLOBAL innodb_lock_wait_timeout=900'
fi
if [[ -d /etc/mysql/mariadb.conf.d ]] && [[ ! -f /etc/mysql/mariadb.conf.d/60-slurmdbd.cnf ]]; then
    printf '[mysqld]\ninnodb_buffer_pool_size=1024M\ninnodb_log_file_size=64M\ninnodb_lock_wait_timeout=900\n' \
        >/etc/mysql/mariadb.conf.d/60-slurmdbd.cnf
    log "installed /etc/mysql/mariadb.conf.d/60-slurmdbd.cnf (applies on MariaDB's next start)"
fi

# The DB password is generated once and kept only in /etc/slurm/slurmdbd.conf (root/slurm-only, mode 600).
DB_PASSWORD=
if [[ -f $SLURM_ETC/slurmdbd.conf ]]; then
    DB_PASSWORD=$(sed -n 's/^StoragePass=//p' "$SLURM_ETC/slurmdbd.conf" | head -n1)
fi
if [[ -z $DB_PASSWORD || $DB_PASSWORD == *[!A-Za-z0-9]* ]]; then
    DB_PASSWORD=$(od -An -tx1 -N24 /dev/urandom | tr -d ' \n')
fi
# via stdin, so the password never shows in the process list; ALTER keeps DB and file in step
mysql <<SQL
CREATE DATABASE IF NOT EXISTS \`$DB_NAME\`;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY '$DB_PASSWORD';
ALTER USER 'slurm'@'localhost' IDENTIFIED BY '$DB_PASSWORD';
GRANT ALL ON \`$DB_NAME\`.* TO 'slurm'@'localhost';
SQL

# configs first: sacctmgr needs slurm.conf to find slurmdbd
render "$TEMPLATE_DIR/slurmdbd.conf" "$SLURM_ETC/slurmdbd.conf" 600 slurm:slurm
dbd_conf_changed=$RENDER_CHANGED

# ---------------------------------------------------------------------------------------------------------------
# 4. slurm.conf, gres.conf, fake GPU devices
# ---------------------------------------------------------------------------------------------------------------
conf_before=$(cat "$SLURM_ETC/slurm.conf" 2>/dev/null || true)
render "$TEMPLATE_DIR/slurm.conf" "$SLURM_ETC/slurm.conf" 644 root:root
slurm_conf_changed=$RENDER_CHANGED
# only PartitionName lines (or comments) changed: 'scontrol reconfigure' applies it, no daemon restart
partitions_only=0
(( slurm_conf_changed )) && [[ -n $conf_before ]] && partition_change_only "$conf_before" "$SLURM_ETC/slurm.conf" \
    && partitions_only=1
render "$TEMPLATE_DIR/gres.conf" "$SLURM_ETC/gres.conf" 644 root:root
(( RENDER_CHANGED )) && slurm_conf_changed=1 partitions_only=0
# GPU job mapping (dcgm-exporter's hpc_job label): the prolog/epilog, their settings and the stand-in's load command.
# slurmd runs them afresh for each job: a change needs no restart.
install -d -m 755 "$SLURM_ETC/prolog.d" "$SLURM_ETC/epilog.d"
render "$TEMPLATE_DIR/prolog.d/gpu-job-map.sh" "$SLURM_ETC/prolog.d/gpu-job-map.sh" 755 root:root
render "$TEMPLATE_DIR/epilog.d/gpu-job-map.sh" "$SLURM_ETC/epilog.d/gpu-job-map.sh" 755 root:root
render "$TEMPLATE_DIR/gpu-job-map.conf" "$SLURM_ETC/gpu-job-map.conf" 644 root:root
render "$TEMPLATE_DIR/gpuportal-fake-gpu-load" /usr/local/bin/gpuportal-fake-gpu-load 755 root:root
# Fake GPUs must be character devices (plain files are rejected and then no CUDA_VISIBLE_DEVICES is set).
for n in 0 1 2 3 4 5 6 7 8 9; do
    dev=/dev/fakegpu$n
    if [[ ! -c $dev ]] || [[ $(stat -c '%t:%T %a' "$dev") != "c3:$(printf '%x' "$n") 666" ]]; then
        rm -f "$dev"
        mknod -m 666 "$dev" c 195 "$n"
        log "created $dev"
    fi
done

# slurmdbd
if running "$SLURMDBD_PID" slurmdbd && (( dbd_conf_changed )); then
    log "slurmdbd.conf changed: restarting slurmdbd"
    stop_procs "slurmdbd|$SLURMDBD_PID|slurmdbd"
fi
dbd_up() { sacctmgr -nP show cluster format=cluster; }
if running "$SLURMDBD_PID" slurmdbd; then
    log "slurmdbd running"
else
    start_daemon slurmdbd /usr/sbin/slurmdbd
    wait_for 60 slurmdbd dbd_up || die "slurmdbd does not answer (see $LOG_DIR/slurmdbd.log)"
    log "slurmdbd started"
fi

# ---------------------------------------------------------------------------------------------------------------
# 5. accounting records, slurmctld, slurmd x3
# ---------------------------------------------------------------------------------------------------------------
clusters=$(sacctmgr -nP show cluster format=cluster)
if ! grep -qx "$CLUSTER_NAME" <<<"$clusters"; then
    sacctmgr -i add cluster "$CLUSTER_NAME" >/dev/null
    log "sacctmgr: added cluster $CLUSTER_NAME"
fi
declare -A ACCOUNT_DESC=([vision]="Computer vision team" [nlp]="Language team")
declare -A USER_ACCOUNT=([alice]=vision [carol]=vision [bob]=nlp [dana]=nlp)
accounts=$(sacctmgr -nP show account format=account)
for a in vision nlp; do
    if ! grep -qx "$a" <<<"$accounts"; then
        sacctmgr -i add account "$a" Cluster="$CLUSTER_NAME" Description="${ACCOUNT_DESC[$a]}" \
            Organization="$a" >/dev/null
        log "sacctmgr: added account $a"
    fi
done
assocs=$(sacctmgr -nP show assoc where cluster="$CLUSTER_NAME" format=account,user)
defaults=$(sacctmgr -nP show user format=user,defaultaccount)
for u in alice carol bob dana; do
    a=${USER_ACCOUNT[$u]}
    if ! grep -qx "$a|$u" <<<"$assocs"; then
        sacctmgr -i add user "$u" Cluster="$CLUSTER_NAME" Account="$a" DefaultAccount="$a" >/dev/null
        log "sacctmgr: added user $u to $a"
    elif ! grep -qx "$u|$a" <<<"$defaults"; then
        sacctmgr -i modify user where name="$u" set DefaultAccount="$a" >/dev/null
        log "sacctmgr: default account of $u set to $a"
    fi
done
# The portal's service user is a Slurm administrator: the cluster page drains/resumes nodes and makes maintenance
# reservations with scontrol as itself (docs/cluster-page.md), and teams.sync.associations runs sacctmgr as itself (no sudo) to add
# accounts, users and limits. Its association is in root, which the sync never touches.
portal_admin=$(sacctmgr -nP show user "$PORTAL_USER" format=user,adminlevel)
if [[ -z $portal_admin ]]; then
    sacctmgr -i add user "$PORTAL_USER" Cluster="$CLUSTER_NAME" Account=root DefaultAccount=root \
        AdminLevel=Administrator >/dev/null
    log "sacctmgr: added $PORTAL_USER as a Slurm administrator"
elif [[ $portal_admin != "$PORTAL_USER|Administrator" ]]; then
    sacctmgr -i modify user where name="$PORTAL_USER" set AdminLevel=Administrator >/dev/null
    log "sacctmgr: $PORTAL_USER made a Slurm administrator"
fi

# Slurm 22.05's sacct --json stops at a job whose QOS no longer exists (the record ends at "qos",
# sacct says "_parser_dump: failed on field qos" and exits 0): every later job of the period read is
# missing. A test fixture once deleted a QOS its jobs ran in, which left the lab's month unreadable; the
# lab's records of jobs in a QOS that is gone are moved to normal so that every read is whole. (The portal
# never deletes a QOS and refuses such a cut document; a site must not delete one either: docs/clusters.md.)
orphans=$(mysql -Nse "SELECT COUNT(*) FROM slurm_acct_db.${CLUSTER_NAME}_job_table j LEFT JOIN slurm_acct_db.qos_table q
    ON q.id = j.id_qos AND q.deleted = 0 WHERE j.id_qos <> 0 AND q.id IS NULL")
if (( orphans > 0 )); then
    mysql -e "UPDATE slurm_acct_db.${CLUSTER_NAME}_job_table j LEFT JOIN slurm_acct_db.qos_table q
        ON q.id = j.id_qos AND q.deleted = 0
        SET j.id_qos = (SELECT id FROM slurm_acct_db.qos_table WHERE name = 'normal' AND deleted = 0)
        WHERE j.id_qos <> 0 AND q.id IS NULL"
    log "accounting: $orphans job record(s) of a deleted QOS moved to normal (sacct --json stops at such a job)"
fi

# The small-job pool's partition QOS (PartitionName=small ... QOS=small) must exist before slurmctld reads
# slurm.conf. Its limits are the portal's (teams sync, PORTAL_SMALL_POOL_*): created here with the defaults.
ensure_pool_qos sacctmgr
if (( slurm_conf_changed && partitions_only )) && running "$SLURMCTLD_PID" slurmctld; then
    scontrol reconfigure
    log "slurm.conf: partitions changed: scontrol reconfigure"
    slurm_conf_changed=0
fi
if (( slurm_conf_changed )) && running "$SLURMCTLD_PID" slurmctld; then
    # node definitions and ports cannot change by 'scontrol reconfigure': restart controller and nodes
    log "slurm.conf/gres.conf changed: restarting slurmctld and slurmd"
    specs=()
    for node in "${NODES[@]}"; do specs+=("slurmd $node|/run/slurmd-$node.pid|slurmd"); done
    stop_procs "${specs[@]}"
    stop_procs "slurmctld|$SLURMCTLD_PID|slurmctld"
fi
ctld_up() { scontrol ping | grep -q 'is UP'; }
if running "$SLURMCTLD_PID" slurmctld; then
    log "slurmctld running"
else
    start_daemon slurmctld /usr/sbin/slurmctld
    wait_for 30 slurmctld ctld_up || die "slurmctld does not answer (see $LOG_DIR/slurmctld.log)"
    log "slurmctld started"
fi
declare -A SLURMD_STARTED_AT=()
for node in "${NODES[@]}"; do
    install -d -m 755 "/var/spool/slurmd/$node"
    if running "/run/slurmd-$node.pid" slurmd; then
        log "slurmd $node running"
    else
        SLURMD_STARTED_AT[$node]=$(date +%s)
        start_daemon "slurmd-$node" /usr/sbin/slurmd -N "$node"
        log "slurmd $node started"
    fi
done

# Wait until every node is usable. A node left down/drained by an earlier run is resumed.
# (idle, or mixed/allocated/completing if jobs from an earlier run are still there; '*' = not responding)
# A freshly restarted slurmctld shows the saved state: for a slurmd started by this run, wait until it has
# registered (its SlurmdStartTime is not older than our start).
nodes_ready() {
    local out name state started bad=0
    out=$(sinfo -h -N -o '%N %T') || return 1
    for name in "${NODES[@]}"; do
        if [[ -n ${SLURMD_STARTED_AT[$name]:-} ]]; then
            started=$(scontrol -o show node "$name" | grep -o 'SlurmdStartTime=[^ ]*' | cut -d= -f2)
            if [[ -z $started || $started == None ]] || \
               (( $(date -d "$started" +%s) < SLURMD_STARTED_AT[$name] )); then
                bad=1
                continue
            fi
        fi
        state=$(awk -v n="$name" '$1 == n {print $2; exit}' <<<"$out")
        case $state in
            idle|mixed|allocated|completing) ;;
            down|drained|draining|drain|fail|failing)
                log "resuming $name (was $state)" >&3
                scontrol update nodename="$name" state=resume >/dev/null 2>&1 || true
                bad=1 ;;
            *) bad=1 ;;
        esac
    done
    return "$bad"
}
if ! wait_for "$NODE_WAIT_S" "nodes to become idle" nodes_ready; then
    sinfo -N -l >&2 || true
    die "nodes not ready after ${NODE_WAIT_S}s (see $LOG_DIR/slurmd-node*.log)"
fi
log "nodes ready: $(sinfo -h -N -o '%N:%T' | sort -u | tr '\n' ' ')"
ensure_pool_qos_gpu_limit sacctmgr   # the pool QOS's GPU limit, now that slurmctld has registered gres/gpu

# ---------------------------------------------------------------------------------------------------------------
# 5b. the stand-in GPU exporters (cluster/fake_dcgm_exporter.py), one per node on 127.0.0.1:EXPORTER_PORT, as
#     nobody, reading the node's mapping directory; restarted when the script changed. A real site runs
#     dcgm-exporter --hpc-job-mapping-dir /run/dcgm-job-map instead (docs/gpu-usage.md).
# ---------------------------------------------------------------------------------------------------------------
EXPORTER=$CLUSTER_DIR/fake_dcgm_exporter.py
exporter_sum=$(cat "$EXPORTER" "$SLURM_ETC/gres.conf" | sha256sum | cut -d' ' -f1)
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
for node in "${NODES[@]}"; do
    install -d -m 755 "$GPU_JOB_MAP_ROOT" "$GPU_JOB_MAP_ROOT/$node" "$FAKE_GPU_LOAD_ROOT" "$FAKE_GPU_LOAD_ROOT/$node"
    pidfile=/run/fake-dcgm-exporter-$node.pid
    port=${EXPORTER_PORT[$node]}
    if exporter_pid "$pidfile" "$node" >/dev/null; then
        [[ $(cat "$STATE_DIR/fake-dcgm-exporter-$node.sum" 2>/dev/null) == "$exporter_sum" ]] && \
            { log "GPU exporter $node running on 127.0.0.1:$port"; continue; }
        log "GPU exporter $node: script or gres.conf changed, restarting"
        kill -TERM "$(exporter_pid "$pidfile" "$node")" 2>/dev/null || true
        wait_for 10 "exporter $node to stop" bash -c "! ss -Hltn 'sport = :$port' | grep -q ." || true
    fi
    in_background setsid setpriv --reuid=nobody --regid=nogroup --clear-groups /usr/bin/python3 "$EXPORTER" \
        --node "$node" --port "$port" --gres-conf "$SLURM_ETC/gres.conf" --job-map-dir "$GPU_JOB_MAP_ROOT/$node" \
        --load-dir "$FAKE_GPU_LOAD_ROOT/$node" >>"$LOG_DIR/fake-dcgm-exporter-$node.log" 2>&1 &
    echo $! >"$pidfile"
    echo "$exporter_sum" >"$STATE_DIR/fake-dcgm-exporter-$node.sum"
    wait_for 10 "GPU exporter $node" exporter_up "$port" || die "GPU exporter $node does not answer (see $LOG_DIR/fake-dcgm-exporter-$node.log)"
    log "GPU exporter $node started on 127.0.0.1:$port (stand-in for dcgm-exporter)"
done

# ---------------------------------------------------------------------------------------------------------------
# 6. sshd for the portal (127.0.0.1:2222) + the portal's client key and known_hosts
# ---------------------------------------------------------------------------------------------------------------
[[ -s /etc/ssh/ssh_host_ed25519_key ]] || { ssh-keygen -A >/dev/null; log "generated ssh host keys"; }
install -d -m 755 /run/sshd
RENDER_CHECK="sshd -t -f" render "$TEMPLATE_DIR/sshd_config_portal" "$SSHD_PORTAL_CONF" 644 root:root
sshd_conf_changed=$RENDER_CHANGED
sshd_listening() { ss -Hltn "sport = :$PORTAL_SSH_PORT" | grep -q .; }
if sshd_pid=$(pid_of "$SSHD_PORTAL_PID" sshd); then
    if (( sshd_conf_changed )); then
        kill -HUP "$sshd_pid"      # sshd re-executes itself with the new config
        sleep 0.5
        log "portal sshd reloaded"
    else
        log "portal sshd running on $PORTAL_SSH_ADDR:$PORTAL_SSH_PORT"
    fi
else
    start_daemon sshd-portal /usr/sbin/sshd -f "$SSHD_PORTAL_CONF" -E "$LOG_DIR/sshd-portal.log"
    wait_for 10 "portal sshd" sshd_listening || die "portal sshd not listening (see $LOG_DIR/sshd-portal.log)"
    log "portal sshd started on $PORTAL_SSH_ADDR:$PORTAL_SSH_PORT"
fi

SSH_DIR=$PORTAL_VAR_DIR/ssh
KEY=$SSH_DIR/portal_ed25519
install -d -m 700 "$SSH_DIR"
if [[ ! -s $KEY ]]; then
    ssh-keygen -q -t ed25519 -N '' -C "$PORTAL_USER@portal-$(hostname -s)" -f "$KEY"
    log "generated $KEY"
fi
[[ -s $KEY.pub ]] || ssh-keygen -y -f "$KEY" >"$KEY.pub"
chmod 600 "$KEY"
chmod 644 "$KEY.pub"
# known_hosts from the host's own key file: no trust-on-first-use
host_key=$(awk '{print $1, $2}' /etc/ssh/ssh_host_ed25519_key.pub)
if [[ $PORTAL_SSH_PORT == 22 ]]; then host_pattern=$PORTAL_SSH_ADDR; else host_pattern="[$PORTAL_SSH_ADDR]:$PORTAL_SSH_PORT"; fi
known="$host_pattern $host_key"
# other hosts' lines stay (cluster2's, pinned by cluster/cluster2/up.sh)
others=$(awk -v p="$host_pattern" '$1 != p' "$SSH_DIR/known_hosts" 2>/dev/null || true)
known=$(printf '%s\n%s\n' "$known" "$others" | sed '/^$/d')
if [[ ! -f $SSH_DIR/known_hosts ]] || [[ $(<"$SSH_DIR/known_hosts") != "$known" ]]; then
    printf '%s\n' "$known" >"$SSH_DIR/known_hosts"
    log "wrote $SSH_DIR/known_hosts"
fi
chmod 644 "$SSH_DIR/known_hosts"
chown -R "$PORTAL_KEY_OWNER:" "$SSH_DIR"

portal_home=$(getent passwd "$PORTAL_USER" | cut -d: -f6)
install -d -m 700 -o "$PORTAL_USER" -g "$PORTAL_USER" "$portal_home/.ssh"
auth=$portal_home/.ssh/authorized_keys
pub=$(awk '{print $1, $2}' "$KEY.pub")
if ! { [[ -f $auth ]] && grep -qF "$pub" "$auth"; }; then
    cat "$KEY.pub" >>"$auth"
    log "installed the portal key in $auth"
fi
chown "$PORTAL_USER:$PORTAL_USER" "$auth"
chmod 600 "$auth"

# ---------------------------------------------------------------------------------------------------------------
# 7. sudoers: the portal may run only the Slurm client commands (and cat/tail/dd/stat/mkdir, and the submit helper
#    that makes a job's directory and then runs sbatch), only as members of $SLURM_GROUP, never as root or
#    another system account even if one is put in that group (the Runas_Alias PORTAL_NEVER)
# ---------------------------------------------------------------------------------------------------------------
install -d -m 755 -o root -g root "$(dirname "$SBATCH_HELPER")"
render "$TEMPLATE_DIR/gpuportal-sbatch" "$SBATCH_HELPER" 755 root:root
RENDER_CHECK="visudo -qcf" render "$TEMPLATE_DIR/sudoers-portal" /etc/sudoers.d/portal 440 root:root

# ---------------------------------------------------------------------------------------------------------------
# 8. job environments: uv on the nodes and the shared environment cache (profiles' environment block)
# ---------------------------------------------------------------------------------------------------------------
UV_VERSION=0.13.9
TOOLS_DIR=/opt/gpuportal/tools
ENV_CACHE_DIR=${PORTAL_ENV_CACHE_DIR:-/srv/gpuportal/envs}
if [[ $("$TOOLS_DIR/bin/uv" --version 2>/dev/null | awk '{print $2}') != "$UV_VERSION" ]]; then
    # uv's wheel is one static binary; pip (any Python) unpacks it into $TOOLS_DIR/bin.
    rm -rf "$TOOLS_DIR.new" && python3 -m pip install -q --disable-pip-version-check --no-deps --target "$TOOLS_DIR.new" "uv==$UV_VERSION"
    rm -rf "$TOOLS_DIR" && mv "$TOOLS_DIR.new" "$TOOLS_DIR"
    log "installed uv $UV_VERSION in $TOOLS_DIR"
fi
chmod -R a+rX "$TOOLS_DIR"
# root's, mode 755, one area per member of $SLURM_GROUP that only its user writes in (and the 1777 cache of
# earlier versions fixed): see cluster/env_cache.sh and docs/profiles.md.
PORTAL_ENV_CACHE_DIR=$ENV_CACHE_DIR SLURM_GROUP=$SLURM_GROUP LOG_TAG=$LOG_TAG bash "$CLUSTER_DIR/env_cache.sh"
# The demo users' project directory for the example profile (examples/train_digits.yaml).
for u in $DEMO_USERS; do
    home=$(getent passwd "$u" | cut -d: -f6)
    install -d -o "$u" -g "$u" -m 755 "$home/gpuportal-examples" "$home/gpuportal-examples/digits"
    install -o "$u" -g "$u" -m 644 "$REPO_DIR/examples/train_digits.py" "$home/gpuportal-examples/digits/train_digits.py"
done

# ---------------------------------------------------------------------------------------------------------------
# 9. summary
# ---------------------------------------------------------------------------------------------------------------
echo
echo "Slurm cluster cluster1 (ClusterName '$CLUSTER_NAME') is up (controller $CONTROLLER_HOST, Slurm $(sinfo -V | awk '{print $2}'))"
echo "  nodes:"
sinfo -h -N -o '    %N %T cpus=%c mem=%m gres=%G' | sort -u
echo "  partitions:"
sinfo -h -o '    %P nodes=%N timelimit=%l' 
echo "  accounts:"
sacctmgr -nP show assoc where cluster="$CLUSTER_NAME" format=account,user | awk -F'|' '
    $2 != "" && $1 != "root" {u[$1] = u[$1] " " $2} END {for (a in u) print "    " a ":" u[a]}' | sort
echo "  portal sshd:  $PORTAL_USER@$PORTAL_SSH_ADDR:$PORTAL_SSH_PORT (config $SSHD_PORTAL_CONF)"
echo "  client key:   $KEY"
echo "  known_hosts:  $SSH_DIR/known_hosts"
echo "  sudo rule:    /etc/sudoers.d/portal (as %$SLURM_GROUP but never root or a system account: sbatch $SBATCH_HELPER scancel squeue scontrol sacct sinfo sshare cat tail dd stat mkdir)"
echo "  job envs:     uv $UV_VERSION at $TOOLS_DIR/bin/uv, cache $ENV_CACHE_DIR (one area per user: $ENV_CACHE_DIR/<user>)"
echo "  GPU metrics:  stand-in dcgm-exporters $(for n in "${NODES[@]}"; do printf '%s=127.0.0.1:%s ' "$n" "${EXPORTER_PORT[$n]}"; done)(job mapping $GPU_JOB_MAP_ROOT/<node>, loads: gpuportal-fake-gpu-load)"
echo "  logs:         $LOG_DIR/"

# The second cluster, Slurm 24.11 in a Debian 13 root beside this one (cluster/cluster2/up.sh); CLUSTER2=0 skips it.
if [[ ${CLUSTER2:-1} != 0 ]]; then
    echo
    bash "$CLUSTER_DIR/cluster2/up.sh"
else
    log "CLUSTER2=0: cluster2 (Slurm 24.11) not started by this script (cluster/cluster2/up.sh starts it)"
fi
echo "up.sh took $(elapsed) s"
