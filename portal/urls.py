"""URLs. There is no password login anywhere: the admin's login page sends people to SSO."""
from django.contrib import admin
from django.urls import include, path
from django.views.generic import RedirectView

urlpatterns = [
    path("admin/login/", RedirectView.as_view(pattern_name="account_login", query_string=True)),
    path("admin/", admin.site.urls),
    path("accounts/", include("accounts.urls")),
    path("", include("jobs.urls")),
]
