"""AuditEvent moves from the jobs app to this one. The table (``jobs_auditevent``), its rows, indexes
and foreign keys stay exactly as they are: only Django's state moves (``SeparateDatabaseAndState``);
``jobs/migrations/0004_auditevent_moved_to_audit.py`` removes it from the jobs app's state. The
content type is relabelled so existing permissions follow the model."""

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models


def relabel_content_type(apps, schema_editor, *, old: str = "jobs", new: str = "audit") -> None:
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    if not ContentType.objects.using(db).filter(app_label=new, model="auditevent").exists():
        ContentType.objects.using(db).filter(app_label=old, model="auditevent").update(app_label=new)


def relabel_back(apps, schema_editor) -> None:
    relabel_content_type(apps, schema_editor, old="audit", new="jobs")


class Migration(migrations.Migration):
    initial = True

    dependencies = [
        ("contenttypes", "0002_remove_content_type_name"),
        ("jobs", "0003_job_profile_job_profile_spec"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="AuditEvent",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("at", models.DateTimeField(auto_now_add=True)),
                        ("action", models.CharField(db_index=True, max_length=64)),
                        ("target", models.CharField(blank=True, db_index=True, default="", max_length=200)),
                        ("old", models.JSONField(blank=True, default=dict)),
                        ("new", models.JSONField(blank=True, default=dict)),
                        (
                            "actor",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.SET_NULL,
                                related_name="+",
                                to=settings.AUTH_USER_MODEL,
                            ),
                        ),
                        (
                            "job",
                            models.ForeignKey(
                                blank=True,
                                null=True,
                                on_delete=django.db.models.deletion.CASCADE,
                                related_name="audit",
                                to="jobs.job",
                            ),
                        ),
                    ],
                    options={
                        "db_table": "jobs_auditevent",
                        "ordering": ["-at"],
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(relabel_content_type, relabel_back),
    ]
