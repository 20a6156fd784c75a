"""Every environment variable the portal reads, in one place.

Settings modules call :func:`read_env` once; nothing else in the code base reads ``os.environ``
(the Celery app and ``manage.py`` only default ``DJANGO_SETTINGS_MODULE``). The table "Environment
variables" in docs/admin-guide.md is this table.
"""

from __future__ import annotations

from pathlib import Path

import environ

BASE_DIR = Path(__file__).resolve().parent.parent

#: Whether :func:`read_env` also loads ``<repo>/.env``. ``portal.settings.test`` turns it off before
#: any settings are read: a developer's ``.env`` (written for ``make dev`` or docker-compose) must not
#: change what the tests run with; they take the process environment only.
LOAD_DOTENV = True

#: name -> (type, default). ``environ.Env.NOTSET`` means required (only production enforces that).
SCHEMA: dict[str, tuple[type, object]] = {
    # Django
    "PORTAL_SECRET_KEY": (str, "dev-insecure-secret-key-change-me"),
    "PORTAL_DEBUG": (bool, False),
    "PORTAL_ALLOWED_HOSTS": (list, ["127.0.0.1", "localhost"]),
    "PORTAL_CSRF_TRUSTED_ORIGINS": (list, []),
    "PORTAL_VAR_DIR": (str, str(BASE_DIR / "var")),
    "PORTAL_SECURE_SSL_REDIRECT": (bool, True),
    # Storage
    "DATABASE_URL": (str, "postgres://portal:portal@127.0.0.1:5432/portal"),
    "REDIS_URL": (str, "redis://127.0.0.1:6379/0"),
    # OIDC (the site's identity provider)
    "PORTAL_OIDC_ISSUER": (str, ""),
    "PORTAL_OIDC_CLIENT_ID": (str, ""),
    "PORTAL_OIDC_CLIENT_SECRET": (str, ""),
    "PORTAL_OIDC_PROVIDER_NAME": (str, "Single sign-on"),
    "PORTAL_OIDC_SCOPES": (list, ["openid", "email", "profile", "groups"]),
    "PORTAL_OIDC_USERNAME_CLAIM": (str, "preferred_username"),
    "PORTAL_OIDC_LINK_CLAIM": (str, ""),
    "PORTAL_OIDC_ADMIN_GROUPS": (list, ["portal-admins"]),
    "PORTAL_OIDC_CLOCK_LEEWAY": (float, 60.0),
    # Slurm clusters (slurm/clusters.py, docs/clusters.md) and the gateway's defaults for each
    "PORTAL_CLUSTERS_FILE": (str, ""),
    "PORTAL_CLUSTER_NAME": (str, "cluster1"),
    # Slurm gateway
    "PORTAL_SLURM_TRANSPORT": (str, "ssh"),
    "PORTAL_SSH_HOST": (str, "127.0.0.1"),
    "PORTAL_SSH_PORT": (int, 2222),
    "PORTAL_SSH_USER": (str, "portal"),
    "PORTAL_SSH_KEY_FILE": (str, ""),
    "PORTAL_SSH_KNOWN_HOSTS": (str, ""),
    "PORTAL_SSH_MAX_CHANNELS": (int, 10),
    "PORTAL_SSH_CONNECT_TIMEOUT": (float, 10.0),
    "PORTAL_SLURM_COMMAND_TIMEOUT": (float, 30.0),
    "PORTAL_SLURM_USERS_GROUP": (str, "slurmusers"),
    # Teams and roles
    "PORTAL_TEAM_GROUP": (str, "{team}"),
    "PORTAL_TEAM_LEAD_GROUP": (str, "{team}-leads"),
    "PORTAL_TEAMS_SYNC_INTERVAL": (float, 300.0),
    "PORTAL_TEAMS_SYNC_RETRY_SECONDS": (float, 15.0),
    "PORTAL_USAGE_INTERVAL": (float, 60.0),
    # Site policy kept in Slurm by the teams sync (teams/site_policy.py, docs/policy.md): per-person caps on
    # a QOS ("" = not managed, "unlimited" = no cap), and the small-job pool's partition and its QOS's limits
    "PORTAL_USER_CAPS_QOS": (str, "normal"),
    "PORTAL_USER_MAX_GPUS": (str, ""),
    "PORTAL_USER_MAX_SUBMIT_JOBS": (str, ""),
    "PORTAL_SMALL_POOL_PARTITION": (str, ""),
    "PORTAL_SMALL_POOL_MAX_GPUS": (int, 1),
    "PORTAL_SMALL_POOL_MAX_MINUTES": (int, 60),
    # Priority classes high / normal / scavenger (teams/priority_classes.py, docs/policy.md): QOS kept by the
    # teams sync, chosen on the job form, in profiles (run.priority), the API and the CLI
    "PORTAL_PRIORITY_CLASSES": (bool, False),
    "PORTAL_HIGH_MAX_GPUS_PER_TEAM": (int, 2),
    "PORTAL_SCAVENGER_GRACE_SECONDS": (int, 60),
    "PORTAL_SESSION_PRIORITY_CLASS": (str, ""),
    # Batch jobs
    "PORTAL_PARTITIONS": (list, []),
    "PORTAL_JOB_DIR": (str, "{home}/portal-jobs/{key}"),
    "PORTAL_SBATCH_HELPER": (str, "/usr/local/libexec/gpuportal/gpuportal-sbatch"),
    "PORTAL_SUBMIT_INLINE_TIMEOUT": (float, 10.0),
    "PORTAL_LOG_TAIL_BYTES": (int, 65536),
    # Container images
    "PORTAL_IMAGE_NONE_ALLOWED": (bool, True),
    "PORTAL_IMAGE_CHECK_INTERVAL": (float, 300.0),
    # Job profiles: environments (uv) and containers
    "PORTAL_ENV_CACHE_DIR": (str, "/srv/gpuportal/envs"),
    "PORTAL_ENV_UV": (str, "/opt/gpuportal/tools/bin/uv"),
    "PORTAL_ENV_PYTHONS": (list, ["3.11"]),
    "PORTAL_ENV_CUDA_MODULES": (dict, {}),
    "PORTAL_CONTAINER_RUNTIME": (str, ""),
    "PORTAL_ENV_INDEX_URL": (str, ""),
    # REST API
    "PORTAL_TOKEN_MAX_DAYS": (int, 365),
    # Interactive sessions (JupyterHub)
    "PORTAL_HUB_URL": (str, "http://127.0.0.1:8001"),
    "PORTAL_HUB_API_URL": (str, "http://127.0.0.1:8081/hub/api"),
    "PORTAL_HUB_TOKEN": (str, ""),
    "PORTAL_SESSION_PARTITIONS": (list, ["interactive"]),
    "PORTAL_SESSION_MAX_GPUS": (int, 2),
    "PORTAL_SESSION_MAX_HOURS": (int, 8),
    "PORTAL_SESSION_IDLE_MINUTES": (int, 60),
    "PORTAL_CODE_SERVER_DIR": (str, "/opt/gpuportal/code-server"),
    "PORTAL_SESSION_MAX_QUEUE_MINUTES": (int, 240),
    "PORTAL_SESSION_LIMIT": (int, 4),  # also the hub's named_server_limit_per_user (hub/jupyterhub_config.py)
    "PORTAL_SESSION_PRESETS": (str, None),  # None: settings.PORTAL_SESSION_PRESETS_DEFAULT
    # Snapshot poller
    "PORTAL_SNAPSHOT_INTERVAL": (float, 5.0),
    "PORTAL_SNAPSHOT_MAX_AGE": (float, 60.0),
    "PORTAL_POLL_MAX_BYTES": (int, 512 * 1024 * 1024),
    "PORTAL_POLL_MAX_JOBS": (int, 250_000),
    "PORTAL_POLL_MAX_SECONDS": (float, 60.0),
    # GPU usage (dcgm-exporter series read from Prometheus: gpuusage/)
    "PORTAL_PROMETHEUS_URL": (str, "http://127.0.0.1:9090"),
    "PORTAL_PROMETHEUS_TIMEOUT": (float, 2.0),
    "PORTAL_GPU_LOW_USE_PERCENT": (float, 5.0),
    "PORTAL_GPU_LOW_USE_MINUTES": (int, 30),
    "PORTAL_GPU_IDLE_RECLAIM_MINUTES": (int, 30),
    "PORTAL_GPU_IDLE_WARN_MINUTES": (int, 5),
    # Billing (portal/billing.py): the price of one billed unit-hour, "<amount> <ISO currency>"; "" = none
    "PORTAL_BILLING_RATE": (str, ""),
    # Notifications (notifications/): the SMTP server mail goes through, the sender, the portal's own
    # address in mails, and how long a sender holds a row (seconds)
    "PORTAL_EMAIL_HOST": (str, "127.0.0.1"),
    "PORTAL_EMAIL_PORT": (int, 8025),
    "PORTAL_EMAIL_USER": (str, ""),
    "PORTAL_EMAIL_PASSWORD": (str, ""),
    "PORTAL_EMAIL_USE_TLS": (bool, False),
    "PORTAL_EMAIL_TIMEOUT": (float, 10.0),
    "PORTAL_EMAIL_FROM": (str, "GPU portal <portal@localhost>"),
    "PORTAL_SITE_URL": (str, "http://127.0.0.1:8000"),
    "PORTAL_NOTIFY_LEASE_SECONDS": (int, 180),
    # The portal's own metrics (/metrics)
    "PORTAL_METRICS_ALLOW": (list, ["127.0.0.1", "::1"]),
    "PORTAL_METRICS_TOKEN": (str, ""),
    # Adoption figures and the anonymized job trace export (adoption/)
    "PORTAL_TRACE_SECRET": (str, ""),
}


def read_env() -> environ.Env:
    """Return an ``environ.Env`` bound to :data:`SCHEMA`; also loads ``<repo>/.env`` if present and
    :data:`LOAD_DOTENV` (its values never override the process environment)."""
    env = environ.Env(**SCHEMA)
    dotenv = BASE_DIR / ".env"
    if LOAD_DOTENV and dotenv.exists():
        environ.Env.read_env(str(dotenv), overwrite=False)
    return env
