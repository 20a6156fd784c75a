from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("jobs", "0018_job_gpu_sm_means")]

    operations = [
        migrations.AddField(
            model_name="job",
            name="priority_class",
            field=models.CharField(
                blank=True,
                default="",
                help_text="--qos: the priority class chosen (teams.priority_classes); '' = none",
                max_length=20,
            ),
        ),
    ]
