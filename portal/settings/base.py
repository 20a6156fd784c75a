"""Settings shared by every environment. Values come from :mod:`portal.env` only."""

from __future__ import annotations

from pathlib import Path

from portal.env import BASE_DIR, read_env

env = read_env()

SECRET_KEY = env("PORTAL_SECRET_KEY")
#: "production" or "development" (portal.settings.dev, test); anything else gets production's checks (portal/secrets.py).
PORTAL_ENVIRONMENT = ""
DEBUG = env("PORTAL_DEBUG")
ALLOWED_HOSTS = env("PORTAL_ALLOWED_HOSTS")
CSRF_TRUSTED_ORIGINS = env("PORTAL_CSRF_TRUSTED_ORIGINS")
PORTAL_VAR_DIR = Path(env("PORTAL_VAR_DIR"))

INSTALLED_APPS = [
    "audit.apps.AuditedAdminConfig",  # django.contrib.admin, with every admin edit audited (audit/admin.py)
    "django.contrib.auth",
    "django.contrib.contenttypes",
    "django.contrib.sessions",
    "django.contrib.messages",
    "django.contrib.staticfiles",
    "django.contrib.humanize",  # ordinal (portal.formats)
    "portal",  # the pages' template filters ({% load portal_extras %}, portal/templatetags/)
    "allauth",
    "allauth.account",
    "allauth.socialaccount",
    "allauth.socialaccount.providers.openid_connect",
    "accounts",
    "audit",
    "notifications",
    "jobs",
    "teams",
    "images",
    "interactive",
    "profiles",
    "ops",
    "adoption",
    "api",
    "ninja",  # serves Swagger UI for /api/v1/docs from static files (no CDN)
]

MIDDLEWARE = [
    "django.middleware.security.SecurityMiddleware",
    "api.middleware.ApiJsonErrorsMiddleware",  # outside the NUL guard, so its 400 under /api/ is JSON too
    "portal.middleware.RejectNulMiddleware",
    "whitenoise.middleware.WhiteNoiseMiddleware",
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.middleware.common.CommonMiddleware",
    "django.middleware.csrf.CsrfViewMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
    "accounts.middleware.LinkedIdentityMiddleware",  # an identity not linked to a cluster account sees only why
    "django.contrib.messages.middleware.MessageMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
    "allauth.account.middleware.AccountMiddleware",
    "django_htmx.middleware.HtmxMiddleware",  # request.htmx
    "portal.middleware.HtmxRedirectMiddleware",
    "portal.middleware.MethodNotAllowedPageMiddleware",  # a browser's GET of a form's address: a page, not a blank 405
]

ROOT_URLCONF = "portal.urls"
WSGI_APPLICATION = "portal.wsgi.application"

TEMPLATES = [
    {
        "BACKEND": "django.template.backends.django.DjangoTemplates",
        "DIRS": [BASE_DIR / "templates"],
        "APP_DIRS": True,
        "OPTIONS": {
            "context_processors": [
                "django.template.context_processors.request",
                "django.contrib.auth.context_processors.auth",
                "django.contrib.messages.context_processors.messages",
                "teams.context_processors.team_nav",
                "ops.context_processors.announcements",
            ],
        },
    },
]

DATABASES = {"default": env.db_url("DATABASE_URL")}
DATABASES["default"]["CONN_MAX_AGE"] = 60
#: A kept connection is checked before each request reuses it: after a PostgreSQL restart the first
#: request reconnects instead of failing on the dead connection (docs/operations.md).
DATABASES["default"]["CONN_HEALTH_CHECKS"] = True
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

PORTAL_REDIS_URL = env("REDIS_URL")
CACHES = {
    "default": {
        "BACKEND": "portal.cache.ReadTolerantRedisCache",
        "LOCATION": PORTAL_REDIS_URL,
        "KEY_PREFIX": "portal",
        "OPTIONS": {"IGNORE_EXCEPTIONS": True},  # django-redis: a Redis restart is a miss, not a 500
    }
}
DJANGO_REDIS_LOG_IGNORED_EXCEPTIONS = True
DJANGO_REDIS_LOGGER = "portal.cache"
SESSION_ENGINE = "django.contrib.sessions.backends.db"

AUTH_USER_MODEL = "accounts.User"
AUTHENTICATION_BACKENDS = ["allauth.account.auth_backends.AuthenticationBackend"]
LOGIN_URL = "account_login"
CSRF_FAILURE_VIEW = "accounts.views.csrf_failure"
LOGIN_REDIRECT_URL = "home"

