from django.apps import AppConfig


class AdoptionConfig(AppConfig):
    name = "adoption"
    verbose_name = "Adoption figures"
