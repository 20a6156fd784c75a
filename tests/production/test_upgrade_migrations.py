"""An upgrade from the previous release's database loses no job and no session.

A fresh database is migrated to :data:`RELEASE` (the previous release's migration state), filled with
the HISTORICAL models of that state (a job being submitted, one pending with a Slurm id, one running,
an array in flight, a finished one; a session starting and one running; an audit row), migrated to
today's leaf nodes of the migration graph (found at run time, so every migration added later is
taken too), and then checked: every row is there with its state, ids and owner; the poller's sync
(``jobs_sync`` on a snapshot from the recorded 22.05 queue, in a process whose database is the
upgraded one) treats them as it treats today's rows. The release had no model for jobs submitted
outside the portal (``Job.origin`` came with jobs 0011), so there is none to carry over.

Also: a migration that cannot be reversed says so in its docstring."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
import sys
from importlib import import_module

import pytest
from django.apps import apps as live_apps
from django.db import IntegrityError, connections, transaction
from django.db.migrations.executor import MigrationExecutor
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.operations.special import SeparateDatabaseAndState

from tests.production.site import REPO, own_database, pg_url, recreate_database

#: The previous release's migration state: its leaf node per app of this project. The release is
#: main just before round 2's first commit 8c880e7 (``git log --oneline 8c880e7^ -1``: 8af0645); each
#: app's leaf was read with ``git show 8c880e7^:<app>/migrations/`` (the highest-numbered file; each
#: app's migrations were linear then). audit, notifications, ops and adoption had none (audit's
#: model was still the jobs app's). Django's and allauth's apps are at their leaves: the release
#: pinned the same versions (``Django>=5.2,<5.3``, ``django-allauth>=65.22,<66``).
RELEASE = {
    "accounts": "0002_user_admin_override",
    "jobs": "0003_job_profile_job_profile_spec",
    "teams": "0001_initial",
    "interactive": "0001_initial",
    "profiles": "0001_initial",
    "api": "0001_initial",
}
ALIAS = "upgrade"


def project_apps() -> set[str]:
    """Labels of this repository's apps (the rest are Django's and third parties')."""
    return {c.label for c in live_apps.get_app_configs() if str(REPO) in c.path and ".venv" not in c.path}


def release_targets(loader: MigrationLoader) -> list[tuple[str, str]]:
    """:data:`RELEASE` plus the leaves of every app that is not this project's."""
    ours = project_apps()
    third_party = [node for node in loader.graph.leaf_nodes() if node[0] not in ours]
    return sorted(RELEASE.items()) + third_party


@pytest.fixture
def upgrade_db(django_db_blocker):
    """An empty database of its own under the alias ``upgrade``; dropped afterwards."""
    name = own_database("upgrade")
    recreate_database(name)
    connections.settings[ALIAS] = {**connections.settings["default"], "NAME": name}
    try:
        with django_db_blocker.unblock():
            yield connections[ALIAS], name
    finally:
        connections[ALIAS].close()
        del connections[ALIAS]
        del connections.settings[ALIAS]
        recreate_database(name, drop_only=True)


def migrate(connection, targets) -> MigrationLoader:
    """Apply migrations up to ``targets`` on ``connection``; returns a loader of the result."""
    MigrationExecutor(connection).migrate(targets)
    return MigrationLoader(connection)


