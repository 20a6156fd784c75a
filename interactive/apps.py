from django.apps import AppConfig


class InteractiveConfig(AppConfig):
    name = "interactive"
    verbose_name = "Interactive sessions"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self):
        from . import checks  # noqa: F401  (registers system checks)