LANGUAGE_CODE = "en-us"
TIME_ZONE = "UTC"
USE_I18N = True
USE_TZ = True
STATIC_URL = "static/"
STATICFILES_DIRS = [BASE_DIR / "static"]
STATIC_ROOT = BASE_DIR / "staticfiles"

# --- django-allauth: OIDC only, no password form, no linking by email -------------------------
ACCOUNT_ADAPTER = "accounts.adapter.PortalAccountAdapter"
SOCIALACCOUNT_ADAPTER = "accounts.adapter.PortalSocialAccountAdapter"
ACCOUNT_LOGIN_METHODS = {"username"}
ACCOUNT_SIGNUP_FIELDS = ["username*"]
ACCOUNT_EMAIL_VERIFICATION = "none"
ACCOUNT_UNIQUE_EMAIL = False
ACCOUNT_LOGOUT_ON_GET = False
SOCIALACCOUNT_AUTO_SIGNUP = True
SOCIALACCOUNT_EMAIL_AUTHENTICATION = False
SOCIALACCOUNT_EMAIL_AUTHENTICATION_AUTO_CONNECT = False
SOCIALACCOUNT_EMAIL_VERIFICATION = "none"
SOCIALACCOUNT_EMAIL_REQUIRED = False
SOCIALACCOUNT_QUERY_EMAIL = False
SOCIALACCOUNT_STORE_TOKENS = False
SOCIALACCOUNT_LOGIN_ON_GET = False

PORTAL_OIDC_PROVIDER_ID = "idp"
PORTAL_OIDC = {
    "issuer": env("PORTAL_OIDC_ISSUER"),
    "client_id": env("PORTAL_OIDC_CLIENT_ID"),
    "client_secret": env("PORTAL_OIDC_CLIENT_SECRET"),
    "name": env("PORTAL_OIDC_PROVIDER_NAME"),
    "scopes": env("PORTAL_OIDC_SCOPES"),
    # The name the IdP suggests for a new identity (people can often edit it): shown to the admin
    # who approves the link, never trusted on its own.
    "username_claim": env("PORTAL_OIDC_USERNAME_CLAIM"),
    # A claim the site's directory sets and people cannot edit (e.g. uid): links a new identity to
    # the cluster account it names without an admin. Empty: every new identity waits for an admin.
    "link_claim": env("PORTAL_OIDC_LINK_CLAIM"),
    "admin_groups": env("PORTAL_OIDC_ADMIN_GROUPS"),
    # Seconds the IdP's clock may differ from ours when its ID tokens' iat/nbf/exp are checked.
    "clock_leeway": env("PORTAL_OIDC_CLOCK_LEEWAY"),
}


def oidc_apps(oidc: dict) -> list[dict]:
    """allauth ``APPS`` entries for the one configured IdP (empty when no issuer is set)."""
    if not oidc["issuer"]:
        return []
    return [
        {
            "provider_id": PORTAL_OIDC_PROVIDER_ID,
            "name": oidc["name"],
            "client_id": oidc["client_id"],
            "secret": oidc["client_secret"],
            "settings": {
                "server_url": oidc["issuer"],
                "token_auth_method": "client_secret_basic",
                "scope": oidc["scopes"],
                "fetch_userinfo": True,
            },
        }
    ]


def socialaccount_providers(oidc: dict) -> dict:
    """The ``SOCIALACCOUNT_PROVIDERS`` setting: allauth's ``openid_connect`` with PKCE."""
    return {
        "openid_connect": {
            "provider_class": "accounts.oidc.provider.PortalOIDCProvider",
            "OAUTH_PKCE_ENABLED": True,
            "APPS": oidc_apps(oidc),
        }
    }


SOCIALACCOUNT_PROVIDERS = socialaccount_providers(PORTAL_OIDC)

