"""The hub's authenticator: the IdP proves who someone is (issuer + ``sub``); the portal says which
cluster account that identity is linked to. The hub never names a user from a claim.

Stock ``GenericOAuthenticator`` with ``username_claim = "preferred_username"`` let any IdP user who
set that claim to ``alice`` sign in to the hub as alice and start servers that Slurm ran as Unix user
alice. Here the hub user's name is the answer of the portal's ``POST /hub-internal/identity``
(``{"issuer", "sub", "claimed"}`` -> ``{"username"}``); an identity the portal does not know, or has
not linked, is refused with a 403 page that sends the person to the portal.
"""

from __future__ import annotations

import asyncio
import json

from jupyterhub.utils import new_token
from oauthenticator.generic import GenericOAuthenticator
from oauthenticator.oauth2 import OAuthLogoutHandler
from tornado import web
from tornado.httpclient import AsyncHTTPClient, HTTPClientError, HTTPRequest
from traitlets import Float, Unicode


class PortalLogoutHandler(OAuthLogoutHandler):
    """``/hub/logout`` (the portal's Sign out sends the browser here): JupyterHub clears this
    browser's hub cookies and deletes the API tokens of its session; this also ends the login
    server-side. The hub's login cookie holds the user's ``cookie_id``, which stays valid after a
    logout, so a copy of the cookie (copied out of the browser, or stolen) still signed in; a new
    ``cookie_id`` makes every earlier hub login cookie of this user invalid. Other browsers of the
    same user then sign in to the hub again through the IdP, without a prompt while their IdP
    session lasts."""

    async def handle_logout(self):
        await super().handle_logout()
        user = self.current_user
        if user is not None:
            user.cookie_id = new_token()
            self.db.commit()
            self.log.info("hub login of %s ended server-side (new cookie id)", user.name)


class PortalAuthenticator(GenericOAuthenticator):
    """``GenericOAuthenticator`` whose users are named by the portal. Configuration
    (``c.PortalAuthenticator.*``): ``portal_url``/``portal_token`` (the portal's hub endpoints and
    their shared secret), ``issuer`` (the IdP's issuer, as the portal stores it) and the usual
    OAuth client settings. ``username_claim`` is ``sub``: only a placeholder until the portal answers.

    No ID token is verified here (the user's claims come from the IdP's userinfo endpoint with the
    hub's own access token), so the IdP's clock and signing keys do not matter to the hub."""

    logout_handler = PortalLogoutHandler

    portal_url = Unicode("http://127.0.0.1:8000", help="The portal's base URL, as the hub reaches it.").tag(config=True)
    portal_token = Unicode("", help="Shared secret for the portal's /hub-internal/ endpoints.").tag(config=True)
    issuer = Unicode("", help="The IdP's issuer URL (the 'iss' the portal stored for its users).").tag(config=True)
    portal_timeout = Float(10.0, help="Seconds to wait for the portal's answer.").tag(config=True)

    async def portal_username(self, *, sub: str, claimed: str) -> str:
        """The cluster user name the portal linked to ``issuer`` + ``sub``. Raises
        ``tornado.web.HTTPError`` 403 (the portal refuses: unknown, waiting for an admin, refused,
        disabled) or 503 (the portal cannot be asked)."""
        request = HTTPRequest(
            self.portal_url.rstrip("/") + "/hub-internal/identity",
            method="POST",
            headers={"Authorization": f"Bearer {self.portal_token}", "Content-Type": "application/json"},
            body=json.dumps({"issuer": self.issuer, "sub": sub, "claimed": claimed}),
            request_timeout=self.portal_timeout,
        )
        try:
            response = await AsyncHTTPClient().fetch(request)
            username = json.loads(response.body)["username"]
        except HTTPClientError as exc:
            if exc.code == 403 and exc.response is not None:
                errors = json.loads(exc.response.body or b"{}").get("errors", [])
                message = " ".join(e.get("message", "") for e in errors) or "The portal does not know this sign-in."
                self.log.warning("hub sign-in refused by the portal for sub=%s (claimed %r): %s", sub, claimed, message)
                raise web.HTTPError(403, message) from None
            raise web.HTTPError(503, f"The portal could not check who you are (HTTP {exc.code}); try again shortly.") from None
        except (OSError, asyncio.TimeoutError, ValueError, KeyError) as exc:
            raise web.HTTPError(
                503, f"The portal could not be reached to check who you are ({exc}); try again shortly."
            ) from None
        if not isinstance(username, str) or not username:
            raise web.HTTPError(503, "The portal gave no user name for this sign-in; try again shortly.")
        return username

    async def update_auth_model(self, auth_model: dict) -> dict:
        """Replace the placeholder name with the portal's answer for the IdP's ``sub`` (from the
        userinfo the hub fetched itself with its own access token) and mark the model as linked."""
        user_info = auth_model["auth_state"][self.user_auth_state_key]
        sub = user_info.get("sub")
        if not isinstance(sub, str) or not sub:
            raise web.HTTPError(403, "The identity provider sent no 'sub' for this sign-in.")
        claimed = user_info.get("preferred_username")
        auth_model["name"] = await self.portal_username(sub=sub, claimed=claimed if isinstance(claimed, str) else "")
        auth_model["auth_state"]["portal_linked"] = True
        return auth_model

    async def check_allowed(self, username: str, auth_model: dict | None) -> bool:
        """Exactly the identities the portal linked (see :meth:`update_auth_model`) may sign in."""
        return bool(auth_model and auth_model.get("auth_state", {}).get("portal_linked"))
