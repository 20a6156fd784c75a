from django.urls import path

from . import views

urlpatterns = [
    path("profiles/", views.profile_list, name="profile_list"),
    path("profiles/new/", views.profile_edit, name="profile_new"),
    path("profiles/<int:pk>/", views.profile_detail, name="profile_detail"),
    path("profiles/<int:pk>/edit/", views.profile_edit, name="profile_edit"),
    path("profiles/<int:pk>/run/", views.profile_run_view, name="profile_run"),
    path("profiles/<int:pk>/clone/", views.profile_clone_view, name="profile_clone"),
    path("profiles/<int:pk>/share/", views.profile_share_view, name="profile_share"),
    path("profiles/<int:pk>/delete/", views.profile_delete_view, name="profile_delete"),
]
