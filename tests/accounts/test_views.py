"""Sign-in pages: no password form anywhere, and a clear page for every way sign-in can fail."""

from http import HTTPStatus
from urllib.parse import parse_qs, urlsplit

import pytest


@pytest.mark.django_db
def test_no_password_login_or_signup_urls(client):
    page = client.get("/accounts/login/")
    assert page.status_code == HTTPStatus.OK and b'type="password"' not in page.content
    assert client.get("/accounts/password/reset/").status_code == HTTPStatus.NOT_FOUND
    assert client.get("/accounts/signup/").status_code == HTTPStatus.FORBIDDEN
    # Posting credentials to the sign-in page does nothing but show the SSO button again.
    posted = client.post("/accounts/login/", {"login": "alice", "password": "x"})
    assert posted.status_code == HTTPStatus.OK and b'data-testid="sso-login"' in posted.content
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_unreachable_idp_gives_a_clear_page_not_a_500(client, settings, clean_cache):
    from portal.settings.base import socialaccount_providers
    from tests.conftest import free_port

    settings.PORTAL_OIDC = {**settings.PORTAL_OIDC, "issuer": f"http://127.0.0.1:{free_port()}"}
    settings.SOCIALACCOUNT_PROVIDERS = socialaccount_providers(settings.PORTAL_OIDC)
    page = client.post("/accounts/oidc/idp/login/")
    assert page.status_code == HTTPStatus.SERVICE_UNAVAILABLE
    assert b"identity provider (the sign-in service) could not be reached" in page.content


@pytest.mark.django_db
def test_tampered_callback_gives_a_clear_page(client):
    page = client.get("/accounts/oidc/idp/login/callback/?code=x&state=y")
    assert page.status_code == HTTPStatus.UNAUTHORIZED
    assert b"did not complete" in page.content and b'data-refusal="idp_error"' in page.content
    assert b"invalid or had expired" in page.content and b"(unknown)" not in page.content


@pytest.mark.django_db
def test_unknown_provider_is_404(client):
    assert client.post("/accounts/oidc/nope/login/").status_code == HTTPStatus.NOT_FOUND


@pytest.mark.django_db
def test_get_on_the_oidc_login_url_asks_to_continue(client):
    page = client.get("/accounts/oidc/idp/login/")
    assert page.status_code == HTTPStatus.OK
    assert b'data-testid="sso-continue"' in page.content and b'type="password"' not in page.content


@pytest.mark.django_db
def test_get_on_logout_asks_to_confirm(client, django_user_model):
    client.force_login(django_user_model.objects.create(username="alice"))
    page = client.get("/accounts/logout/")
    assert page.status_code == HTTPStatus.OK and b'data-testid="confirm-sign-out"' in page.content
    assert "_auth_user_id" in client.session  # still signed in


@pytest.mark.django_db
def test_logout_with_unreachable_idp_says_so(client, settings, django_user_model):
    from tests.conftest import free_port

    settings.PORTAL_OIDC = {**settings.PORTAL_OIDC, "issuer": f"http://127.0.0.1:{free_port()}"}
    settings.PORTAL_HUB_URL = ""  # no hub: a dev hub running on this machine must not take part
    client.force_login(django_user_model.objects.create(username="alice"))
    page = client.post("/accounts/logout/")
    assert page.status_code == HTTPStatus.OK and b"could not be reached" in page.content
    assert "_auth_user_id" not in client.session


@pytest.mark.django_db
def test_logout_with_hub_and_idp_unreachable_ends_the_portal_session_and_says_what_may_remain(
    client, settings, django_user_model
):
    from tests.conftest import free_port

    settings.PORTAL_OIDC = {**settings.PORTAL_OIDC, "issuer": f"http://127.0.0.1:{free_port()}"}
    settings.PORTAL_HUB_URL = f"http://127.0.0.1:{free_port()}"
    settings.PORTAL_HUB_API_URL = settings.PORTAL_HUB_URL + "/hub/api"
    client.force_login(django_user_model.objects.create(username="alice"))
    page = client.post("/accounts/logout/")
    assert "_auth_user_id" not in client.session  # the portal's session ended first
    html = page.content.decode()
    assert page.status_code == HTTPStatus.OK and 'data-testid="signed-out-page"' in html
    assert "JupyterHub could not be reached, so it may still have you signed in" in html
    assert 'data-testid="idp-not-signed-out"' in html
    assert "signed out of the portal and of JupyterHub" not in html


