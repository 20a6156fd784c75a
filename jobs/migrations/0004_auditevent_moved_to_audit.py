"""AuditEvent now belongs to the audit app (``audit/migrations/0001_initial.py``): it leaves the jobs
app's state only. The table ``jobs_auditevent`` and its rows are not touched."""

from django.db import migrations


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0003_job_profile_job_profile_spec"),
        ("audit", "0001_initial"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[migrations.DeleteModel(name="AuditEvent")],
            database_operations=[],
        ),
    ]
