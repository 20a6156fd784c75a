from django.urls import path, register_converter

from . import views


class TeamNameConverter:
    """Slurm account names as the sync allows them (see ``teams.sync_state.ACCOUNT_NAME_RE``)."""

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
    path("teams/<team:name>/settings/", views.team_settings, name="team_settings"),
    path("audit/", views.audit_list, name="audit_list"),
]