# --- Slurm gateway --------------------------------------------------------------------------
#: The clusters served (slurm/clusters.py): a TOML file, or (empty) one cluster named
#: PORTAL_CLUSTER_NAME reached through PORTAL_SLURM_GATEWAY below, whose values are every cluster's defaults.
PORTAL_CLUSTERS_FILE = env("PORTAL_CLUSTERS_FILE")
PORTAL_CLUSTER_NAME = env("PORTAL_CLUSTER_NAME")
PORTAL_SLURM_GATEWAY = {
    "transport": env("PORTAL_SLURM_TRANSPORT"),
    "ssh_host": env("PORTAL_SSH_HOST"),
    "ssh_port": env("PORTAL_SSH_PORT"),
    "ssh_user": env("PORTAL_SSH_USER"),
    "ssh_key_file": env("PORTAL_SSH_KEY_FILE") or str(PORTAL_VAR_DIR / "ssh" / "portal_ed25519"),
    "ssh_known_hosts": env("PORTAL_SSH_KNOWN_HOSTS") or str(PORTAL_VAR_DIR / "ssh" / "known_hosts"),
    "ssh_max_channels": env("PORTAL_SSH_MAX_CHANNELS"),
    "ssh_connect_timeout": env("PORTAL_SSH_CONNECT_TIMEOUT"),
    "command_timeout": env("PORTAL_SLURM_COMMAND_TIMEOUT"),
    "users_group": env("PORTAL_SLURM_USERS_GROUP"),
}

# --- which cluster accounts a sign-in may act as (accounts/directory.py, docs/identity.md) ---
#: Accounts whose uid (``id`` on the submit host) is below this are system accounts and never linked.
#: ``None``: ``UID_MIN`` of the submit host's /etc/login.defs, read at each lookup (1000 if it has none).
#: Site values, not environment variables: a site's settings module overrides them (docs/identity.md).
PORTAL_ACCOUNT_UID_MIN = None
#: Accounts never linked whatever their uid and groups: root, the Slurm, munge and database service
#: accounts (Debian's ``slurm`` has uid 64030, above UID_MIN) and nobody. Each cluster's service user
#: (``ssh_user``) is refused too. The sudo rule names the same accounts (cluster/etc/sudoers-portal).
PORTAL_ACCOUNT_DENY = ["root", "slurm", "slurmrestd", "munge", "mysql", "postgres", "portal", "nobody"]

# --- batch jobs -----------------------------------------------------------------------------
#: Partitions offered to users (empty: every partition Slurm reports as UP).
PORTAL_PARTITIONS = env("PORTAL_PARTITIONS")
#: Per-job directory (``--chdir`` and output files); ``{home}`` and ``{key}`` are filled in.
PORTAL_JOB_DIR = env("PORTAL_JOB_DIR")
#: On the submit host: makes a job's directories, then runs sbatch, as the user, in one sudo command
#: (cluster/etc/gpuportal-sbatch; allowed by the sudoers rule).
PORTAL_SBATCH_HELPER = env("PORTAL_SBATCH_HELPER")
#: Seconds the web process gives the sbatch helper when it sends a new job itself right after the
#: row's commit (jobs.tasks.job_submit_now); a timeout or a lost answer goes to the Celery worker,
#: which checks the job's key first. 0: every submission goes through the worker.
PORTAL_SUBMIT_INLINE_TIMEOUT = env("PORTAL_SUBMIT_INLINE_TIMEOUT")
#: Bytes of stdout/stderr shown on the job page (the tail of each file).
PORTAL_LOG_TAIL_BYTES = env("PORTAL_LOG_TAIL_BYTES")
#: Seconds a user's home directory (``getent passwd`` on the submit host) is remembered.
PORTAL_HOME_CACHE_SECONDS = 3600
#: Container images (images app): whether "none: the node's own system" may be chosen, and seconds
#: between the checks that each image is readable on each cluster (images.availability).
PORTAL_IMAGE_NONE_ALLOWED = env("PORTAL_IMAGE_NONE_ALLOWED")
PORTAL_IMAGE_CHECK_INTERVAL = env("PORTAL_IMAGE_CHECK_INTERVAL")

# --- teams -----------------------------------------------------------------------------------
#: IdP group names that make someone a member / lead of team ``{team}`` (a Slurm account).
PORTAL_TEAM_GROUP = env("PORTAL_TEAM_GROUP")
PORTAL_TEAM_LEAD_GROUP = env("PORTAL_TEAM_LEAD_GROUP")
#: Seconds before a failed Slurm sync is tried again (doubled at each retry; teams.tasks).
PORTAL_TEAMS_SYNC_RETRY_SECONDS = env("PORTAL_TEAMS_SYNC_RETRY_SECONDS")

