from http import HTTPStatus

from django.contrib import admin
from django.contrib.auth.admin import UserAdmin

from audit.admin import HIDDEN
from audit.services import audit

from .models import User


@admin.register(User)
class PortalUserAdmin(UserAdmin):
    list_display = ("username", "display_name", "email", "email_verified", "link_state", "is_staff", "last_login")
    list_filter = ("link_state", "is_staff", "is_active")
    # Linking an identity to a cluster account goes through the Accounts page (checked and audited).
    readonly_fields = ("oidc_issuer", "oidc_sub", "oidc_groups", "email_verified", "link_state", "requested_username")

    def audit_target(self, obj: User) -> str:
        """Admin edits of a user are audited under the portal's own target name (audit/admin.py)."""
        return f"user:{obj.username}"

    def user_change_password(self, request, id, form_url=""):
        """Django's password form saves without ``save_model``: audit a password set here too
        (nobody signs in with it: the portal has no password login)."""
        response = super().user_change_password(request, id, form_url)
        if request.method == "POST" and response.status_code == HTTPStatus.FOUND:
            user = self.get_object(request, id)
            audit(
                actor=request.user,
                action="admin.change",
                target=self.audit_target(user),
                old={"password": HIDDEN},
                new={"password": "(set)"},
            )
        return response

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
