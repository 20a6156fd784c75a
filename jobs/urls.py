from django.urls import path

from .web import action_views, array_views, bundle_views, job_views, usage_views, views

urlpatterns = [
    path("cluster/gpus/", views.gpu_table, name="gpu_table"),
    path("jobs/", job_views.job_list, name="job_list"),
    path("jobs/table/", job_views.job_table, name="job_table"),
    path("jobs/new/", job_views.job_new, name="job_new"),
    path("jobs/new/estimate/", job_views.job_estimate, name="job_estimate"),
    path("jobs/history/", job_views.history, name="job_history"),
    path("jobs/<uuid:key>/", job_views.job_detail, name="job_detail"),
    path("jobs/<uuid:key>/status/", job_views.job_status, name="job_status"),
    path("jobs/<uuid:key>/log/<str:stream>/", job_views.job_log, name="job_log"),
    path("jobs/<uuid:key>/cancel/", job_views.job_cancel_view, name="job_cancel"),
    path("jobs/<uuid:key>/hold/", action_views.job_hold_view, name="job_hold"),
    path("jobs/<uuid:key>/release/", action_views.job_release_view, name="job_release"),
    path("jobs/<uuid:key>/run-again/", action_views.job_run_again_view, name="job_run_again"),
    path("jobs/<uuid:key>/gpus/", usage_views.job_gpus, name="job_gpus"),
    path("jobs/<uuid:key>/gpus/series/", usage_views.job_gpu_series, name="job_gpu_series"),
    path("teams/<str:name>/gpu-efficiency/", usage_views.team_gpu_efficiency_view, name="team_gpu_efficiency"),
    path("jobs/<uuid:key>/tasks/", array_views.job_tasks, name="job_tasks"),
    path("jobs/<uuid:key>/script/", array_views.job_script, name="job_script"),
    path("jobs/<uuid:key>/support-bundle/", bundle_views.job_support_bundle, name="job_support_bundle"),
]