# --- snapshot poller + Celery ---------------------------------------------------------------
#: Interactive sessions: the hub's public URL (links to sessions), its REST API, the portal
#: service's token (also the secret the hub's spawner presents to /hub-internal/), the partitions
#: sessions may use, the GPU cap per session, the longest session (hours), the idle limit
#: (minutes, 0 = never), the longest a session waits in the Slurm queue before the hub's spawner
#: gives up (minutes) and where code-server is (VS Code is offered only when it is there); the sessions one person
#: may have at once (0 = no limit; the hub's named_server_limit_per_user reads the same variable).
PORTAL_HUB_URL = env("PORTAL_HUB_URL").rstrip("/")
PORTAL_HUB_API_URL = env("PORTAL_HUB_API_URL").rstrip("/")
PORTAL_HUB_TOKEN = env("PORTAL_HUB_TOKEN")
PORTAL_SESSION_PARTITIONS = env("PORTAL_SESSION_PARTITIONS")
PORTAL_SESSION_MAX_GPUS = env("PORTAL_SESSION_MAX_GPUS")
PORTAL_SESSION_MAX_HOURS = env("PORTAL_SESSION_MAX_HOURS")
PORTAL_SESSION_IDLE_MINUTES = env("PORTAL_SESSION_IDLE_MINUTES")
PORTAL_CODE_SERVER_DIR = env("PORTAL_CODE_SERVER_DIR")
PORTAL_SESSION_LIMIT = env("PORTAL_SESSION_LIMIT")
PORTAL_SESSION_MAX_QUEUE_MINUTES = env("PORTAL_SESSION_MAX_QUEUE_MINUTES")
#: The home page's one-click Start buttons (interactive/presets.py: "lab gpus=1 type=a100 hours=4;
#: ..."; checked at start-up, portal.E011); unset: PORTAL_SESSION_PRESETS_DEFAULT, empty: none.
PORTAL_SESSION_PRESETS = env("PORTAL_SESSION_PRESETS")
PORTAL_SESSION_PRESETS_DEFAULT = "lab hours=2; lab gpus=1 hours=4"
#: Job profiles (docs/profiles.md): the shared environment cache on the nodes, uv's path there, the
#: Python versions offered, CUDA version -> environment module (``12.4=cuda/12.4``; empty = none),
#: the container runtime ("" = none), the package index ("" = PyPI); API tokens' longest life (days).
PORTAL_ENV_CACHE_DIR = env("PORTAL_ENV_CACHE_DIR")
PORTAL_ENV_UV = env("PORTAL_ENV_UV")
PORTAL_ENV_PYTHONS = env("PORTAL_ENV_PYTHONS")
PORTAL_ENV_CUDA_MODULES = env("PORTAL_ENV_CUDA_MODULES")
PORTAL_CONTAINER_RUNTIME = env("PORTAL_CONTAINER_RUNTIME")
PORTAL_ENV_INDEX_URL = env("PORTAL_ENV_INDEX_URL")
PORTAL_TOKEN_MAX_DAYS = env("PORTAL_TOKEN_MAX_DAYS")

#: Site policy the sync keeps in Slurm (docs/policy.md; checked at start-up, portal.E030): per-person caps on PORTAL_USER_CAPS_QOS
#: ("" = not managed, "unlimited" = no cap), the small-job pool (teams/site_policy.py); the priority classes, high's GPUs per
#: team, scavenger's GraceTime, sessions' class ("" = default QOS, never preempted) (teams/priority_classes.py).
PORTAL_USER_CAPS_QOS = env("PORTAL_USER_CAPS_QOS")
PORTAL_USER_MAX_GPUS = env("PORTAL_USER_MAX_GPUS")
PORTAL_USER_MAX_SUBMIT_JOBS = env("PORTAL_USER_MAX_SUBMIT_JOBS")
PORTAL_SMALL_POOL_PARTITION = env("PORTAL_SMALL_POOL_PARTITION")
PORTAL_SMALL_POOL_MAX_GPUS = env("PORTAL_SMALL_POOL_MAX_GPUS")
PORTAL_SMALL_POOL_MAX_MINUTES = env("PORTAL_SMALL_POOL_MAX_MINUTES")
PORTAL_PRIORITY_CLASSES = env("PORTAL_PRIORITY_CLASSES")
PORTAL_HIGH_MAX_GPUS_PER_TEAM = env("PORTAL_HIGH_MAX_GPUS_PER_TEAM")
PORTAL_SCAVENGER_GRACE_SECONDS = env("PORTAL_SCAVENGER_GRACE_SECONDS")
PORTAL_SESSION_PRIORITY_CLASS = env("PORTAL_SESSION_PRIORITY_CLASS")
PORTAL_SNAPSHOT_INTERVAL = env("PORTAL_SNAPSHOT_INTERVAL")
PORTAL_SNAPSHOT_MAX_AGE = env("PORTAL_SNAPSHOT_MAX_AGE")
#: The poll's budget (slurm/poll_budget.py): bytes of one command's output, jobs in squeue, seconds of the whole poll
#: (0 = no limit). Past it the poll keeps the last good snapshot and says "cluster too big for the poll budget".
PORTAL_POLL_MAX_BYTES = env("PORTAL_POLL_MAX_BYTES")
PORTAL_POLL_MAX_JOBS = env("PORTAL_POLL_MAX_JOBS")
PORTAL_POLL_MAX_SECONDS = env("PORTAL_POLL_MAX_SECONDS")

