from django.urls import path

from . import announcement_views

urlpatterns: list = [
    path("ops/announcements/", announcement_views.announcement_list, name="announcement_list"),
    path("ops/announcements/<int:pk>/edit/", announcement_views.announcement_edit, name="announcement_edit"),
    path("ops/announcements/<int:pk>/delete/", announcement_views.announcement_delete_view, name="announcement_delete"),
]
