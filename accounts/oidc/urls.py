from django.urls import path

from . import views

urlpatterns = [
    path("oidc/<str:provider_id>/login/", views.login, name="openid_connect_login"),
    path("oidc/<str:provider_id>/login/callback/", views.callback, name="openid_connect_callback"),
]
