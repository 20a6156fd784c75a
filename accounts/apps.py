from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from . import checks, signals  # noqa: F401  (registers system checks and signal handlers)