def fill_release(apps, now: dt.datetime) -> dict:
    """Rows as the previous release left them, made with its historical models ``apps``. Returns
    what each row was: name -> (key, state, Slurm id, owner)."""
    User = apps.get_model("accounts", "User")
    Team = apps.get_model("teams", "Team")
    Membership = apps.get_model("teams", "Membership")
    Job = apps.get_model("jobs", "Job")
    AuditEvent = apps.get_model("jobs", "AuditEvent")  # the jobs app's model in the release
    Session = apps.get_model("interactive", "Session")
    db = ALIAS
    alice = User.objects.using(db).create(
        username="alice", password="!", oidc_issuer="http://idp.example.org", oidc_sub="sub-alice",
        slurm_accounts=["vision"], oidc_groups=["vision"],
    )  # fmt: skip
    bob = User.objects.using(db).create(username="bob", password="!", oidc_issuer="http://idp.example.org", oidc_sub="sub-bob")
    vision = Team.objects.using(db).create(name="vision", gpu_minutes_quota=6000)
    Membership.objects.using(db).create(team=vision, user=alice, role="LEAD")
    common = {"account": "vision", "partition": "train", "memory_mb": 1000, "time_limit_min": 10, "script": "#!/bin/bash\ntrue\n"}
    made = {}
    for name, state, slurm_id, user, extra in (
        ("submitting", "SUBMITTING", None, alice, {}),
        ("pending", "PENDING", 4, alice, {"reason": "Priority", "submitted_at": now}),
        ("running", "RUNNING", 2, alice, {"nodes": "node1", "submitted_at": now, "start_at": now}),
        (
            "array",
            "PENDING",
            23,
            alice,
            {"partition": "small", "script": "#!/bin/bash\n#SBATCH --array=0-2\ntrue\n", "submitted_at": now},
        ),
        ("finished", "COMPLETED", 1, bob, {"exit_code": 0, "submitted_at": now, "end_at": now, "gpu_hours": 0.5}),
    ):
        job = Job.objects.using(db).create(name=name, state=state, slurm_job_id=slurm_id, user=user, **{**common, **extra})
        made[name] = (str(job.key), state, slurm_id, user.username)
    AuditEvent.objects.using(db).create(action="job.submitted", target=f"job:{made['running'][0]}", actor=alice,
                                        job_id=Job.objects.using(db).get(name="running").pk, new={"state": "PENDING"})  # fmt: skip
    for server, state in (("starting", "STARTING"), ("running-lab", "RUNNING")):
        session = Session.objects.using(db).create(
            user=alice, server_name=server, ide="lab", account="vision", partition="interactive", gpu_count=1,
            gpu_type="a100", memory_mb=4000, time_limit_min=120, state=state, started_at=now if state == "RUNNING" else None,
        )  # fmt: skip
        made[f"session:{server}"] = (str(session.key), state, None, "alice")
    return made


def old_code_after_migrate(apps, made: dict) -> None:
    """What the previous release's code (its models ``apps``) can still do on the upgraded database,
    for docs/operations.md, "Upgrading": its updates of existing rows work (an old poller setting a
    state), but a new row of its own fails, since the columns added since have no database default
    (Django drops a field's default from the column after adding it): an old web process left running
    cannot take a submission."""
    OldJob = apps.get_model("jobs", "Job")
    User = apps.get_model("accounts", "User")
    running = OldJob.objects.using(ALIAS).get(key=made["running"][0])
    assert OldJob.objects.using(ALIAS).filter(pk=running.pk).update(reason="") == 1
    with pytest.raises(IntegrityError, match="null value in column") as refused, transaction.atomic(using=ALIAS):
        OldJob.objects.using(ALIAS).create(
            name="old web", user=User.objects.using(ALIAS).get(username="alice"), partition="train", memory_mb=1000,
            time_limit_min=10, script="true",
        )  # fmt: skip
    print(f"the previous release's insert on the upgraded database: {refused.value}")


