"""The admin site's view of notifications: what each person was told and where its mail stands (the
SMTP error of a mail that waits or failed). Read-only: rows are made by ``notify`` and sent by the
sweep, never edited by hand."""

from django.contrib import admin

from .models import Notification


@admin.register(Notification)
class NotificationAdmin(admin.ModelAdmin):
    list_display = ("created_at", "user", "kind", "subject", "email_state", "attempts", "sent_at", "read_at")
    list_filter = ("kind", "email_state")
    search_fields = ("key", "subject", "user__username")
    readonly_fields = [f.name for f in Notification._meta.fields]

    def has_add_permission(self, request) -> bool:
        return False

    def has_change_permission(self, request, obj=None) -> bool:
        return False
