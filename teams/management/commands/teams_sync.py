"""``manage.py teams_sync [--dry-run] [--import] [--cluster NAME]...``: make every cluster's Slurm
accounts match the managed teams."""

from django.core.management.base import BaseCommand, CommandError

from slurm import SlurmError
from slurm.clusters import cluster_names
from teams.sync.associations import ImportRefused, teams_import, teams_sync


class Command(BaseCommand):
    help = (
        "Make Slurm's accounts, associations and gres/gpu limits match the portal's managed teams, on every "
        "configured cluster. Prints one line per action (+ add, ~ change, - remove, FAILED ...), each after its "
        "cluster's name when there are several; exits 1 if any failed."
    )

    def add_arguments(self, parser):
        parser.add_argument("--dry-run", action="store_true", help="print the plan, change nothing")
        parser.add_argument(
            "--import",
            dest="do_import",
            action="store_true",
            help="first create managed teams for Slurm accounts the portal does not know (a new install; reads every cluster)",
        )
        parser.add_argument(
            "--cluster",
            dest="clusters",
            action="append",
            metavar="NAME",
            help="sync this cluster only (repeat for several); default: every configured cluster",
        )

    def handle(self, *args, dry_run: bool, do_import: bool, clusters: list[str] | None, **options):
        unknown = sorted(set(clusters or ()) - set(cluster_names()))
        if unknown:
            raise CommandError(
                f"no cluster named {', '.join(unknown)} is configured; the clusters are: {', '.join(cluster_names())}"
            )
        if do_import:
            if dry_run:
                raise CommandError("--import changes the portal's teams: run it without --dry-run")
            try:
                created = teams_import()
            except (SlurmError, ImportRefused) as exc:
                raise CommandError(f"import failed: {exc}") from exc
            self.stdout.write(f"imported {created} team(s) from Slurm")
        report = teams_sync(dry_run=dry_run, clusters=clusters)
        for line in report.lines:
            self.stdout.write(line)
        if not report.ok:
            problems = [f"{len(report.failed)} of {len(report.results)} action(s) failed"] if report.failed else []
            problems += ["nothing was done"] if report.error else []
            unread = [p.cluster for p in report.parts if p.error]
            problems += [f"Slurm could not be read on {', '.join(unread)}: nothing was done there"] if unread else []
            problems += [f"{len(report.skipped)} team(s) or member(s) skipped"] if report.skipped else []
            raise CommandError("; ".join(problems), returncode=1)
        if not report.results:
            self.stdout.write("Slurm already matches the portal: nothing to change.")
        elif dry_run:
            self.stdout.write(f"dry run: {len(report.results)} action(s) planned, none applied")