#: GPU usage (gpuusage/): Prometheus's URL ("" = not measured here: no reads, no notices), the longest query (seconds), and when
#: a GPU counts as barely used (mean SM activity below this percent over the last this many minutes; ended jobs: jobs/figures.py).
PORTAL_PROMETHEUS_URL = env("PORTAL_PROMETHEUS_URL").rstrip("/")
PORTAL_PROMETHEUS_TIMEOUT = env("PORTAL_PROMETHEUS_TIMEOUT")
PORTAL_GPU_LOW_USE_PERCENT = env("PORTAL_GPU_LOW_USE_PERCENT")
PORTAL_GPU_LOW_USE_MINUTES = env("PORTAL_GPU_LOW_USE_MINUTES")
#: A running GPU session whose GPUs stay below PORTAL_GPU_LOW_USE_PERCENT SM activity this many minutes is
#: stopped (0 = never), with a warning on its card this many minutes before (interactive/gpu_idle.py).
PORTAL_GPU_IDLE_RECLAIM_MINUTES = env("PORTAL_GPU_IDLE_RECLAIM_MINUTES")
PORTAL_GPU_IDLE_WARN_MINUTES = env("PORTAL_GPU_IDLE_WARN_MINUTES")
PORTAL_BILLING_RATE = env("PORTAL_BILLING_RATE")  # "0.12 EUR" per billed unit-hour; "" = none (portal/billing.py)
#: /metrics (api/metrics.py): addresses that may read it directly, a bearer token that may read it from anywhere ("" = none).
PORTAL_METRICS_ALLOW = env("PORTAL_METRICS_ALLOW")
PORTAL_METRICS_TOKEN = env("PORTAL_METRICS_TOKEN")
#: The key of the trace export's user and account hashes (HMAC-SHA256, adoption/trace.py); "" = one derived from SECRET_KEY.
PORTAL_TRACE_SECRET = env("PORTAL_TRACE_SECRET")

#: Notifications' email (notifications/mail.py): Django's SMTP backend to this server (make dev runs a local sink on
#: 127.0.0.1:8025, notifications/sink.py), the sender, the portal's address in mails (links), and how long (seconds) a sender
#: holds a row before the sweep may send it again: above the send task's hard time limit (45 s).
EMAIL_BACKEND = "django.core.mail.backends.smtp.EmailBackend"
EMAIL_HOST = env("PORTAL_EMAIL_HOST")
EMAIL_PORT = env("PORTAL_EMAIL_PORT")
EMAIL_HOST_USER = env("PORTAL_EMAIL_USER")
EMAIL_HOST_PASSWORD = env("PORTAL_EMAIL_PASSWORD")
EMAIL_USE_TLS = env("PORTAL_EMAIL_USE_TLS")
EMAIL_TIMEOUT = env("PORTAL_EMAIL_TIMEOUT")
DEFAULT_FROM_EMAIL = env("PORTAL_EMAIL_FROM")
PORTAL_SITE_URL = env("PORTAL_SITE_URL")
PORTAL_NOTIFY_LEASE_SECONDS = env("PORTAL_NOTIFY_LEASE_SECONDS")

CELERY_BROKER_URL = PORTAL_REDIS_URL
CELERY_RESULT_BACKEND = None
CELERY_TASK_IGNORE_RESULT = True
CELERY_TASK_ACKS_LATE = True
CELERY_WORKER_PREFETCH_MULTIPLIER = 1
#: Celery's Django fixup closes the database connection before and after every task unless this is
#: set (a new PostgreSQL connection per job submission). With it, workers keep their connection as
#: web requests do: closed when unusable or older than CONN_MAX_AGE (portal/celery.py).
CELERY_DB_REUSE_MAX = 1000
CELERY_TASK_SOFT_TIME_LIMIT = 60
CELERY_TASK_TIME_LIMIT = 90
#: The snapshot poller has a queue (and in make dev a worker) of its own, so a backlog of submissions
#: waiting on an unreachable controller never delays the poll that tells pages so.
#: The images' availability check (images/availability.py) is the poller's too: a read of each cluster.
CELERY_TASK_ROUTES = {
    "jobs.tasks.snapshot_poll": {"queue": "poller"},
    "jobs.tasks.gpu_usage_poll": {"queue": "poller"},
    "images.tasks.images_availability_task": {"queue": "poller"},
    "images.tasks.images_cluster_check_task": {"queue": "poller"},
    "images.tasks.image_probe_task": {"queue": "poller"},
}


