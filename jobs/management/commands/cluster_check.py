"""``manage.py cluster_check``: test the whole path from the portal to each cluster's Slurm and say
what is wrong (``--cluster NAME`` for one)."""

from __future__ import annotations

import socket
import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from slurm import SlurmError, SlurmVersionUnknown, get_gateway
from slurm.accounting import show_config
from slurm.clusters import Cluster, cluster_get, clusters
from slurm.poll_budget import PollTooBig
from slurm.snapshot import snapshot_load, snapshot_take

#: What an admin can do about a queue over the poll's budget.
BUDGET_HINT = (
    "Raise PORTAL_POLL_MAX_BYTES / PORTAL_POLL_MAX_JOBS / PORTAL_POLL_MAX_SECONDS (and give the poller's worker the "
    "memory), or bring the queue down (MaxJobCount, a runaway array)"
)


def _utc(seconds: float | None) -> str:
    return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(seconds or 0))


class Command(BaseCommand):
    help = (
        "Check the path to Slurm step by step: sshd reachable, host key known, key accepted, the sudo "
        "rule works (and refuses a non-Slurm command), Slurm answers, gres/gpu tracked in accounting."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "--as-user",
            default="",
            help="A researcher to test the sudo rule with (default: the first member of the cluster users group).",
        )
        parser.add_argument("--cluster", default="", help="Check only this cluster (default: every configured cluster).")

    def handle(self, *args, as_user: str = "", cluster: str = "", **options):
        self.failures = 0
        if cluster and cluster_get(cluster) is None:
            raise CommandError(f"No cluster named {cluster!r}; configured: {', '.join(c.name for c in clusters())}.")
        chosen = [cluster_get(cluster)] if cluster else list(clusters())
        for each in chosen:
            self.stdout.write(self.style.MIGRATE_HEADING(f"Cluster {each.label if each.label != each.name else each.name}"))
            self._check_cluster(each, as_user)
        if self.failures:
            raise CommandError(f"{self.failures} check(s) failed.")
        self.stdout.write(self.style.SUCCESS("All checks passed."))

    def _check_cluster(self, cluster: Cluster, as_user: str) -> None:
        """Every step for one cluster; a step nothing after it can do without ends this cluster's checks."""
        conf = cluster.gateway
        gateway = get_gateway(cluster.name)
        if conf["transport"] == "ssh":
            if not self._check_tcp(conf):
                return
            try:
                gateway.run(["true"])
                self._ok(f"SSH as {conf['ssh_user']}: host key matches {conf['ssh_known_hosts']}, key accepted")
            except SlurmError as exc:
                self._fail("SSH session", exc.message + " (nothing else can be checked on this cluster without SSH)")
                return
        else:
            self._ok("transport is local: no SSH involved")
        user = as_user or self._first_member(gateway, conf["users_group"])
        if user:
            self._check_sudo(gateway, user, conf["users_group"], cluster.sbatch_helper)
        self._check_slurm(gateway, cluster)
        self._check_poller(cluster)

    # --- steps ------------------------------------------------------------------------------
    def _check_tcp(self, conf) -> bool:
        try:
            with socket.create_connection((conf["ssh_host"], conf["ssh_port"]), timeout=conf["ssh_connect_timeout"]):
                pass
            self._ok(f"sshd reachable at {conf['ssh_host']}:{conf['ssh_port']}")
            return True
        except OSError as exc:
            self._fail(
                "sshd reachable",
                f"{conf['ssh_host']}:{conf['ssh_port']}: {exc}. Is the portal's sshd running? (For the local clusters: make cluster.) "
                "Nothing else can be checked on this cluster.",
            )
            return False

    def _first_member(self, gateway, group: str) -> str:
        try:
            line = gateway.run(["getent", "group", group]).out.strip()
        except SlurmError as exc:
            self._fail("users group", f"group {group!r} not found on the submit host ({exc.message}).")
            return ""
        members = [m for m in line.split(":")[-1].split(",") if m]
        if not members:
            self._fail("users group", f"group {group!r} has no members to test the sudo rule with; pass --as-user.")
            return ""
        return members[0]

    def _check_sudo(self, gateway, user: str, group: str, helper: str):
        try:
            gateway.run(["squeue", "--version"], as_user=user)
            self._ok(f"sudo rule: service user may run Slurm commands as {user} (group {group})")
        except SlurmError as exc:
            self._fail(
                "sudo rule", f"`sudo -n -u {user} squeue` failed: {exc.message}. Install the sudoers rule for the service user."
            )
        try:
            gateway.run([helper, "--", "--version"], as_user=user)
            self._ok(f"submit helper: {helper} runs sbatch as {user}")
        except SlurmError as exc:
            self._fail(
                "submit helper",
                f"`sudo -n -u {user} {helper} -- --version` failed: {exc.message}. Install "
                "cluster/etc/gpuportal-sbatch there (root-owned, mode 755) and allow it in the sudoers rule.",
            )
        result = gateway.run(["id"], as_user=user, check=False)
        if result.returncode == 0:
            self._fail("sudo rule is narrow", f"`sudo -u {user} id` was allowed: the rule must permit only Slurm commands.")
        else:
            self._ok("sudo rule is narrow: a non-Slurm command as the user is refused")

    def _check_slurm(self, gateway, cluster: Cluster):
        """One real poll, as the poller takes it: the version, its JSON read by the portal's adapter."""
        try:
            snapshot = snapshot_take(gateway, cluster=cluster.name)
            self._ok(
                f"Slurm answers: version {snapshot.slurm_version or '?'}, its JSON ({snapshot.output_version}) read: "
                f"{len(snapshot.nodes)} node(s), {len(snapshot.partitions)} partition(s), {len(snapshot.jobs)} job(s) in the queue"
            )
        except SlurmVersionUnknown as exc:
            self._fail("Slurm's JSON understood", exc.message)
            return
        except PollTooBig as exc:
            self._fail("poll budget", f"{exc.message}. {BUDGET_HINT}")
            return
        except (SlurmError, ValueError) as exc:
            self._fail("Slurm answers", f"the poll's commands failed: {exc}")
            return
        try:
            config = show_config(gateway)
        except SlurmError as exc:
            self._fail("accounting config", exc.message)
            return
        tres = ""
        for line in config.splitlines():
            key, _, value = line.partition("=")
            if key.strip() == "AccountingStorageTRES":
                tres = value.strip()
        if "gres/gpu" in tres.split(","):
            self._ok(f"gres/gpu tracked in accounting (AccountingStorageTRES={tres})")
        else:
            self._fail(
                "gres/gpu tracked in accounting",
                f"AccountingStorageTRES={tres or '(unset)'} lacks gres/gpu, so GPU usage and quotas cannot be "
                "measured. Add `AccountingStorageTRES=gres/gpu,gres/gpu:<type>...` to slurm.conf and restart slurmctld.",
            )

    def _check_poller(self, cluster: Cluster):
        """What the poller's last poll recorded (the stored snapshot): over the poll's budget (a
        failure: the pages show the last good figures), slower than the interval (said, with the
        stretched interval), or its duration."""
        snapshot = snapshot_load(with_jobs=False, cluster=cluster.name)
        interval = settings.PORTAL_SNAPSHOT_INTERVAL
        if snapshot is None:
            self._ok("the poller: no poll recorded yet")
            return
        if snapshot.error and snapshot.error_kind == "budget":
            kept = f"the pages show the figures of {_utc(snapshot.taken_at)}" if snapshot.taken_at else "no figures yet"
            self._fail("the poller", f"{snapshot.error} (since {_utc(snapshot.error_since)}; {kept}). {BUDGET_HINT}")
        elif snapshot.stretched_to:
            self.stdout.write(
                f"{self.style.WARNING('SLOW')} the poller: Slurm is slower than the poll interval: the last poll took "
                f"{snapshot.poll_seconds:.1f} s (interval {interval:g} s), so the next starts {snapshot.stretched_to:.1f} s "
                "after its start instead of piling up; the normal interval is back after a poll within it"
            )
        elif snapshot.poll_seconds:
            self._ok(f"the poller: the last poll took {snapshot.poll_seconds:.2f} s (interval {interval:g} s)")

    # --- output -----------------------------------------------------------------------------
    def _ok(self, text: str):
        self.stdout.write(f"{self.style.SUCCESS('OK  ')} {text}")

    def _fail(self, what: str, text: str):
        self.failures += 1
        self.stdout.write(f"{self.style.ERROR('FAIL')} {what}: {text}")
