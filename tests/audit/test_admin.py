"""Edits made in Django's admin are audited (audit/admin.py): each add, change and delete of a row,
with the old and new values, through the admin's real forms; secrets never written; the audit page
shows them; and every ModelAdmin registered on the site, third-party ones included, is audited."""

from __future__ import annotations

from http import HTTPStatus

import pytest
from bs4 import BeautifulSoup
from django.contrib import admin
from django.contrib.auth.models import Group

from audit.admin import HIDDEN, AuditedModelAdmin
from audit.models import AuditEvent

pytestmark = pytest.mark.django_db


def form_fields(html: str) -> dict:
    """The admin change form's fields as a browser would post them (unchecked boxes left out)."""
    form = BeautifulSoup(html, "html.parser").find("form", id=lambda v: v and v.endswith("_form"))
    fields: dict = {}
    for node in form.find_all(["input", "select", "textarea"]):
        name = node.get("name")
        if not name or node.get("type") in ("submit", "button") or node.has_attr("disabled"):
            continue
        if node.get("type") == "checkbox":
            if node.has_attr("checked"):
                fields.setdefault(name, []).append(node.get("value", "on"))
        elif node.name == "select":
            fields[name] = [o.get("value") for o in node.find_all("option") if o.has_attr("selected")]
        elif node.name == "textarea":
            fields[name] = node.text
        else:
            fields[name] = node.get("value", "")
    return fields


@pytest.fixture
def admin_client(client, django_user_model):
    dana = django_user_model.objects.create(username="dana", is_staff=True, is_superuser=True)
    client.force_login(dana)
    return client, dana


def test_every_registered_model_admin_is_audited():
    assert admin.site._registry, "no ModelAdmin registered"
    unaudited = [m._meta.label for m, a in admin.site._registry.items() if not isinstance(a, AuditedModelAdmin)]
    assert unaudited == []


def test_a_user_changed_in_the_admin_has_an_audit_row_with_old_and_new(admin_client, django_user_model):
    client, dana = admin_client
    alice = django_user_model.objects.create(username="alice", display_name="Alice", is_active=True)
    alice.set_password("old-secret")
    alice.save()
    url = f"/admin/accounts/user/{alice.pk}/change/"
    fields = form_fields(client.get(url).content.decode())
    fields.pop("is_active")  # untick "Active"
    fields["display_name"] = "Alice R."
    answer = client.post(url, fields)
    assert answer.status_code == HTTPStatus.FOUND, answer.content.decode()[:3000]
    row = AuditEvent.objects.get(action="admin.change")
    assert (row.actor, row.target) == (dana, "user:alice")
    assert row.old == {"display_name": "Alice", "is_active": True}
    assert row.new == {"display_name": "Alice R.", "is_active": False}
    # A password set through the admin's own form is recorded as changed, never its value.
    password = "N3w-long-pass!"
    answer = client.post(f"/admin/accounts/user/{alice.pk}/password/", {"password1": password, "password2": password})
    assert answer.status_code == HTTPStatus.FOUND
    row = AuditEvent.objects.filter(action="admin.change").latest("id")
    assert (row.target, row.old, row.new) == ("user:alice", {"password": HIDDEN}, {"password": "(set)"})
    assert not AuditEvent.objects.filter(old__icontains="old-secret").exists()
    assert password not in str(list(AuditEvent.objects.values_list("old", "new")))


def test_secrets_are_never_written(admin_client):
    from allauth.socialaccount.models import SocialApp

    client, _ = admin_client
    fields = form_fields(client.get("/admin/socialaccount/socialapp/add/").content.decode())
    fields.update(provider="openid_connect", provider_id="other", name="Other IdP", client_id="c1", secret="s3cret", key="")
    fields["settings"] = "{}"
    answer = client.post("/admin/socialaccount/socialapp/add/", fields)
    assert answer.status_code == HTTPStatus.FOUND, answer.content.decode()[:3000]
    row = AuditEvent.objects.get(action="admin.add")
    app = SocialApp.objects.get(provider_id="other")
    assert row.target == f"socialaccount.socialapp:{app.pk}" and row.old == {}
    assert row.new["client_id"] == "c1" and row.new["secret"] == HIDDEN
    assert "s3cret" not in str(row.new)


def test_group_added_renamed_and_deleted_in_the_admin(admin_client):
    client, dana = admin_client
    assert client.post("/admin/auth/group/add/", {"name": "operators"}).status_code == HTTPStatus.FOUND
    group = Group.objects.get(name="operators")
    assert client.post(f"/admin/auth/group/{group.pk}/change/", {"name": "ops"}).status_code == HTTPStatus.FOUND
    assert client.post(f"/admin/auth/group/{group.pk}/delete/", {"post": "yes"}).status_code == HTTPStatus.FOUND
    rows = list(AuditEvent.objects.order_by("id").values_list("action", "target", "old", "new"))
    target = f"auth.group:{group.pk}"
    assert rows == [
        ("admin.add", target, {}, {"name": "operators"}),
        ("admin.change", target, {"name": "operators"}, {"name": "ops"}),
        ("admin.delete", target, {"id": group.pk, "name": "ops", "permissions": []}, {}),
    ]
    page = client.get("/audit/?action=admin.").content.decode()
    assert page.count("<code>admin.") == 3 and "operators" in page and "dana" in page


def test_bulk_delete_from_the_change_list_is_audited_row_by_row(admin_client):
    client, _ = admin_client
    groups = [Group.objects.create(name=n) for n in ("g1", "g2")]
    answer = client.post(
        "/admin/auth/group/", {"action": "delete_selected", "_selected_action": [g.pk for g in groups], "post": "yes"}
    )
    assert answer.status_code == HTTPStatus.FOUND
    deleted = AuditEvent.objects.filter(action="admin.delete").values_list("old__name", flat=True)
    assert sorted(deleted) == ["g1", "g2"]


def test_saving_an_unchanged_form_writes_nothing(admin_client):
    client, _ = admin_client
    group = Group.objects.create(name="same")
    assert client.post(f"/admin/auth/group/{group.pk}/change/", {"name": "same"}).status_code == HTTPStatus.FOUND
    assert not AuditEvent.objects.exists()
