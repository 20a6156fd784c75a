from django.urls import path

from . import home_views, internal_views, views

urlpatterns = [
    path("", home_views.home, name="home"),
    path("home/now/", home_views.home_now, name="home_now"),
    path("home/starts/", home_views.home_starts, name="home_starts"),
    path("sessions/start/", home_views.session_start_one_click, name="session_start_one_click"),
    path("sessions/", views.session_list, name="session_list"),
    path("sessions/cards/", views.session_cards_view, name="session_cards"),
    path("sessions/maintenance/", views.session_maintenance_view, name="session_maintenance"),
    path("sessions/<uuid:key>/stop/", views.session_stop_view, name="session_stop"),
    path("sessions/<uuid:key>/support-bundle/", views.session_support_bundle, name="session_support_bundle"),
    path("hub-internal/identity", internal_views.identity_view, name="hub_identity"),
    path("hub-internal/spawn-check", internal_views.spawn_check_view, name="hub_spawn_check"),
    path("hub-internal/session-submit", internal_views.session_submit_view, name="hub_session_submit"),
    path("hub-internal/session-cancel", internal_views.session_cancel_view, name="hub_session_cancel"),
    path("hub-internal/session-status", internal_views.session_status_view, name="hub_session_status"),
    path("hub-internal/session-event", internal_views.session_event_view, name="hub_session_event"),
    path("hub-internal/session-activity", internal_views.session_activity_view, name="hub_session_activity"),
]
