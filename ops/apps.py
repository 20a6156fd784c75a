from django.apps import AppConfig


class OpsConfig(AppConfig):
    name = "ops"
    verbose_name = "Operations"

    def ready(self) -> None:
        """The poller builds the cluster page's rows with each snapshot it stores (:mod:`ops.cluster_cache`)."""
        from slurm.snapshot import snapshot_storing

        from .cluster_cache import kept_for_snapshot

        snapshot_storing.connect(kept_for_snapshot, dispatch_uid="ops.cluster_cache.kept_for_snapshot")
