#!/usr/bin/env bash
# Set up and run everything for development, in the background: the portal's dependencies, the local
# Slurm cluster with its stand-in GPU exporters, Prometheus, the dev IdP, a Celery worker and beat, and the
# portal on http://127.0.0.1:8000/.
# Stop it all with scripts/stop.sh (make stop).
LOG_TAG=dev
source "$(dirname "$0")/lib.sh"
T_START=$(date +%s)

bash "$REPO_DIR/scripts/bootstrap.sh"
bash "$REPO_DIR/cluster/up.sh"
bash "$REPO_DIR/scripts/prometheus.sh"   # GPU metrics: http://127.0.0.1:9090/ (docs/gpu-usage.md)
bash "$REPO_DIR/scripts/hub_setup.sh"
bash "$REPO_DIR/scripts/build_image.sh"   # the demo container image, once (docs/containers.md)

export DJANGO_SETTINGS_MODULE=portal.settings.dev
# Teams = Slurm accounts: on a new install, take over the accounts Slurm already has (idempotent).
"$VENV/bin/python" "$REPO_DIR/manage.py" teams_sync --import || log "teams import reported problems (see above)"
NODE=$(node_bin)
# The demo image in the registry for both clusters (cluster2 binds the host's image directory), checked on each at once (idempotent).
"$VENV/bin/python" "$REPO_DIR/manage.py" image_register --from-json "${PORTAL_IMAGES_DIR:-/srv/gpuportal/images}/debian12-sklearn.json" --cluster cluster1 --cluster cluster2 --check || log "the demo image could not be registered (see above)"
start_bg idp "$NODE" "$REPO_DIR/idp/server.mjs"
# Notifications' mail: a real SMTP server on 127.0.0.1 that keeps every message in a Maildir (nothing is relayed).
start_bg mail-sink "$VENV/bin/python" -P "$REPO_DIR/notifications/sink.py" serve --port "${PORTAL_EMAIL_PORT:-8025}" --maildir "$PORTAL_VAR_DIR/mail"
start_bg celery-worker "$VENV/bin/celery" -A portal --workdir "$REPO_DIR" worker --loglevel=INFO --concurrency=2 -Q celery -n worker@%h
start_bg celery-poller "$VENV/bin/celery" -A portal --workdir "$REPO_DIR" worker --loglevel=INFO --pool=threads --concurrency=4 -Q poller -n poller@%h
start_bg celery-beat "$VENV/bin/celery" -A portal --workdir "$REPO_DIR" beat --loglevel=INFO --schedule "$RUN_DIR/celerybeat-schedule"
# gunicorn, as in production (portal/gunicorn.conf.py): a bounded number of threads (and so of database
# connections) however many people use it, and a keep-alive longer than any client's poll; --reload
# restarts it when the code changes.
start_bg portal "$VENV/bin/gunicorn" portal.wsgi -c "$REPO_DIR/portal/gunicorn.conf.py" --chdir "$REPO_DIR" \
    --bind "$PORTAL_HOST:$PORTAL_PORT" --reload --access-logfile - --error-logfile -
# The proxy first, as a process of its own: restarting the hub (stop_bg hub; start_bg hub ...) leaves
# it and the sessions' open connections up.
bash "$REPO_DIR/scripts/hub.sh" proxy
start_bg hub bash "$REPO_DIR/scripts/hub.sh"
wait_http "http://127.0.0.1:8800/.well-known/openid-configuration" 30
wait_http "http://127.0.0.1:8001/hub/api/" 60
wait_http "http://$PORTAL_HOST:$PORTAL_PORT/accounts/login/" 60

cat <<MSG

  GPU portal is running: http://$PORTAL_HOST:$PORTAL_PORT/   (set up in $(( $(date +%s) - T_START )) s)

  Sign in through the dev IdP (http://127.0.0.1:8800) as one of (password = user name):
    alice  researcher, team vision
    bob    researcher, team nlp
    carol  team lead,  team vision
    dana   admin,      team nlp
    erin   a newcomer: waits until dana links her (Accounts page, top right)

  Sessions (JupyterLab$( [[ -x /opt/gpuportal/code-server/bin/code-server ]] && echo ", VS Code")): http://$PORTAL_HOST:$PORTAL_PORT/sessions/  (JupyterHub on http://127.0.0.1:8001/)
  CLI: create a token under "API tokens", then
    .venv/bin/gpuportal login --url http://$PORTAL_HOST:$PORTAL_PORT && .venv/bin/gpuportal submit examples/train_digits.yaml
  Mail the portal sent (SMTP sink on 127.0.0.1:${PORTAL_EMAIL_PORT:-8025}): .venv/bin/python -m notifications.sink show --maildir $PORTAL_VAR_DIR/mail
  Logs: $LOG_DIR/   Check the path to Slurm: .venv/bin/python manage.py cluster_check
  Stop everything: make stop
MSG
