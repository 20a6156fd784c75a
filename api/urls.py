"""The portal's URLs of the API app: the REST API (every router attached to the one
:data:`api.base.api` object), ``/metrics`` and the Tokens pages."""

from django.urls import path
from ninja import NinjaAPI

from . import adoption, announcements, cluster, clusters, images, jobs, notifications, profiles, sessions, teams, views
from .base import api
from .metrics import metrics_view


def register() -> NinjaAPI:
    """Attach every router once and return the API (``api/urls.py`` serves it; ``export_openapi``
    writes its schema)."""
    if not getattr(api, "_portal_routers", False):
        api.add_router("/", teams.router)
        api.add_router("/clusters", clusters.router)
        api.add_router("/cluster", cluster.router)
        api.add_router("/jobs", jobs.router)
        api.add_router("/sessions", sessions.router)
        api.add_router("/profiles", profiles.router)
        api.add_router("/adoption", adoption.router)
        api.add_router("/announcements", announcements.router)
        api.add_router("/notifications", notifications.router)
        api.add_router("/images", images.router)
        api._portal_routers = True
    return api


urlpatterns = [
    path("api/v1/", register().urls),
    path("metrics", metrics_view, name="metrics"),
    path("account/tokens/", views.token_list, name="token_list"),
    path("account/tokens/<int:pk>/revoke/", views.token_revoke_view, name="token_revoke"),
]