def test_release_names_are_still_migrations():
    """The recorded release state names migrations this tree still has (none renamed or squashed away)."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    assert set(RELEASE.items()) <= set(loader.disk_migrations), set(RELEASE.items()) - set(loader.disk_migrations)


def test_upgrade_from_the_release_keeps_jobs_and_sessions_in_flight(upgrade_db):
    connection, name = upgrade_db
    loader = migrate(connection, release_targets(MigrationLoader(connection)))
    applied = set(loader.applied_migrations)
    assert set(RELEASE.items()) <= applied
    assert not any(app == "audit" for app, _ in applied)  # the release's state, not today's

    now = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC)
    made = fill_release(loader.project_state(release_targets(loader)).apps, now)

    leaves = MigrationLoader(connection).graph.leaf_nodes()
    after = migrate(connection, leaves)
    assert set(leaves) <= set(after.applied_migrations)
    assert after.detect_conflicts() == {}
    old_code_after_migrate(loader.project_state(release_targets(loader)).apps, made)

    from audit.models import AuditEvent
    from interactive.models import Session
    from jobs.models import Job

    jobs = {str(j.key): j for j in Job.objects.using(ALIAS).select_related("user")}
    sessions = {str(s.key): s for s in Session.objects.using(ALIAS).select_related("user")}
    for label, (key, state, slurm_id, owner) in made.items():
        row = sessions.get(key) if label.startswith("session:") else jobs.get(key)
        assert row is not None, f"{label} ({key}) was lost by the upgrade"
        assert (row.state, row.user.username) == (state, owner), label
        if not label.startswith("session:"):
            assert row.slurm_job_id == slurm_id, label
    assert len(jobs) == 5 and len(sessions) == 2
    running = jobs[made["running"][0]]
    assert (running.nodes, running.start_at, running.account, running.origin) == ("node1", now, "vision", "portal")
    assert jobs[made["finished"][0]].gpu_hours == 0.5
    assert {s.server_name for s in sessions.values()} == {"starting", "running-lab"}
    from accounts.models import User

    assert User.objects.using(ALIAS).get(username="alice").link_state == "linked"  # still signs in as before
    from teams.models import Membership

    lead = Membership.objects.using(ALIAS).select_related("team", "user").get()
    assert (lead.team.name, lead.team.gpu_minutes_quota, lead.user.username, lead.role) == ("vision", 6000, "alice", "LEAD")
    audit_row = AuditEvent.objects.using(ALIAS).get()  # moved from the jobs app: same table, same row
    assert (audit_row.action, audit_row.job.name, audit_row.actor.username) == ("job.submitted", "running", "alice")

    # The poller's sync on the upgraded rows, in a process whose default database is this one.
    keys = {str(slurm_id): key for key, _, slurm_id, _ in (made[n] for n in ("pending", "running", "array"))}
    env = {**os.environ, "DATABASE_URL": pg_url(name), "DJANGO_SETTINGS_MODULE": "portal.settings.test"}
    env.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
    done = subprocess.run([sys.executable, "-m", "tests.production.upgrade_sync", json.dumps(keys)], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-4000:]
    synced = json.loads(done.stdout.strip().splitlines()[-1])
    assert synced["calls"] == [] and synced["result"]["failed"] == 0, synced
    rows = synced["rows"]
    assert len(rows) == 5  # no row lost, none doubled (the portal's jobs are not taken for outside ones)
    assert rows[made["running"][0]]["state"] == "RUNNING" and rows[made["running"][0]]["nodes"] == "node1"
    assert rows[made["pending"][0]]["state"] == "PENDING" and rows[made["pending"][0]]["reason"] == "Resources"
    array = rows[made["array"][0]]
    assert array["kind"] == "array" and array["state"] == "RUNNING", array  # task 1 runs, 2 waits
    assert rows[made["submitting"][0]]["state"] == "SUBMITTING" and rows[made["submitting"][0]]["slurm_job_id"] is None
    assert rows[made["finished"][0]]["state"] == "COMPLETED"
    # The idle culler leaves the carried-over sessions alone (no activity report yet: idle time
    # unknown), though the running one started a day before this run and the limit is 60 min.
    assert synced["culled"] == [] and synced["hub_stops"] == [], synced
    assert synced["sessions"] == {made[n][0]: made[n][1] for n in ("session:starting", "session:running-lab")}


def irreversible_operations(migration) -> list[str]:
    """Descriptions of the operations of ``migration`` that Django cannot reverse (database side)."""
    found = []
    for op in migration.operations:
        inner = op.database_operations if isinstance(op, SeparateDatabaseAndState) else [op]
        found += [o.describe() for o in inner if not o.reversible]
    return found


def test_a_migration_that_cannot_be_reversed_says_so():
    """Reverse migrations are not required; one that cannot be reversed says "cannot be reversed"
    in its module docstring, with why."""
    loader = MigrationLoader(None, ignore_no_migrations=True)
    ours = project_apps()
    silent = []
    for (app, name), migration in sorted(loader.disk_migrations.items()):
        if app not in ours:
            continue
        ops = irreversible_operations(migration)
        doc = (import_module(migration.__module__).__doc__ or "").lower()
        if ops and "cannot be reversed" not in doc:
            silent.append(f"{app}.{name}: {ops}")
    assert not silent, "irreversible migrations that do not say so: " + "; ".join(silent)


def test_the_irreversible_check_can_fail():
    """The check above sees a RunPython without reverse_code."""
    from django.db import migrations

    class Migration(migrations.Migration):
        operations = [migrations.RunPython(lambda apps, schema_editor: None)]

    assert irreversible_operations(Migration("0099_x", "jobs")) != []
