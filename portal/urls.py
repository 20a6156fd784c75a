"""URLs. There is no password login anywhere: the admin's login page sends people to SSO."""

from django.contrib import admin
from django.urls import include, path

urlpatterns = [
    path("admin/", include("accounts.admin_urls")),  # before Django's admin: its login goes to SSO
    path("admin/", admin.site.urls),
    path("accounts/", include("accounts.urls")),
    path("", include("api.urls")),
    path("", include("ops.urls")),
    path("", include("images.urls")),
    path("", include("adoption.urls")),
    path("", include("notifications.urls")),
    path("", include("profiles.urls")),
    path("", include("teams.urls")),
    path("", include("interactive.urls")),
    path("", include("jobs.urls")),
]

#: A database that does not answer is a 503 that says so; anything else the 500 page (portal/errors.py).
handler500 = "portal.errors.server_error"
