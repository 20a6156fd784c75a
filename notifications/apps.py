from django.apps import AppConfig


class NotificationsConfig(AppConfig):
    name = "notifications"
    verbose_name = "Notifications"

    def ready(self) -> None:
        from . import identity  # noqa: F401  (the admins hear of sign-in identity conflicts)
