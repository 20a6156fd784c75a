#!/bin/bash
# Slurm Epilog (slurmd, as root): remove the dcgm-exporter HPC job-mapping files that prolog.d/gpu-job-map.sh
# wrote for this job on this node (DIR/<GPU index> holding the job id), so that its GPUs lose the hpc_job label
# as soon as the job ends. A file naming this job is removed whatever GPU it is for (the job's GPU variables are
# not needed); a file naming another job as well keeps that job's line. The same settings file as the prolog
# (/etc/slurm/gpu-job-map.conf). Never fails: a failing epilog drains the node.
set -u
export PATH=${PATH:+$PATH:}/usr/local/bin:/usr/bin:/bin

GPU_JOB_MAP_DIR=/run/dcgm-job-map
FAKE_GPU_LOAD_DIR=
conf=${GPU_JOB_MAP_CONF:-/etc/slurm/gpu-job-map.conf}
if [[ -r $conf ]]; then
    while IFS='=' read -r key value; do
        case $key in
            GPU_JOB_MAP_DIR|FAKE_GPU_LOAD_DIR) printf -v "$key" '%s' "$value" ;;
        esac
    done < <(grep -E '^[A-Z_]+=' "$conf")
fi
node=${SLURMD_NODENAME:-$(hostname -s)}
map_dir=${GPU_JOB_MAP_DIR//%n/$node}
load_dir=${FAKE_GPU_LOAD_DIR//%n/$node}
job=${SLURM_JOB_ID:-}
[[ $job =~ ^[0-9]+$ ]] || { echo "gpu-job-map epilog on $node: no SLURM_JOB_ID" >&2; exit 0; }

for file in "$map_dir"/*; do
    gpu=${file##*/}
    [[ -f $file && $gpu =~ ^[0-9]+$ ]] || continue
    grep -qx "$job" "$file" || continue
    others=$(grep -vx "$job" "$file" | grep -E '^[0-9]+$')
    if [[ -n $others ]]; then
        printf '%s\n' "$others" >"$file.tmp.$job" && mv -f "$file.tmp.$job" "$file"
    else
        rm -f "$file"
    fi
done
if [[ -n $load_dir && -d $load_dir ]]; then
    for file in "$load_dir"/*; do
        [[ -f $file ]] && grep -q "^job=$job " "$file" && rm -f "$file"
    done
fi
exit 0
