"""The admin site's sign-in and sign-out, ahead of Django's own (included by ``portal/urls.py`` at
``admin/``): there is no password login, so its login page sends people to SSO."""

from django.urls import path

from . import views

urlpatterns = [
    path("login/", views.admin_login),
    path("logout/", views.logout_view),
]
