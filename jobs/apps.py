from django.apps import AppConfig


class JobsConfig(AppConfig):
    name = "jobs"
    verbose_name = "Jobs"

    def ready(self) -> None:
        from portal import billing  # noqa: F401  (registers the billing rate's system check)
        from portal.slurm_metrics import slurm_command_observed, slurm_rate_limit_observed
        from slurm import clusters  # noqa: F401  (registers its system checks)
        from slurm.gateway import command_observers, rate_limit_observers

        if slurm_command_observed not in command_observers:  # /metrics: Slurm command latency
            command_observers.append(slurm_command_observed)
        if slurm_rate_limit_observed not in rate_limit_observers:  # /metrics: slurmctld's rate limit
            rate_limit_observers.append(slurm_rate_limit_observed)

        from teams.report.measures import measure_source_set

        from .reads.report_measures import job_measures

        measure_source_set(job_measures)  # the team report's energy and GPU utilization

        from teams.usage.borrow import scavenger_source_set

        from .reads.scavenger_hours import scavenger_gpu_hours

        scavenger_source_set(scavenger_gpu_hours)  # the team page's GPU-hours run as scavenger
