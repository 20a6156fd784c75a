"""Audit cases of profiles, API tokens, sign-in and linking (:mod:`accounts`), and Django's admin."""

from __future__ import annotations

from types import SimpleNamespace

from django.test import RequestFactory

from tests.audit.cases_teams import make_team
from tests.audit.world import ISS, World, read
from tests.fakes import sacctmgr_user_answer, sacctmgr_user_argv


# --- profiles and tokens ---------------------------------------------------------------------------
def _profile_text(name: str = "train-digits") -> str:
    from tests.profiles.conftest import EXAMPLE_TEXT

    return EXAMPLE_TEXT.replace("name: train-digits", f"name: {name}")


def _profile(w: World):
    from profiles.models import Profile

    make_team(members=[w.alice])
    return Profile.objects.create(owner=w.alice, name="old-name", yaml=_profile_text("old-name"), spec={})


def _profile_values(profile) -> dict:
    row = read(profile, "name", "team__name")
    return {"name": row["name"], "team": row["team__name"]} if row else {}


def profile_save_new(w: World):
    from profiles.services import profile_save

    make_team(members=[w.alice])
    profile = profile_save(user=w.alice, text=_profile_text())
    return {}, _profile_values(profile)


def profile_save_change(w: World):
    from profiles.services import profile_save

    profile = _profile(w)
    before = _profile_values(profile)
    profile_save(user=w.alice, text=_profile_text("new-name"), team="vision", profile=profile)
    return before, _profile_values(profile)


def profile_share(w: World):
    from profiles.services import profile_share

    profile = _profile(w)
    before = read(profile, "team__name")
    profile_share(profile=profile, by=w.alice, team="vision")
    return {"team": before["team__name"]}, {"team": read(profile, "team__name")["team__name"]}


def profile_delete(w: World):
    from profiles.services import profile_delete

    profile = _profile(w)
    before = read(profile, "name")
    profile_delete(profile=profile, by=w.alice)
    return before, read(profile, "name")


def token_create(w: World):
    from api.tokens import token_create

    token, _ = token_create(user=w.alice, name="laptop", scopes=["read", "jobs"], days=30)
    return {}, read(token, "name", "scopes") | {"days": 30}  # days: as asked (the row holds expires_at)


def token_revoke(w: World):
    from api.tokens import token_create, token_revoke

    token, _ = token_create(user=w.alice, name="laptop", scopes=["read"], days=30)
    before = read(token, "name", "revoked_at")
    token_revoke(token=token, by=w.alice)
    return before, read(token, "revoked_at")


# --- sign-in, linking, the hub's identity check ----------------------------------------------------
def _host_knows(w: World, user: str, accounts: str = "") -> None:
    w.slurm.expect(
        ["env", "LC_ALL=C", "id", "--", user], stdout=f"uid=1005({user}) gid=1006({user}) groups=1006({user}),1001(slurmusers)\n"
    )
    w.slurm.expect(sacctmgr_user_argv(user), stdout=sacctmgr_user_answer(accounts))


def _social_login(w: World, claims: dict, existing):
    """allauth's ``pre_social_login`` hook as the OIDC callback calls it (the portal's adapter)."""
    from accounts.adapter import PortalSocialAccountAdapter

    sociallogin = SimpleNamespace(
        account=SimpleNamespace(extra_data={"id_token": claims}), user=existing, is_existing=existing is not None
    )
    request = RequestFactory().get("/accounts/oidc/idp/login/callback/")
    PortalSocialAccountAdapter().pre_social_login(request, sociallogin)


def _pending(name: str = "erin"):
    from accounts.models import LinkState, User
    from accounts.services import unlinked_username

    return User.objects.create(
        username=unlinked_username(ISS, f"s-{name}"),
        oidc_issuer=ISS,
        oidc_sub=f"s-{name}",
        link_state=LinkState.PENDING,
        requested_username=name,
        email=f"{name}@example.org",
    )