@pytest.mark.django_db
@pytest.mark.parametrize("fragment", ["/cluster/gpus/", "/jobs/table/", "/sessions/cards/"])
def test_htmx_fragment_after_session_end_signs_in_back_to_the_page(client, fragment):
    """A fragment's poll after the session ended reloads the page to sign-in; ``next`` is the page
    the browser shows (HX-Current-URL), not the fragment, and the sign-in page says why."""
    page = client.get(fragment, HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/jobs/?state=RUNNING")
    assert page.status_code == HTTPStatus.OK and page.content == b""
    target = urlsplit(page["HX-Redirect"])
    assert target.path == "/accounts/login/"
    assert parse_qs(target.query) == {"next": ["/jobs/?state=RUNNING"], "expired": ["1"]}
    sign_in = client.get(page["HX-Redirect"])
    assert b'data-testid="session-expired"' in sign_in.content
    assert b'name="next" value="/jobs/?state=RUNNING"' in sign_in.content


@pytest.mark.django_db
@pytest.mark.parametrize("current", ["http://elsewhere.example/jobs/", "", None])
def test_htmx_sign_in_redirect_never_goes_to_another_site_or_the_fragment(client, current):
    headers = {"HTTP_HX_REQUEST": "true"} | ({} if current is None else {"HTTP_HX_CURRENT_URL": current})
    page = client.get("/jobs/table/", **headers)
    assert parse_qs(urlsplit(page["HX-Redirect"]).query) == {"expired": ["1"]}  # home follows sign-in


@pytest.mark.django_db
def test_plain_sign_in_page_has_no_expiry_note(client):
    assert b"session-expired" not in client.get("/accounts/login/?next=/jobs/").content


@pytest.mark.django_db
def test_unlinked_identity_polling_a_fragment_reloads_the_page(client, django_user_model):
    from accounts.models import LinkState

    client.force_login(django_user_model.objects.create(username="unlinked-x", link_state=LinkState.PENDING))
    page = client.get("/jobs/table/", HTTP_HX_REQUEST="true", HTTP_HX_CURRENT_URL="http://testserver/jobs/")
    assert page.status_code == HTTPStatus.OK and page["HX-Refresh"] == "true"
    assert client.get("/jobs/").status_code == HTTPStatus.FORBIDDEN  # the reloaded page says why


@pytest.mark.django_db
def test_stale_form_of_a_signed_in_user_says_nothing_was_done_and_links_back(django_user_model):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create(username="alice"))
    page = client.post("/accounts/logout/", HTTP_REFERER="http://testserver/jobs/new/?profile=3")
    assert page.status_code == HTTPStatus.FORBIDDEN
    html = page.content.decode()
    assert "This page was out of date, so nothing was done" in html and 'data-refusal="stale_form"' in html
    assert 'href="/jobs/new/?profile=3" data-testid="stale-back">Back to the page<' in html
    assert "Back to sign-in" not in html and "/accounts/login/" not in html
    assert "_auth_user_id" in client.session  # the stale sign-out did nothing


@pytest.mark.django_db
@pytest.mark.parametrize("referer", ["http://evil.example/x", ""])
def test_stale_form_links_only_to_this_portal(django_user_model, referer):
    from django.test import Client

    client = Client(enforce_csrf_checks=True)
    client.force_login(django_user_model.objects.create(username="alice"))
    html = client.post("/accounts/logout/", HTTP_REFERER=referer).content.decode()
    assert 'href="/" data-testid="stale-back">Back to the portal<' in html and "evil" not in html


@pytest.mark.django_db
def test_stale_form_of_someone_signed_out_offers_sign_in_back_to_the_page():
    from django.test import Client

    page = Client(enforce_csrf_checks=True).post("/accounts/logout/", HTTP_REFERER="http://testserver/jobs/")
    assert page.status_code == HTTPStatus.FORBIDDEN
    assert 'href="/accounts/login/?next=%2Fjobs%2F" data-testid="stale-back">Sign in<' in page.content.decode()


@pytest.mark.django_db
@pytest.mark.parametrize(
    "url", ["/teams/%00/", "/teams/%00/usage.csv", "/audit/?target=%00", "/jobs/history/?state=%00", "/x%00y/"]
)
def test_nul_in_the_url_is_a_clear_400(client, django_user_model, url):
    client.force_login(django_user_model.objects.create(username="dana", is_staff=True))
    page = client.get(url)
    assert page.status_code == HTTPStatus.BAD_REQUEST and b"NUL character" in page.content


@pytest.mark.django_db
def test_error_pages_are_the_portals_own(client, django_user_model, settings):
    settings.DEBUG = False
    client.force_login(django_user_model.objects.create(username="bob"))
    missing = client.get("/jobs/00000000-0000-0000-0000-000000000000/")
    assert missing.status_code == HTTPStatus.NOT_FOUND and b'data-testid="error-page"' in missing.content
    assert b"No such job, or it is not yours." in missing.content
    forbidden = client.get("/audit/")
    assert forbidden.status_code == HTTPStatus.FORBIDDEN and b'data-testid="error-page"' in forbidden.content


