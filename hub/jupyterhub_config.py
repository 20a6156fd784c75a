"""JupyterHub configuration for the GPU portal (sessions are JupyterHub named servers:
docs/decisions.md#sessions-are-jupyterhub-named-servers). Every setting comes from the environment
(scripts/hub.sh sets the dev defaults; production sets its own):

PORTAL_HUB_URL          public base URL of the hub (proxy), default http://127.0.0.1:8001
PORTAL_HUB_API_PORT     the hub's own API port on 127.0.0.1, default 8081
PORTAL_HUB_PROXY_API_PORT  configurable-http-proxy's API port on 127.0.0.1, default 8002 (the proxy
                        runs on its own: scripts/hub.sh starts it, listening on PORTAL_HUB_URL's port)
PORTAL_HUB_PROXY_TOKEN  the proxy's API token, default PORTAL_HUB_TOKEN + "-proxy"
PORTAL_HUB_STATE_DIR    sqlite database and cookie secret (must be writable by the hub's user)
PORTAL_HUB_TOKEN        the portal service's API token (also the secret of the portal's /hub-internal/)
PORTAL_URL              the portal's base URL as the hub reaches it, default http://127.0.0.1:8000
PORTAL_PUBLIC_URL       the portal's URL in people's browsers (default PORTAL_URL)
OIDC_ISSUER, PORTAL_HUB_OIDC_CLIENT_ID, PORTAL_HUB_OIDC_CLIENT_SECRET
                        the same IdP as the portal; hub users are named by the portal (issuer + sub)
PORTAL_JUPYTER_VENV     the venv session jobs run (what each session kind adds, e.g. code-server's
                        directory, comes from the portal: interactive/kinds.py)
PORTAL_HUB_NODE_ADDRESSES  "node1=127.0.0.1,node2=127.0.0.1": Slurm node name -> address the hub reaches
PORTAL_SESSION_START_TIMEOUT  seconds from a session's Slurm job running to its server answering,
                        default 300 (time in the queue is not counted: the portal's
                        PORTAL_SESSION_MAX_QUEUE_MINUTES bounds that)
"""

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# runtimes/ (the container command lines, pure Python: imports no portal app) for sessions in a site
# image; appended, so nothing in the repository shadows a module the hub imports.
sys.path.append(os.path.dirname(HERE))

from portal_hub import api as portal_api  # noqa: E402

portal_api.install()  # /hub/api/batchspawner: the servers report their port there


def env(name, default=None):
    value = os.environ.get(name, default)
    if value is None:
        raise SystemExit(f"jupyterhub_config.py: set {name} in the environment")
    return value


c = get_config()  # noqa: F821 (provided by JupyterHub)

hub_url = env("PORTAL_HUB_URL", "http://127.0.0.1:8001").rstrip("/")
issuer = env("OIDC_ISSUER", "http://127.0.0.1:8800").rstrip("/")
state_dir = env("PORTAL_HUB_STATE_DIR")
portal_token = env("PORTAL_HUB_TOKEN")

# --- network: everything on 127.0.0.1 ------------------------------------------------------------
c.JupyterHub.bind_url = hub_url
c.JupyterHub.hub_ip = "127.0.0.1"
c.JupyterHub.hub_port = int(env("PORTAL_HUB_API_PORT", "8081"))
c.JupyterHub.hub_connect_ip = "127.0.0.1"
# configurable-http-proxy runs as a process of its own (scripts/hub.sh starts it with the same ports
# and token), so that restarting or upgrading the hub leaves open notebook and VS Code connections up;
# the hub only talks to its API, and finds its routes there when it comes back.
c.ConfigurableHTTPProxy.should_start = False
c.JupyterHub.cleanup_proxy = False
c.ConfigurableHTTPProxy.api_url = f"http://127.0.0.1:{env('PORTAL_HUB_PROXY_API_PORT', '8002')}"
c.ConfigurableHTTPProxy.auth_token = env("PORTAL_HUB_PROXY_TOKEN", portal_token + "-proxy")
c.JupyterHub.db_url = f"sqlite:///{os.path.join(state_dir, 'jupyterhub.sqlite')}"
c.JupyterHub.cookie_secret_file = os.path.join(state_dir, "jupyterhub_cookie_secret")
c.JupyterHub.pid_file = os.path.join(state_dir, "jupyterhub.pid")
c.JupyterHub.cleanup_servers = False  # a hub restart must not end running sessions
c.JupyterHub.allow_named_servers = True
# The portal reads the same variable (settings.PORTAL_SESSION_LIMIT) and refuses a start past it in its own words.
c.JupyterHub.named_server_limit_per_user = int(env("PORTAL_SESSION_LIMIT", "4"))
# Sessions are started from the portal (its form checks the options); the hub's own home page is
# still there for "Stop" and tokens, but landing on the hub sends people to the portal's Sessions page.
c.JupyterHub.default_url = env("PORTAL_PUBLIC_URL", env("PORTAL_URL", "http://127.0.0.1:8000")).rstrip("/") + "/sessions/"

