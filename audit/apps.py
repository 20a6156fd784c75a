from django.apps import AppConfig
from django.contrib.admin import apps as admin_apps


class AuditConfig(AppConfig):
    name = "audit"
    verbose_name = "Audit"


class AuditedAdminConfig(admin_apps.AdminConfig):
    """Django's admin with :class:`audit.admin.AuditedAdminSite` as its site (in ``INSTALLED_APPS``
    instead of ``django.contrib.admin``): every edit made in the admin is audited."""

    default = False  # named in INSTALLED_APPS by its path; "audit" alone is AuditConfig
    default_site = "audit.admin.AuditedAdminSite"
