from django.urls import path

from . import announcement_views, cluster_views

urlpatterns: list = [
    path("ops/cluster/", cluster_views.cluster_view, name="cluster_page"),
    path("ops/cluster/<str:name>/", cluster_views.cluster_view, name="cluster_named"),
    path("ops/cluster/<str:name>/body/", cluster_views.cluster_body, name="cluster_body"),
    path("ops/cluster/<str:name>/drain/", cluster_views.node_drain_view, name="node_drain"),
    path("ops/cluster/<str:name>/nodes/<str:node>/resume/", cluster_views.node_resume_view, name="node_resume"),
    path("ops/cluster/<str:name>/reservations/", cluster_views.reservation_create_view, name="reservation_create"),
    path(
        "ops/cluster/<str:name>/reservations/<str:reservation>/delete/",
        cluster_views.reservation_delete_view,
        name="reservation_delete",
    ),
    path("announcements/banner/", announcement_views.announcement_banner, name="announcement_banner"),
    path("ops/announcements/", announcement_views.announcement_list, name="announcement_list"),
    path("ops/announcements/<int:pk>/edit/", announcement_views.announcement_edit, name="announcement_edit"),
    path("ops/announcements/<int:pk>/delete/", announcement_views.announcement_delete_view, name="announcement_delete"),
]