def login_refused_by_rule(w: World):
    """A refused identity signs in again: the portal's rule refuses it (``link_refused``)."""
    from allauth.core.exceptions import ImmediateHttpResponse
    from django.conf import settings

    from accounts.models import LinkState

    erin = _pending()
    erin.link_state = LinkState.REFUSED
    erin.save()
    conf = settings.PORTAL_OIDC
    claimed = {c: "erin" for c in (conf["username_claim"], conf["link_claim"]) if c}
    try:
        _social_login(w, {"iss": ISS, "sub": "s-erin", **claimed}, erin)
    except ImmediateHttpResponse:
        pass
    else:
        raise AssertionError("the sign-in was not refused")
    return {}, {"code": "link_refused", "claimed": claimed}


def login_refused_inactive(w: World):
    from accounts.adapter import PortalAccountAdapter

    w.alice.is_active = False
    w.alice.save()
    PortalAccountAdapter().respond_user_inactive(RequestFactory().get("/"), w.alice)
    return {}, {"code": "inactive", "detail": ""}


def user_admin_claims(w: World):
    """alice (not an admin) signs in with the admin group in her ``groups`` claim."""
    _host_knows(w, "alice", accounts="vision\n")
    before = read(w.alice, "is_staff")
    _social_login(w, {"iss": ISS, "sub": "s-alice", "groups": ["portal-admins"]}, w.alice)
    return {"is_admin": before["is_staff"]}, {
        "is_admin": read(w.alice, "is_staff")["is_staff"],
        "admin_groups": ["portal-admins"],
    }


def account_link_approved(w: World):
    from accounts.services import account_link_approve

    erin = _pending()
    before = read(erin, "link_state", "username", "requested_username")
    _host_knows(w, "erin")
    account_link_approve(user=erin, username="erin", by=w.dana)
    after = read(erin, "link_state", "username")
    return before, after | {"identity": f"identity:{ISS}#s-erin"}


def account_link_refused(w: World):
    from accounts.services import account_link_refuse

    erin = _pending()
    before = read(erin, "link_state")
    account_link_refuse(user=erin, by=w.dana)
    return before, read(erin, "link_state", "requested_username")


def login_signed_in(w: World):
    from accounts.services import login_followups

    login_followups(user=w.alice)
    return {}, {"identity": f"identity:{ISS}#s-alice", "link_state": "linked", "is_admin": False}


def account_link_requested(w: World):
    from accounts.services import login_followups

    erin = _pending()
    login_followups(user=erin)
    return {}, {"requested_username": "erin", "email": "erin@example.org", "email_verified": False}


def hub_login_refused(w: World):
    from accounts.claims import LoginRefused
    from accounts.services import hub_identity

    try:
        hub_identity(issuer=ISS, sub="s-nobody", claimed="mallory")
    except LoginRefused:
        pass
    else:
        raise AssertionError("the hub sign-in was not refused")
    return {}, {"code": "unknown_identity", "claimed": "mallory"}


# --- Django's admin (audit/admin.py, accounts/admin.py) ------------------------------------------
def _post(w: World, url: str, data: dict) -> None:
    from http import HTTPStatus

    answer = w.admin.post(url, data)
    assert answer.status_code == HTTPStatus.FOUND, answer.content.decode()[:2000]


def admin_add(w: World):
    from django.contrib.auth.models import Group

    _post(w, "/admin/auth/group/add/", {"name": "operators"})
    return {}, read(Group.objects.get(), "name")


def admin_change(w: World):
    from django.contrib.auth.models import Group

    group = Group.objects.create(name="operators")
    before = read(group, "name")
    _post(w, f"/admin/auth/group/{group.pk}/change/", {"name": "ops"})
    return before, read(group, "name")


def admin_change_password(w: World):
    """A password set through the admin's own form: a secret, so the row says only that it changed."""
    from audit.admin import HIDDEN

    password = "N3w-long-pass!"
    _post(w, f"/admin/accounts/user/{w.alice.pk}/password/", {"password1": password, "password2": password})
    return {"password": HIDDEN}, {"password": "(set)"}


def admin_delete(w: World):
    from django.contrib.auth.models import Group

    group = Group.objects.create(name="operators")
    before = read(group, "id", "name") | {"permissions": []}
    _post(w, f"/admin/auth/group/{group.pk}/delete/", {"post": "yes"})
    assert read(group, "name") == {}
    return before, {}
