"""JupyterHub and the portal agree on who someone is: the hub names its users only from the
portal's answer for issuer + sub. On the real stack: the dev IdP, the live portal, the real hub
(hub/jupyterhub_config.py with portal_hub.auth.PortalAuthenticator) and the real Slurm."""

from __future__ import annotations

from urllib.parse import urlparse

import pytest
import requests
from django.db import connection

from accounts.models import User
from audit.models import AuditEvent
from tests.e2e.test_browser_login import ARTIFACTS, browser_page, sign_in  # noqa: F401 (fixture)
from tests.sso import form_of, sso_login

from .conftest import squeue_session_jobs

pytestmark = [pytest.mark.integration, pytest.mark.timeout(300)]


def hub_sign_in(session: requests.Session, hub_url: str) -> requests.Response:
    """Open the hub with a browser-like session already signed in at the IdP (no password asked)."""
    return session.get(hub_url + "/hub/home", timeout=30)


def test_hub_user_is_named_by_the_portal_not_by_a_claim(hub_portal, portal_with_idp, oidc_idp):
    hub = hub_portal
    session, _ = sso_login(portal_with_idp, "alice")
    with oidc_idp.changed_claims("alice", preferred_username="bob"):  # alice edits her name claim at the IdP
        landed = hub_sign_in(session, hub.url)
    assert landed.status_code == 200 and landed.url == hub.url + "/hub/home", landed.url
    assert hub.api("GET", "/users/alice").status_code == 200
    assert hub.api("GET", "/users/bob").status_code == 404


def test_identity_waiting_for_an_admin_is_refused_by_the_hub(hub_portal, portal_with_idp):
    hub = hub_portal
    session, _ = sso_login(portal_with_idp, "erin")
    refused = hub_sign_in(session, hub.url)
    assert refused.status_code == 403 and "waiting for an administrator" in refused.text
    assert 'data-testid="go-to-portal"' in refused.text
    assert AuditEvent.objects.filter(action="hub.login_refused", new__code="link_pending").exists()


def test_sign_out_goes_through_the_hub_and_ends_its_session(hub_portal, portal_with_idp):
    hub = hub_portal
    session, page = sso_login(portal_with_idp, "alice")
    assert hub_sign_in(session, hub.url).url == hub.url + "/hub/home"
    action, fields = form_of(page.text, page.url, action="/accounts/logout/")
    step = session.post(action, data=fields, allow_redirects=False)
    assert step.headers["Location"] == hub.url + "/hub/logout"  # the hub first
    step = session.get(step.headers["Location"], allow_redirects=False)
    assert step.headers["Location"] == portal_with_idp + "/accounts/logout/done/"  # then back to the portal
    step = session.get(step.headers["Location"], allow_redirects=False)
    assert urlparse(step.headers["Location"]).path == "/session/end"  # then the IdP
    hub_again = session.get(hub.url + "/hub/home", allow_redirects=False, timeout=30)
    assert hub_again.status_code == 302 and "/hub/login" in hub_again.headers["Location"]  # the hub asks again


@pytest.mark.e2e
def test_impostor_with_alices_name_claim_cannot_reach_alices_hub(hub_portal, portal_with_idp, browser_page):  # noqa: F811
    """alice2 is a real IdP account whose preferred_username is 'alice' (another sub, no groups)."""
    hub = hub_portal
    sso_login(portal_with_idp, "alice")  # the real alice is a linked portal user
    page = browser_page
    page.goto(hub.url + "/hub/home")
    page.fill("input[name=username]", "alice2")
    page.fill("input[name=password]", "alice2")
    page.click("button[type=submit]")
    page.wait_for_selector("[data-testid=go-to-portal]")
    body = page.inner_text("body")
    assert "403" in body and "The portal does not know this sign-in" in body
    assert page.get_by_role("link", name="go to the portal").get_attribute("href") == portal_with_idp
    ARTIFACTS.mkdir(exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "e2e-hub-impostor-refused.png"), full_page=True)
    # Not signed in to the hub: no token page, no start of a server, with the browser's own cookies.
    page.goto(hub.url + "/hub/token")
    page.wait_for_selector("[data-testid=go-to-portal]")
    answer = page.request.post(
        hub.url + "/hub/api/users/alice/servers/sneaky", data="{}", headers={"Content-Type": "application/json"}
    )
    assert answer.status == 403
    alice_at_hub = hub.api("GET", "/users/alice")
    assert alice_at_hub.status_code == 404 or alice_at_hub.json()["servers"] == {}
    assert squeue_session_jobs("alice") == []  # no Slurm job runs as the victim
    attempts = AuditEvent.objects.filter(action="hub.login_refused", target__endswith="#test-alice-impostor")
    assert attempts.exists() and attempts.first().new == {"code": "unknown_identity", "claimed": "alice"}
    assert User.objects.filter(oidc_sub="test-alice-impostor").count() == 0
    connection.close()


@pytest.mark.e2e
def test_sign_out_after_the_idp_rotated_its_keys(hub_portal, portal_with_idp, oidc_idp, browser_page):  # noqa: F811
    hub = hub_portal
    page = browser_page
    sign_in(page, portal_with_idp, "alice", start="/sessions/", landed="[data-testid=start-session]")
    page.goto(hub.url + "/hub/home")  # signs in to the hub through the IdP without a prompt
    page.wait_for_url(hub.url + "/hub/home")
    assert page.locator("input[name=password]").count() == 0
    oidc_idp.restart_with_new_keys()  # the ID token the portal holds no longer verifies
    page.goto(portal_with_idp + "/sessions/")
    page.get_by_role("button", name="Sign out").click()
    page.wait_for_selector("[data-testid=signed-out]")
    assert page.url.startswith(portal_with_idp + "/"), page.url
    assert "could not validate" not in page.inner_text("body")
    page.screenshot(path=str(ARTIFACTS / "e2e-signed-out-after-key-rotation.png"), full_page=True)
    page.goto(hub.url + "/hub/home")  # the hub's session ended too: it sends the browser to sign in
    page.wait_for_selector("input[name=password]")
    assert urlparse(page.url).netloc == urlparse(oidc_idp.issuer).netloc
    connection.close()


def test_hub_signs_in_with_the_idp_clock_ahead(hub_portal, portal_with_idp, oidc_idp):
    """The hub verifies no ID token (the IdP's userinfo names the sub), so an IdP clock 30 s ahead,
    within the portal's leeway, signs in to both (clock skew, the hub side)."""
    hub = hub_portal
    with oidc_idp.clock_ahead(30):
        session, page = sso_login(portal_with_idp, "alice")
        assert 'data-testid="current-user"' in page.text
        landed = hub_sign_in(session, hub.url)  # the IdP's session from the portal's sign-in: no prompt
    assert landed.status_code == 200 and landed.url == hub.url + "/hub/home", landed.url
