#!/bin/bash
# Slurm Prolog (slurmd, as root): write dcgm-exporter's HPC job-mapping files for the GPUs this job holds on
# this node, so that every GPU metric dcgm-exporter serves carries the label hpc_job="<job id>".
#
# dcgm-exporter --hpc-job-mapping-dir=DIR reads DIR/<GPU index> (a file named by the GPU's index, the metric's
# gpu label) holding one job id per line; a GPU without a file has no hpc_job label. This writes one file per
# GPU of the job (indexes from SLURM_JOB_GPUS, else CUDA_VISIBLE_DEVICES / GPU_DEVICE_ORDINAL, which Slurm sets
# in the prolog's environment to the node's GPU ids), each holding "<SLURM_JOB_ID>\n"; the Epilog
# (epilog.d/gpu-job-map.sh) removes them. Files left by a job that was killed without its epilog are cleaned
# here: a file for one of this job's GPUs is replaced (Slurm gives a GPU to one job only), and a file naming a
# job that no longer runs on this node (squeue) is removed, so one GPU never counts for two jobs.
#
# Settings, optional, in /etc/slurm/gpu-job-map.conf (KEY=VALUE lines; GPU_JOB_MAP_CONF names another file):
#   GPU_JOB_MAP_DIR=/run/dcgm-job-map   the directory given to dcgm-exporter; "%n" is replaced by the node's
#                                       name (the local clusters run several slurmd on one host: one dir each)
#   FAKE_GPU_LOAD_DIR=                  stand-in exporter only (cluster/fake_dcgm_exporter.py): where a job's
#                                       chosen load is written; unset on a real site
#   SQUEUE=squeue                       the squeue to ask whether a job still runs
# It never fails the job: an error is logged (to stderr, slurmd's log) and the prolog exits 0, because a
# failing prolog drains the node.
set -u
export PATH=${PATH:+$PATH:}/usr/local/bin:/usr/bin:/bin

GPU_JOB_MAP_DIR=/run/dcgm-job-map
FAKE_GPU_LOAD_DIR=
SQUEUE=squeue
conf=${GPU_JOB_MAP_CONF:-/etc/slurm/gpu-job-map.conf}
if [[ -r $conf ]]; then
    while IFS='=' read -r key value; do
        case $key in
            GPU_JOB_MAP_DIR|FAKE_GPU_LOAD_DIR|SQUEUE) printf -v "$key" '%s' "$value" ;;
        esac
    done < <(grep -E '^[A-Z_]+=' "$conf")
fi
node=${SLURMD_NODENAME:-$(hostname -s)}
map_dir=${GPU_JOB_MAP_DIR//%n/$node}
load_dir=${FAKE_GPU_LOAD_DIR//%n/$node}
job=${SLURM_JOB_ID:-}

warn() { echo "gpu-job-map prolog: job ${job:-?} on $node: $*" >&2; }

# The job's GPU indexes on this node, one per line ("0,1", "0-1" and "gpu:a100:2(IDX:0-1)" forms all read).
job_gpus() {
    local list=${SLURM_JOB_GPUS:-${CUDA_VISIBLE_DEVICES:-${GPU_DEVICE_ORDINAL:-}}} part
    list=${list##*IDX:}
    list=${list%%)*}
    [[ $list == NoDevFiles ]] && return 0
    for part in ${list//,/ }; do
        if [[ $part =~ ^([0-9]+)-([0-9]+)$ ]]; then
            seq "${BASH_REMATCH[1]}" "${BASH_REMATCH[2]}"
        elif [[ $part =~ ^[0-9]+$ ]]; then
            echo "$part"
        fi
    done
}

# still_running JOB: 0 if squeue says JOB runs on this node, 1 if it does not, 2 if squeue could not tell.
still_running() {
    local out rc
    out=$("$SQUEUE" --noheader --jobs="$1" --nodelist="$node" --states=RUNNING,COMPLETING,SUSPENDED,CONFIGURING \
        --format=%A 2>&1)
    rc=$?
    if (( rc == 0 )); then
        [[ -n $out ]] && return 0
        return 1
    fi
    [[ $out == *"Invalid job id"* ]] && return 1
    return 2
}

[[ $job =~ ^[0-9]+$ ]] || { warn "no SLURM_JOB_ID"; exit 0; }
mapfile -t gpus < <(job_gpus)
# A job without GPUs writes nothing and asks nothing (array sweeps start thousands of them); the next GPU job
# on the node cleans up.
(( ${#gpus[@]} )) || exit 0
if ! mkdir -p "$map_dir" || ! chmod 755 "$map_dir"; then
    warn "cannot make $map_dir"
    exit 0
fi

declare -A mine=()
for gpu in "${gpus[@]}"; do
    mine[$gpu]=1
    tmp=$(mktemp "$map_dir/.$gpu.XXXXXX") || { warn "cannot write in $map_dir"; continue; }
    printf '%s\n' "$job" >"$tmp" && chmod 644 "$tmp" && mv -f "$tmp" "$map_dir/$gpu" || warn "cannot write $map_dir/$gpu"
    if [[ -n $load_dir ]]; then
        mkdir -p "$load_dir" && chmod 755 "$load_dir"
        printf 'job=%s load=0\n' "$job" >"$load_dir/$gpu" && chown "${SLURM_JOB_UID:-0}" "$load_dir/$gpu" \
            && chmod 644 "$load_dir/$gpu" || warn "cannot write $load_dir/$gpu"
    fi
done

# Stale files: another GPU's file naming a job that no longer runs here (its epilog never ran).
for file in "$map_dir"/*; do
    gpu=${file##*/}
    [[ -f $file && $gpu =~ ^[0-9]+$ && -z ${mine[$gpu]:-} ]] || continue
    stale=1
    while read -r other; do
        [[ -z $other ]] && continue
        still_running "$other"
        case $? in
            0|2) stale=0 ;;   # running, or squeue could not tell: keep it
        esac
    done <"$file"
    if (( stale )); then
        rm -f "$file" && warn "removed stale $file (its job no longer runs here)"
        [[ -n $load_dir ]] && rm -f "$load_dir/$gpu"
    fi
done
exit 0
