from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from .models import User


@admin.register(User)
class PortalUserAdmin(UserAdmin):
    list_display = ("username", "display_name", "email", "email_verified", "is_staff", "last_login")
    readonly_fields = ("oidc_issuer", "oidc_sub", "oidc_groups", "email_verified")
    fieldsets = UserAdmin.fieldsets + (
        ("Identity (from the IdP)", {"fields": ("oidc_issuer", "oidc_sub", "display_name", "email_verified", "oidc_groups")}),
    )