@pytest.mark.django_db
@pytest.mark.parametrize(
    "username, link_state, display_name, email, said",
    [
        ("unlinked.abf60eff50153827", "pending", "Erin O'Neil", "erin@example.org", "Successfully signed in as Erin O'Neil."),
        ("unlinked.abf60eff50153827", "pending", "", "erin@example.org", "Successfully signed in as erin@example.org."),
        ("unlinked.abf60eff50153827", "refused", "", "", "Successfully signed in."),
        ("alice", "linked", "Alice Researcher", "alice@example.org", "Successfully signed in as Alice Researcher."),
        ("alice", "linked", "", "alice@example.org", "Successfully signed in as alice."),
    ],
)
def test_the_signed_in_message_names_the_person_never_the_unlinked_placeholder(
    rf, django_user_model, username, link_state, display_name, email, said
):
    """allauth's message after a sign-in (its template account/messages/logged_in.txt, as allauth
    adds it) names the person as the header does: an identity not linked yet by its display name or
    email, never by its placeholder username."""
    from allauth.account.adapter import get_adapter
    from allauth.core.context import request_context
    from django.contrib import messages
    from django.contrib.messages.storage.cookie import CookieStorage

    user = django_user_model.objects.create(username=username, link_state=link_state, display_name=display_name, email=email)
    request = rf.get("/")
    request.user, request._messages = user, CookieStorage(rf.get("/"))
    with request_context(request):
        get_adapter(request).add_message(request, messages.SUCCESS, "account/messages/logged_in.txt", {"user": user})
    assert [m.message for m in request._messages] == [said]


@pytest.mark.django_db
def test_a_refusal_with_its_own_reason_has_no_hint_about_admin_and_team_pages(client, django_user_model, settings):
    """Editing a team-mate's shared profile says why (only its owner changes it), without the general
    line about admin and team pages; a refusal without a reason keeps that line."""
    from django.core.exceptions import PermissionDenied
    from django.template.loader import render_to_string

    from profiles.models import Profile
    from teams.models import Membership, Role, Source, Team

    settings.DEBUG = False
    alice, bob = (django_user_model.objects.create(username=n, slurm_accounts=["vision"]) for n in ("alice", "bob"))
    vision = Team.objects.create(name="vision")
    for user in (alice, bob):
        Membership.objects.create(user=user, team=vision, role=Role.MEMBER, source=Source.ADMIN)
    profile = Profile.objects.create(owner=alice, name="digits", yaml="name: digits", spec={}, team=vision)
    client.force_login(bob)
    page = client.get(f"/profiles/{profile.pk}/edit/")
    assert page.status_code == HTTPStatus.FORBIDDEN and b'data-testid="error-page"' in page.content
    assert "Only the profile&#x27;s owner can change it." in page.content.decode()
    assert b"Admin pages are for" not in page.content and b'data-testid="forbidden-hint"' not in page.content
    bare = render_to_string("403.html", {"exception": str(PermissionDenied())})
    assert "This page or action is not available to you." in bare and 'data-testid="forbidden-hint"' in bare


@pytest.mark.parametrize(
    "exception, code, status",
    [
        ("connection", "idp_unreachable", HTTPStatus.SERVICE_UNAVAILABLE),
        ("skew", "clock_skew", HTTPStatus.SERVICE_UNAVAILABLE),
        ("key", "signing_key_unknown", HTTPStatus.SERVICE_UNAVAILABLE),
        (None, "idp_error", HTTPStatus.UNAUTHORIZED),
    ],
)
def test_each_failed_callback_names_its_cause(exception, code, status):
    """What allauth hands the adapter when the callback fails (the IdP's token endpoint down, the ID
    token's times or key) becomes a refusal that names it."""
    import requests

    from accounts.adapter import authentication_refusal
    from accounts.oidc.tokens import ClockSkew, SigningKeyUnknown

    raised = {
        "connection": requests.ConnectionError("refused"),
        "skew": ClockSkew(-90, 60),
        "key": SigningKeyUnknown("the ID token is signed with a key ('k9') that the sign-in service does not publish"),
        None: None,
    }[exception]
    refusal, answered = authentication_refusal("unknown", raised)
    assert (refusal.code, answered) == (code, status)
    if exception == "skew":
        assert "differ by 90 s (it is behind), more than the 60 s allowed" in refusal.message
