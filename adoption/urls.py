from django.urls import path

from . import views

urlpatterns = [
    path("adoption/", views.adoption_page, name="adoption_figures"),
    path("adoption/adoption.csv", views.adoption_csv, name="adoption_csv"),
]
