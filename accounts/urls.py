"""Account URLs. allauth's own ``allauth.urls`` is NOT included: no password, sign-up or email
forms exist. Names that allauth reverses internally are provided here."""

from django.urls import include, path

from . import link_views, views

urlpatterns = [
    path("login/", views.login_page, name="account_login"),
    path("logout/", views.logout_view, name="account_logout"),
    path("signup/", views.signup_closed, name="socialaccount_signup"),
    path("login/cancelled/", views.login_cancelled, name="socialaccount_login_cancelled"),
    path("inactive/", views.account_inactive, name="account_inactive"),
    path("logout/done/", views.logout_done, name="account_logout_done"),
    path("links/", link_views.account_links, name="account_links"),
    path("links/<int:pk>/approve/", link_views.account_link_approve_view, name="account_link_approve"),
    path("links/<int:pk>/refuse/", link_views.account_link_refuse_view, name="account_link_refuse"),
    path("", include("accounts.oidc.urls")),
]
