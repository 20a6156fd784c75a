"""Drive the real authorization-code login with ``requests`` (no browser)."""

from __future__ import annotations

import requests
from bs4 import BeautifulSoup


def form_of(html: str, base: str, action: str | None = None) -> tuple[str, dict]:
    """The first form on a page (or the first whose action is ``action``): (absolute action URL,
    {field: value})."""
    soup = BeautifulSoup(html, "html.parser")
    form = soup.find("form", action=action) if action else soup.find("form")
    assert form is not None, f"no form on page: {html[:500]}"
    target = requests.compat.urljoin(base, form.get("action") or base)
    fields = {i["name"]: i.get("value", "") for i in form.find_all("input") if i.get("name")}
    return target, fields


def sso_login(portal: str, username: str, password: str | None = None) -> tuple[requests.Session, requests.Response]:
    """Sign in to the portal through the IdP's login form; returns the session and the final page."""
    session = requests.Session()
    page = session.get(f"{portal}/accounts/login/")
    action, fields = form_of(page.text, page.url)
    at_idp = session.post(action, data=fields)  # portal -> IdP authorize -> IdP login form
    if "password" not in at_idp.text:  # already signed in at the IdP: redirected straight back
        return session, at_idp
    action, fields = form_of(at_idp.text, at_idp.url)
    fields.update(username=username, password=password or username)
    return session, session.post(action, data=fields)  # IdP -> callback -> portal home
