"""Development: the dev IdP from ``idp/`` and the local cluster from ``cluster/`` are the defaults."""

from .base import *  # noqa: F401,F403
from .base import BASE_DIR, PORTAL_CLUSTERS_FILE, PORTAL_OIDC, env, socialaccount_providers

#: The development settings (and the tests'): public default secrets are accepted (portal/secrets.py).
PORTAL_ENVIRONMENT = "development"

#: The two local clusters of cluster/up.sh (22.05 and 24.11) unless the environment names a file.
PORTAL_CLUSTERS_FILE = PORTAL_CLUSTERS_FILE or str(BASE_DIR / "cluster" / "clusters.toml")

#: The local clusters' small-job pool (node3 / g2, whose QOS "small" cluster/up.sh limits to 1 GPU per job):
#: managed and shown, so the job form refuses a job the pool would keep pending forever. Set
#: PORTAL_SMALL_POOL_PARTITION= (empty) to manage no pool, as elsewhere.
PORTAL_SMALL_POOL_PARTITION = env("PORTAL_SMALL_POOL_PARTITION", default="small")

#: The local cluster's interactive partition (node1: 4 A100, 8 CPUs) gets these Start buttons unless
#: PORTAL_SESSION_PRESETS says otherwise.
PORTAL_SESSION_PRESETS_DEFAULT = "lab gpus=1 type=a100 hours=4; lab hours=2; vscode gpus=1 type=a100 hours=4"

# The portal's own 404 and 500 pages, as in production; PORTAL_DEBUG=true for Django's debug pages.
DEBUG = env("PORTAL_DEBUG")
# whitenoise serves static/ straight from the app folders (no collectstatic) under gunicorn too.
WHITENOISE_USE_FINDERS = True
WHITENOISE_AUTOREFRESH = True

#: The dev IdP of ``idp/dev-config.json`` unless the environment names another one.
PORTAL_DEV_OIDC = {
    "issuer": "http://127.0.0.1:8800",
    "client_id": "portal",
    "client_secret": "portal-dev-secret",
    "name": "Dev IdP",
    # idp/users.json plays the site directory: its posix_username claims are not user-editable.
    "link_claim": PORTAL_OIDC["link_claim"] or "posix_username",
}
if not PORTAL_OIDC["issuer"]:
    PORTAL_OIDC = {**PORTAL_OIDC, **PORTAL_DEV_OIDC}
SOCIALACCOUNT_PROVIDERS = socialaccount_providers(PORTAL_OIDC)

from .base import PORTAL_HUB_TOKEN  # noqa: E402

#: The dev hub (scripts/hub.sh) uses the same public dev value.
PORTAL_HUB_TOKEN = PORTAL_HUB_TOKEN or "dev-hub-token-not-secret"
