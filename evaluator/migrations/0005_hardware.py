from django.db import migrations, models


def backfill(apps, schema_editor):
    Evaluation = apps.get_model("evaluator", "Evaluation")
    for evaluation in Evaluation.objects.exclude(environment={}).only("pk", "environment"):
        gpu = (evaluation.environment or {}).get("gpu")
        if gpu:
            Evaluation.objects.filter(pk=evaluation.pk).update(hardware=str(gpu)[:200])


class Migration(migrations.Migration):
    dependencies = [
        ("evaluator", "0004_public_log"),
    ]

    operations = [
        migrations.AddField(
            model_name="evaluation",
            name="hardware",
            field=models.CharField(
                blank=True,
                db_index=True,
                help_text="The GPU the verdict was timed on; blank when untimed.",
                max_length=200,
            ),
        ),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
