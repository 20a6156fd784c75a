"""Sign-out signs out of JupyterHub too, in Chromium on the real stack (dev IdP,
live portal, the project's hub): after the portal's Sign out, the hub's home page in the same browser
asks for sign-in, the hub's login cookie is gone from the browser and no longer valid on the server
(a copy of it is refused), and the signed-out page says what ended. With the IdP down, sign-out still
ends the portal's and the hub's logins first and says that the IdP's may remain."""

from __future__ import annotations

from urllib.parse import urlsplit

import pytest
import requests
from django.db import connection

from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401 (fixture)

pytestmark = [pytest.mark.integration, pytest.mark.e2e, pytest.mark.timeout(300)]

HUB_LOGIN_COOKIE = "jupyterhub-hub-login"


def signed_in_to_portal_and_hub(page, portal: str, hub) -> str:
    """Sign in to the portal, open the hub (SSO, no prompt); returns the hub's login cookie."""
    sign_in(page, portal, "alice", start="/sessions/", landed="[data-testid=start-session]")
    page.goto(hub.url + "/hub/home")
    page.wait_for_url(hub.url + "/hub/home")
    assert page.locator("input[name=password]").count() == 0
    cookie = next((c["value"] for c in page.context.cookies() if c["name"] == HUB_LOGIN_COOKIE), None)
    assert cookie, [c["name"] for c in page.context.cookies()]
    assert hub_home_with(hub, cookie).status_code == 200  # the cookie signs in, as a copy too
    return cookie


def hub_home_with(hub, cookie: str) -> requests.Response:
    return requests.get(hub.url + "/hub/home", cookies={HUB_LOGIN_COOKIE: cookie}, allow_redirects=False, timeout=30)


def sign_out(page, portal: str) -> None:
    page.goto(portal + "/sessions/")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_selector("[data-testid=signed-out]")


def test_sign_out_ends_the_hub_login_in_the_browser_and_on_the_server(hub_portal, portal_with_idp, oidc_idp, browser_page):  # noqa: F811
    hub, page = hub_portal, browser_page
    cookie = signed_in_to_portal_and_hub(page, portal_with_idp, hub)
    sign_out(page, portal_with_idp)
    said = page.get_by_test_id("signed-out").inner_text()
    assert "signed out of the portal and of JupyterHub" in said and "single sign-on session has ended" in said, said
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "e2e-signed-out-of-hub.png"), full_page=True)
    assert HUB_LOGIN_COOKIE not in [c["name"] for c in page.context.cookies()]
    refused = hub_home_with(hub, cookie)  # a copy of the old cookie: the login ended on the server
    assert refused.status_code == 302 and "/hub/login" in refused.headers["Location"], refused.status_code
    page.goto(hub.url + "/hub/home")  # the hub sends the browser to sign in, and the IdP asks
    page.wait_for_selector("input[name=password]")
    assert urlsplit(page.url).netloc == urlsplit(oidc_idp.issuer).netloc
    connection.close()


def test_sign_out_while_the_idp_is_down_ends_the_local_logins_first(hub_portal, portal_with_idp, oidc_idp, browser_page):  # noqa: F811
    hub, page = hub_portal, browser_page
    cookie = signed_in_to_portal_and_hub(page, portal_with_idp, hub)
    with oidc_idp.stopped():
        sign_out(page, portal_with_idp)
        assert page.get_by_test_id("signed-out-page").count() == 1
        said = page.get_by_test_id("signed-out").inner_text()
        assert "signed out of the portal and of JupyterHub" in said, said
        assert "could not be reached" in page.get_by_test_id("idp-not-signed-out").inner_text()
        page.screenshot(path=str(ARTIFACTS / "e2e-signed-out-idp-down.png"), full_page=True)
        page.goto(portal_with_idp + "/jobs/")  # the portal's session is over
        page.wait_for_selector("[data-testid=sso-login]")
        assert HUB_LOGIN_COOKIE not in [c["name"] for c in page.context.cookies()]
        refused = hub_home_with(hub, cookie)
        assert refused.status_code == 302 and "/hub/login" in refused.headers["Location"], refused.status_code
    connection.close()
