from django.urls import path

from . import views

urlpatterns = [
    path("teams/", views.team_list, name="team_list"),
    path("teams/<str:name>/", views.team_detail, name="team_detail"),
    path("teams/<str:name>/usage.csv", views.team_usage_csv, name="team_usage_csv"),
    path("teams/<str:name>/settings/", views.team_settings, name="team_settings"),
    path("audit/", views.audit_list, name="audit_list"),
]