# --- login: the IdP proves who someone is; the portal says which cluster account that is --------
# No claim names a hub user: portal_hub.auth.PortalAuthenticator asks the portal for the account it
# linked to the identity (issuer + sub) and refuses identities the portal does not know or has not
# linked, with a page that sends them to the portal.
portal_public_url = env("PORTAL_PUBLIC_URL", env("PORTAL_URL", "http://127.0.0.1:8000")).rstrip("/")
c.JupyterHub.authenticator_class = "portal_hub.auth.PortalAuthenticator"
c.PortalAuthenticator.portal_url = env("PORTAL_URL", "http://127.0.0.1:8000")
c.PortalAuthenticator.portal_token = portal_token
c.PortalAuthenticator.issuer = issuer
c.PortalAuthenticator.client_id = env("PORTAL_HUB_OIDC_CLIENT_ID", "jupyterhub")
c.PortalAuthenticator.client_secret = env("PORTAL_HUB_OIDC_CLIENT_SECRET")
c.PortalAuthenticator.oauth_callback_url = f"{hub_url}/hub/oauth_callback"
c.PortalAuthenticator.authorize_url = f"{issuer}/auth"
c.PortalAuthenticator.token_url = f"{issuer}/token"
c.PortalAuthenticator.userdata_url = f"{issuer}/me"
c.PortalAuthenticator.scope = ["openid", "profile", "email"]
c.PortalAuthenticator.username_claim = "sub"  # a placeholder until the portal answers
c.PortalAuthenticator.login_service = "your institution's sign-in"
# The hub's /hub/logout clears the hub's cookies, then hands the browser back to the portal, which
# ends the IdP session (the portal's "Sign out" goes through here first).
c.PortalAuthenticator.logout_redirect_url = portal_public_url + "/accounts/logout/done/"
c.Authenticator.auto_login = True
c.JupyterHub.template_paths = [os.path.join(HERE, "templates")]
c.JupyterHub.template_vars = {"portal_public_url": portal_public_url}

# --- the portal as a service: starts and stops named servers for users --------------------------
c.JupyterHub.services = [{"name": "portal", "api_token": portal_token}]
c.JupyterHub.load_roles = [
    {
        "name": "portal-service",
        "description": "Create hub users, start/stop their servers, read their servers' state and progress",
        # admin:users: create a user the first time they start a session from the portal;
        # servers: start/stop (and read) named servers. Nothing else (no access:servers: the portal
        # never talks to a user's JupyterLab).
        "scopes": ["admin:users", "servers"],
        "services": ["portal"],
    }
]

# --- the spawner --------------------------------------------------------------------------------
c.JupyterHub.spawner_class = "portal_hub.spawner.PortalSlurmSpawner"
c.PortalSlurmSpawner.portal_url = env("PORTAL_URL", "http://127.0.0.1:8000")
c.PortalSlurmSpawner.portal_token = portal_token
c.PortalSlurmSpawner.jupyter_venv = env("PORTAL_JUPYTER_VENV", "/opt/gpuportal/jupyter")
c.PortalSlurmSpawner.daemon_resolver = dict(
    pair.split("=", 1) for pair in env("PORTAL_HUB_NODE_ADDRESSES", "").split(",") if "=" in pair
)
# Waiting in the Slurm queue is not a failure: a session waits up to the portal's deadline
# (PORTAL_SESSION_MAX_QUEUE_MINUTES, on the card); this timeout counts only from the job running to
# the server answering. The hub's start_timeout is set per start to cover both.
c.PortalSlurmSpawner.server_start_timeout = int(env("PORTAL_SESSION_START_TIMEOUT", "300"))
c.PortalSlurmSpawner.http_timeout = 120
c.PortalSlurmSpawner.poll_interval = int(env("PORTAL_HUB_POLL_INTERVAL", "30"))  # reads the portal's snapshot, not Slurm
c.Spawner.debug = os.environ.get("PORTAL_HUB_DEBUG") == "1"
c.JupyterHub.log_level = "DEBUG" if os.environ.get("PORTAL_HUB_DEBUG") == "1" else "INFO"
