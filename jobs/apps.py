from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        from slurm.gateway import command_observers

        from . import checks  # noqa: F401  (registers system checks)
        from .slurm_metrics import slurm_command_observed

        if slurm_command_observed not in command_observers:  # /metrics: Slurm command latency
            command_observers.append(slurm_command_observed)
