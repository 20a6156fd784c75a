#!/usr/bin/env bash
# Check the portal's path to cluster2 end to end, as the portal takes it: ssh as the service user to
# 127.0.0.1:2223 with the portal's key and known_hosts (strict: the pinned host key only), then
# 'sudo -n -u alice' the submit helper with one l40s GPU; wait for the job to end, read its output as alice and
# check it ran as alice on cluster2 with one GPU; read the job back with 'squeue --json' over the same path and
# check it is Slurm 24.11's JSON. Prints one line per step; exits 1 with the reason at the first failure.
# Run after cluster/up.sh (as root, or as the owner of var/ssh).
set -euo pipefail
LOG_TAG=cluster2-check
# shellcheck source=cluster/cluster2/lib.sh
source "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

KEY=$PORTAL_VAR_DIR/ssh/portal_ed25519
KNOWN=$PORTAL_VAR_DIR/ssh/known_hosts
: "${CHECK_USER:=alice}"
[[ -r $KEY ]] || die "cannot read the portal key $KEY: run cluster/up.sh first (and this as root or its owner)"
grep -q "^\[$CLUSTER2_SSH_ADDR\]:$CLUSTER2_SSH_PORT " "$KNOWN" 2>/dev/null || \
    die "$KNOWN has no host key for [$CLUSTER2_SSH_ADDR]:$CLUSTER2_SSH_PORT: run cluster/up.sh (it pins cluster2's)"

# on_submit_host ARG...: run ARG... on cluster2's submit host as the service user; the remote command line is
# made from the words with printf %q (the one place a string is made)
on_submit_host() {
    local remote
    remote=$(printf '%q ' "$@")
    ssh -i "$KEY" -o IdentitiesOnly=yes -o BatchMode=yes -o StrictHostKeyChecking=yes \
        -o UserKnownHostsFile="$KNOWN" -o ConnectTimeout=5 -o LogLevel=ERROR \
        -p "$CLUSTER2_SSH_PORT" "$PORTAL_USER@$CLUSTER2_SSH_ADDR" "$remote"
}
as_user() { on_submit_host sudo -n -u "$CHECK_USER" -- "$@"; }

who=$(on_submit_host id -un) || die "ssh as $PORTAL_USER to $CLUSTER2_SSH_ADDR:$CLUSTER2_SSH_PORT failed (is cluster2 up? see $CLUSTER2_ROOT$C2_LOG_DIR/sshd-portal.log)"
[[ $who == "$PORTAL_USER" ]] || die "ssh to port $CLUSTER2_SSH_PORT logged in as '$who', not $PORTAL_USER"
version=$(on_submit_host sinfo -V)
[[ $version == "slurm 24.11"* || $version == "slurm-wlm 24.11"* ]] || die "the submit host on port $CLUSTER2_SSH_PORT runs '$version', not Slurm 24.11"
log "ssh $PORTAL_USER@$CLUSTER2_SSH_ADDR:$CLUSTER2_SSH_PORT: host key pinned, $version"

home=/home/$CHECK_USER
dir=$home/.gpuportal-check
script='#!/bin/bash
echo "user=$(id -un) cluster=$SLURM_CLUSTER_NAME node=$SLURMD_NODENAME gpus=$CUDA_VISIBLE_DEVICES"
'
job=$(printf '%s' "$script" | as_user "$SBATCH_HELPER" "$dir" -- --parsable --chdir="$home" -p gpu \
        --gres=gpu:l40s:1 -t 1 --mem=100M --job-name=cluster2-check --comment="portal:cluster2-check" \
        --output="$dir/cluster2-%j.out") || die "sudo -n -u $CHECK_USER $SBATCH_HELPER ... sbatch failed (see above)"
job=${job%%;*}
[[ $job =~ ^[0-9]+$ ]] || die "sbatch --parsable printed '$job', not a job id"
log "submitted job $job as $CHECK_USER through $SBATCH_HELPER (gres gpu:l40s:1)"

json=$(as_user squeue --json -t all -j "$job")   # 24.11 lists a finished job only with -t all
python3 - "$job" "$json" <<'PY' || die "squeue --json over ssh is not Slurm 24.11's data_parser/v0.0.42 shape (see above)"
import json, sys
job, doc = int(sys.argv[1]), json.loads(sys.argv[2])
assert doc["meta"]["plugin"]["data_parser"] == "data_parser/v0.0.42", doc["meta"]["plugin"]
(entry,) = [j for j in doc["jobs"] if j["job_id"] == job]
assert isinstance(entry["job_state"], list), entry["job_state"]
assert set(entry["time_limit"]) == {"set", "infinite", "number"} and entry["time_limit"]["number"] == 1, entry["time_limit"]
assert entry["tres_per_node"] == "gres/gpu:l40s:1", entry["tres_per_node"]
print(f"squeue --json: data_parser/v0.0.42, job_state {entry['job_state']}, time_limit {entry['time_limit']}")
PY

ended() {
    local state
    state=$(as_user sacct -n -X -P -j "$job" -o State 2>/dev/null | head -n1)
    [[ -n $state && $state != PENDING && $state != RUNNING && $state != REQUEUED ]]
}
wait_for 60 "job $job to end" ended || die "job $job did not end within 60 s: $(as_user squeue -h -j "$job" -o '%T %r' 2>&1)"
read -r state exit_code < <(as_user sacct -n -X -P -j "$job" -o State,ExitCode | head -n1 | tr '|' ' ')
[[ $state == COMPLETED && $exit_code == 0:0 ]] || die "job $job ended $state with exit code $exit_code"
out=$(as_user cat "$dir/cluster2-$job.out") || die "cannot read $dir/cluster2-$job.out as $CHECK_USER"
[[ $out =~ ^user=$CHECK_USER\ cluster=$CLUSTER2_NAME\ node=g2\ gpus=[0-9]$ ]] || \
    die "job $job printed '$out' (wanted user=$CHECK_USER cluster=$CLUSTER2_NAME node=g2 gpus=<one index>)"
log "job $job COMPLETED 0:0 and printed: $out"
log "cluster2 check passed"
