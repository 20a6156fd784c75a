"""``manage.py profiles_check``: read every saved profile's file as Run reads it today
(:func:`profiles.schema.parse_profile`: its YAML and its fields; what the cluster's policy allows is
checked when it runs) and list those it refuses: owner, id, name and each problem with its line. Run
it after an upgrade that reads profiles more strictly (a key given twice, tags, anchors, a yes/no time
limit): a team member cannot edit a shared profile, so its owner is the one to fix it. Reads only;
exit status 0, or with ``--fail`` 1 when a profile is refused (for scripts)."""

from __future__ import annotations

from django.core.management.base import BaseCommand

from portal.refusals import Refused
from profiles.models import Profile
from profiles.schema import parse_profile


class Command(BaseCommand):
    help = "List the saved profiles that Run would refuse today, with why (reads only)."

    def add_arguments(self, parser):
        parser.add_argument("--fail", action="store_true", help="Exit with status 1 when a profile is refused.")

    def handle(self, *args, fail: bool, **options):
        refused = 0
        profiles = Profile.objects.select_related("owner").order_by("owner__username", "name")
        for profile in profiles.iterator(chunk_size=200):
            try:
                parse_profile(profile.yaml)
            except Refused as exc:
                refused += 1
                self.stdout.write(f"{profile.owner.username}: profile {profile.pk} ({profile.name[:60]}):")
                for problem in exc.problems:
                    where = f"line {problem.line} · " if problem.line else ""
                    self.stdout.write(f"  {where}{problem.field or 'the file'}: {problem.message}")
        self.stdout.write(
            f"{refused} of {profiles.count()} saved profiles would be refused; their owners can fix them on the Profiles page."
        )
        if fail and refused:
            raise SystemExit(1)
