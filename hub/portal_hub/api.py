"""A narrower ``/hub/api/batchspawner`` handler.

batchspawner 1.3's handler sets *any* spawner attribute named in the JSON the single-user server
posts with its token (``setattr(spawner, key, value)`` for every key the spawner has). That token is
in the user's job, so the user could set ``exec_prefix``, ``batch_script`` or ``settings`` on the
spawner that the hub runs with sudo rights. This handler accepts only ``{"port": <1..65535>}``, for
the server that owns the token. :func:`install` puts it at that route (the hub no longer uses
batchspawner's spawner).
"""

from __future__ import annotations

import json

from jupyterhub.apihandlers import APIHandler, default_handlers
from tornado import web

ROUTE = r"/api/batchspawner"


class PortOnlyBatchSpawnerHandler(APIHandler):
    """POST ``{"port": int}`` from a single-user server: records the port it listens on."""

    @web.authenticated
    def post(self):
        token = self.get_auth_token()
        spawner = next((s for s in self.current_user.spawners.values() if s.api_token == token), None)
        if spawner is None:
            raise web.HTTPError(403, "This token belongs to no server of this user.")
        data = self.get_json_body() or {}
        port = data.get("port")
        if set(data) != {"port"} or not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
            raise web.HTTPError(400, 'Only {"port": <1-65535>} may be sent here.')
        spawner.port = port
        if getattr(spawner, "port_reported", None) is not None:
            spawner.port_reported.set()  # PortalSlurmSpawner.start waits on it
        self.set_status(201)
        self.finish(json.dumps({"message": "port recorded"}))


def install() -> None:
    """Put this handler in JupyterHub's handler list at batchspawner's route (the single-user
    servers post their port there: the portal's session extension, batchspawner's wrapper in a
    site image), in place of batchspawner's own should it be imported."""
    default_handlers[:] = [h for h in default_handlers if h[0] != ROUTE]
    default_handlers.append((ROUTE, PortOnlyBatchSpawnerHandler))
