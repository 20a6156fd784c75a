from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("notifications", "0003_team_report_kind"),
    ]

    operations = [
        migrations.AlterField(
            model_name="notification",
            name="kind",
            field=models.CharField(
                choices=[
                    ("job_started", "Job started"),
                    ("job_finished", "Job finished"),
                    ("job_failed", "Job failed"),
                    ("job_pending", "Job pending longer than your chosen time"),
                    ("job_preempted", "Job preempted and requeued"),
                    ("session_stopping", "Session about to be stopped"),
                    ("team_quota", "Team GPU-hour quota at 80 % or 100 % (team leads)"),
                    ("team_report", "Team's monthly report (team leads)"),
                    ("identity_conflict", "Sign-in identity conflict (portal admins)"),
                ],
                max_length=24,
            ),
        ),
    ]