def _every(task: str, seconds: float) -> dict:
    """A beat entry run every ``seconds`` whose message expires after the same time: a run that
    could not start within its interval (a stalled worker, a backlog behind an outage) is dropped
    by the worker instead of piling up, so after any stall exactly one runs."""
    return {"task": task, "schedule": seconds, "options": {"expires": seconds}}


CELERY_BEAT_SCHEDULE = {
    "cluster-snapshot": _every("jobs.tasks.snapshot_poll", PORTAL_SNAPSHOT_INTERVAL),
    "gpu-usage": _every("jobs.tasks.gpu_usage_poll", PORTAL_SNAPSHOT_INTERVAL),
    "jobs-resend-stuck": _every("jobs.tasks.jobs_resend_stuck_task", 30.0),
    "sessions-cull-idle": _every("interactive.tasks.sessions_cull_idle_task", 60.0),
    #: Sessions checked against JupyterHub and what their cards show stored: cards never ask the hub (interactive/hub_check.py).
    "sessions-hub-check": _every("interactive.tasks.sessions_hub_check_task", PORTAL_SNAPSHOT_INTERVAL),
    "teams-sync": _every("teams.tasks.teams_sync_task", env("PORTAL_TEAMS_SYNC_INTERVAL")),
    "teams-usage": _every("teams.tasks.usage_refresh_task", env("PORTAL_USAGE_INTERVAL")),
    "notifications-sweep": _every("notifications.tasks.notifications_sweep_task", 30.0),
    "jobs-pending-notify": _every("jobs.tasks.jobs_pending_notify_task", 60.0),
    #: GPUs allocated and in total per cluster and type, from the snapshots (adoption/samples.py).
    "adoption-allocation-sample": _every("adoption.tasks.allocation_sample_task", 300.0),
    #: Whether each registered image is readable on each cluster (images/availability.py).
    "images-availability": _every("images.tasks.images_availability_task", PORTAL_IMAGE_CHECK_INTERVAL),
    "teams-monthly-report": _every("teams.tasks.team_reports_task", 3600.0),  # acts on the 1st (teams/report/send.py)
}
#: One scheduler however many ``celery beat`` processes run (a deploy, or by mistake): RedBeat keeps
#: the schedule in Redis and lets only the holder of its lock send tasks; a second beat waits for the
#: lock. A beat that dies without releasing it is replaced within the lock's timeout (seconds); the
#: holder renews it every loop (at most ``CELERY_BEAT_MAX_LOOP_INTERVAL`` s). portal.beat.Scheduler is
#: RedBeat that outlives a Redis restart (takes the lock and installs the schedule again).
CELERY_BEAT_SCHEDULER = "portal.beat.Scheduler"
CELERY_REDBEAT_REDIS_URL = PORTAL_REDIS_URL
CELERY_REDBEAT_KEY_PREFIX = "portal:redbeat"
CELERY_REDBEAT_LOCK_TIMEOUT = 30
CELERY_BEAT_MAX_LOOP_INTERVAL = 5

LOGGING = {
    "version": 1,
    "disable_existing_loggers": False,
    "formatters": {"plain": {"format": "%(asctime)s %(levelname)s %(name)s: %(message)s"}},
    "handlers": {"console": {"class": "logging.StreamHandler", "formatter": "plain"}},
    # A refused request (PermissionDenied) is one WARNING line, not a traceback: portal/request_log.py.
    "filters": {"refusals": {"()": "portal.request_log.RefusalLogFilter"}},
    "root": {"handlers": ["console"], "level": "INFO"},
    # Django's own "django" logger has a console handler in DEBUG; with propagation to root that
    # printed every line twice. Let it go to root only.
    "loggers": {
        "paramiko": {"level": "WARNING"},
        "django": {"handlers": [], "level": "INFO", "propagate": True},
        "django.request": {"filters": ["refusals"], "propagate": True},
    },
}
