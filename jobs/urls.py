from django.urls import path

from . import views

urlpatterns = [
    path("", views.home, name="home"),
    path("cluster/gpus/", views.gpu_table, name="gpu_table"),
]
