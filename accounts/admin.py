from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from .models import User


@admin.register(User)
class PortalUserAdmin(UserAdmin):
    list_display = ("username", "display_name", "email", "email_verified", "link_state", "is_staff", "last_login")
    list_filter = ("link_state", "is_staff", "is_active")
    # Linking an identity to a cluster account goes through the Accounts page (checked and audited).
    readonly_fields = ("oidc_issuer", "oidc_sub", "oidc_groups", "email_verified", "link_state", "requested_username")
    fieldsets = UserAdmin.fieldsets + (
        (
            "Identity (from the IdP)",
            {
                "fields": (
                    "oidc_issuer",
                    "oidc_sub",
                    "display_name",
                    "email_verified",
                    "oidc_groups",
                    "link_state",
                    "requested_username",
                )
            },
        ),
    )
