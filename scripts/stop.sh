#!/usr/bin/env bash
# Stop what scripts/dev.sh started (hub and its proxy, portal, Celery, IdP, Prometheus) and the local Slurm cluster.
LOG_TAG=stop
source "$(dirname "$0")/lib.sh"
for name in hub portal celery-beat celery-poller celery-worker mail-sink idp; do stop_bg "$name"; done
bash "$REPO_DIR/scripts/hub.sh" stop-proxy
bash "$REPO_DIR/scripts/prometheus.sh" stop
[[ ${KEEP_CLUSTER:-0} == 1 ]] || bash "$REPO_DIR/cluster/down.sh"
