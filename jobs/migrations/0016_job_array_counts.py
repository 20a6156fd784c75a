"""Job.array_counts: an array's tasks counted by group, stored by the poller beside the ranges, and
filled in here for the arrays already stored."""

from django.db import migrations, models


def fill(apps, schema_editor):
    from jobs.arrays import load_tasks, task_totals

    Job = apps.get_model("jobs", "Job")
    db = schema_editor.connection.alias  # the database being migrated, not the default one
    arrays = Job.objects.using(db).filter(kind="array").exclude(array_tasks={}).only("pk", "array_tasks")
    changed = []
    for job in arrays.iterator(chunk_size=500):
        job.array_counts = task_totals(load_tasks(job.array_tasks))
        changed.append(job)
    Job.objects.using(db).bulk_update(changed, ["array_counts"], batch_size=500)


class Migration(migrations.Migration):
    dependencies = [
        ("jobs", "0015_job_memory_per_gpu"),
    ]

    operations = [
        migrations.AddField(
            model_name="job",
            name="array_counts",
            field=models.JSONField(blank=True, default=dict),
        ),
        migrations.RunPython(fill, migrations.RunPython.noop),
    ]
