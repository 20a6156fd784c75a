from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from django.conf import settings

        from portal import renamed_settings

        from . import checks, signals  # noqa: F401  (registers system checks and signal handlers)

        # A site's settings may still set a setting's old name (this release only): its value is used,
        # and portal.W002 (registered by the import) asks for the rename. The first portal app to be
        # ready, before the others' ready() read any setting.
        renamed_settings.copy_old_names(settings)
