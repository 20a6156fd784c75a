from django.urls import path

from . import views

urlpatterns = [
    path("ops/images/", views.image_list, name="image_list"),
    path("ops/images/<str:name>/edit/", views.image_edit, name="image_edit"),
    path("ops/images/<str:name>/enable/", views.image_enable, name="image_enable"),
    path("ops/images/<str:name>/delete/", views.image_delete_view, name="image_delete"),
]
