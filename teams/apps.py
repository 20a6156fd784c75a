from django.apps import AppConfig


class TeamsConfig(AppConfig):
    name = "teams"
    verbose_name = "Teams"

    def ready(self) -> None:
        from . import checks, signals  # noqa: F401  (registers the system checks and the login signal handler)
