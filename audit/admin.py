"""Edits made in Django's admin are audited like every other change: who, what, old and new values.

The portal's admin site is :class:`AuditedAdminSite` (``audit.apps.AuditedAdminConfig`` replaces
``django.contrib.admin`` in ``INSTALLED_APPS``). Every ``ModelAdmin`` registered on it, the portal's
and third-party ones (allauth's, ``auth.Group``) alike, is given :class:`AuditedModelAdmin`'s hooks,
so an add, a change (fields, many-to-many fields and inline rows) or a delete in the admin writes one
``admin.add`` / ``admin.change`` / ``admin.delete`` audit row in the admin's own transaction. Values
of fields named like a secret (password, secret, token, key) are never written, only that they changed.
"""

from __future__ import annotations

import datetime
import decimal
import uuid

from django.contrib import admin
from django.db import models
from django.forms.models import model_to_dict

from .services import audit

#: Parts of field names whose values never go into the audit trail.
SECRET_PARTS = ("password", "secret", "token", "key")
HIDDEN = "(hidden)"


def plain(value):
    """``value`` as JSON can hold it: models by their text (``str()``) and id, querysets and lists as
    sorted lists, times in ISO 8601."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, models.Model):
        return f"{value} (#{value.pk})"
    if isinstance(value, (models.QuerySet, list, tuple, set, frozenset)):
        return sorted(plain(v) for v in value)
    if isinstance(value, (datetime.datetime, datetime.date, datetime.time)):
        return value.isoformat()
    if isinstance(value, (decimal.Decimal, uuid.UUID)):
        return str(value)
    if isinstance(value, dict):
        return {str(k): plain(v) for k, v in value.items()}
    return str(value)


def _shown(field: str, value):
    return HIDDEN if any(part in field.lower() for part in SECRET_PARTS) else plain(value)


def form_changes(form) -> tuple[dict, dict]:
    """(old, new) for the fields ``form`` changed: the values it was built with (``initial``, i.e.
    the row as the admin read it) and the values it saves (``cleaned_data``)."""
    old = {f: _shown(f, form.initial.get(f)) for f in form.changed_data}
    new = {f: _shown(f, form.cleaned_data.get(f)) for f in form.changed_data}
    return old, new


def row_values(obj: models.Model) -> dict:
    """Every field of ``obj`` (secrets hidden), for the old side of a delete."""
    return {f: _shown(f, v) for f, v in model_to_dict(obj).items()}


class AuditedModelAdmin(admin.ModelAdmin):
    """``ModelAdmin`` hooks that audit every save and delete (see the module). ``audit_target(obj)``
    names the row (default ``<app_label>.<model>:<pk>``; override it to match the portal's own
    targets, e.g. ``user:alice``)."""

    def audit_target(self, obj: models.Model) -> str:
        return f"{obj._meta.label_lower}:{obj.pk}"

    def save_model(self, request, obj, form, change):
        old, new = form_changes(form)
        super().save_model(request, obj, form, change)
        if change and not form.changed_data:
            return
        action = "admin.change" if change else "admin.add"
        audit(actor=request.user, action=action, target=self.audit_target(obj), old=old if change else {}, new=new)

    def save_formset(self, request, form, formset, change):
        rows = [(f, form_changes(f)) for f in formset.forms if f.has_changed() and f not in formset.deleted_forms]
        deleted = [(f.instance, row_values(f.instance)) for f in formset.deleted_forms if f.instance.pk]
        super().save_formset(request, form, formset, change)
        parent = self.audit_target(form.instance)
        for inline_form, (old, new) in rows:
            audit(
                actor=request.user,
                action="admin.change",
                target=f"{parent} {self.audit_target(inline_form.instance)}",
                old=old,
                new=new,
            )
        for instance, old in deleted:
            audit(actor=request.user, action="admin.delete", target=f"{parent} {instance._meta.label_lower}", old=old)

    def delete_model(self, request, obj):
        target, old = self.audit_target(obj), row_values(obj)
        super().delete_model(request, obj)
        audit(actor=request.user, action="admin.delete", target=target, old=old)

    def delete_queryset(self, request, queryset):
        rows = [(self.audit_target(obj), row_values(obj)) for obj in queryset]
        super().delete_queryset(request, queryset)
        for target, old in rows:
            audit(actor=request.user, action="admin.delete", target=target, old=old)


class AuditedAdminSite(admin.AdminSite):
    """The admin site whose every registered ``ModelAdmin`` is audited (:class:`AuditedModelAdmin`
    mixed in at registration, below the registered class: a ``save_model`` of its own must call
    ``super()``, as Django's own admins do)."""

    def register(self, model_or_iterable, admin_class=None, **options):
        admin_class = admin_class or admin.ModelAdmin
        if not issubclass(admin_class, AuditedModelAdmin):
            # The registered class first (its own audit_target wins); ours before ModelAdmin's hooks.
            bases = (admin_class, AuditedModelAdmin)
            admin_class = type(f"Audited{admin_class.__name__}", bases, {"__module__": admin_class.__module__})
        super().register(model_or_iterable, admin_class, **options)
