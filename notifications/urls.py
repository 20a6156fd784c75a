from django.urls import path

from . import views

urlpatterns = [
    path("notifications/", views.notification_list, name="notification_list"),
    path("notifications/count/", views.notification_count, name="notification_count"),
    path("notifications/read-all/", views.notification_read_all, name="notification_read_all"),
    path("notifications/settings/", views.notification_settings, name="notification_settings"),
    path("notifications/<int:pk>/read/", views.notification_read, name="notification_read"),
]
