"""Account URLs. allauth's own ``allauth.urls`` is NOT included: no password, sign-up or email
forms exist. Names that allauth reverses internally are provided here."""
from django.urls import include, path

from . import views

urlpatterns = [
    path("login/", views.login_page, name="account_login"),
    path("logout/", views.logout_view, name="account_logout"),
    path("signup/", views.signup_closed, name="socialaccount_signup"),
    path("login/cancelled/", views.login_cancelled, name="socialaccount_login_cancelled"),
    path("inactive/", views.account_inactive, name="account_inactive"),
    path("", include("accounts.oidc.urls")),
]
