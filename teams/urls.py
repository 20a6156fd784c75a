from django.urls import path, register_converter

from . import report_views, views


class TeamNameConverter:
    """Slurm account names as the sync allows them (see ``teams.models.ACCOUNT_NAME_RE``)."""

    regex = r"[A-Za-z0-9_][A-Za-z0-9_.-]{0,63}"

    def to_python(self, value: str) -> str:
        return value

    def to_url(self, value: str) -> str:
        return value


register_converter(TeamNameConverter, "team")

urlpatterns = [
    path("teams/", views.team_list, name="team_list"),
    path("teams/<team:name>/", views.team_detail, name="team_detail"),
    path("teams/<team:name>/usage.csv", views.team_usage_csv, name="team_usage_csv"),
    path("teams/<team:name>/members.csv", views.team_members_csv, name="team_members_csv"),
    path("teams/<team:name>/report/", report_views.team_report_latest, name="team_report_latest"),
    path("teams/<team:name>/report/<str:month>/", report_views.team_report_page, name="team_report"),
    path("teams/<team:name>/report/<str:month>.csv", report_views.team_report_csv, name="team_report_csv"),
    path("teams/<team:name>/settings/", views.team_settings, name="team_settings"),
    path("teams/<team:name>/settings/limits/", views.team_limits_set, name="team_limits_set"),
    path("teams/<team:name>/settings/members/", views.team_member_set, name="team_member_set"),
    path("teams/<team:name>/settings/members/remove/", views.team_member_remove, name="team_member_remove"),
    path("teams/<team:name>/settings/sync/", views.team_sync_start, name="team_sync_start"),
    path("teams/<team:name>/settings/sync/<uuid:run_id>/", views.team_sync_status, name="team_sync_status"),
    path("audit/", views.audit_list, name="audit_list"),
]
