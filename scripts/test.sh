#!/usr/bin/env bash
# Run the whole test suite against the real stack. Installs and starts what the tests need first
# (idempotent): the portal's dependencies (bootstrap.sh), the local Slurm cluster with sshd + sudo
# (cluster/up.sh, with the stand-in GPU exporters), Prometheus (scripts/prometheus.sh), the Jupyter venv and
# proxy (hub_setup.sh), the demo container image (build_image.sh) and Chromium for the browser tests. The tests start their own IdP and live portal.
# The import layers and ruff are checked first (scripts/lint.sh). Extra arguments go to pytest, e.g. scripts/test.sh -m "not e2e" -x
LOG_TAG=test
source "$(dirname "$0")/lib.sh"
bash "$REPO_DIR/scripts/bootstrap.sh"
bash "$REPO_DIR/cluster/up.sh"
bash "$REPO_DIR/scripts/prometheus.sh"  # 127.0.0.1:9090, scraping the nodes' GPU exporters (docs/gpu-usage.md)
bash "$REPO_DIR/scripts/hub_setup.sh"   # the tests start their own hub from it
bash "$REPO_DIR/scripts/build_image.sh" # the demo container image (docs/containers.md); "up to date" in a second after the first
apt_install chromium fonts-dejavu-core
cd "$REPO_DIR"
bash "$REPO_DIR/scripts/lint.sh"
log "running pytest"
exec "$VENV/bin/pytest" "$@"
