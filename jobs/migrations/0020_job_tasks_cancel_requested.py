from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0019_job_priority_class")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="tasks_cancel_requested",
            field=models.TextField(blank=True, default=""),
        ),
    ]
