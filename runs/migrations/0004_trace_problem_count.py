"""Trace.problem_count: every problem of a trace is counted, the first 100 kept."""

from django.db import migrations, models

KEPT = 100


def counts_fill(apps, schema_editor):
    """Existing traces kept every problem: count them, keep the first KEPT."""
    trace_model = apps.get_model("runs", "Trace")
    for trace in trace_model.objects.only("pk", "problems").iterator(chunk_size=100):
        count = len(trace.problems)
        trace_model.objects.filter(pk=trace.pk).update(
            problem_count=count, problems=trace.problems[:KEPT]
        )


class Migration(migrations.Migration):
    dependencies = [("runs", "0003_run_guidance_versions")]

    operations = [
        migrations.AddField(
            model_name="trace",
            name="problem_count",
            field=models.PositiveIntegerField(
                default=0,
                help_text="Lines that break the schema, all of them (`problems` keeps 100).",
            ),
        ),
        migrations.AlterField(
            model_name="trace",
            name="problems",
            field=models.JSONField(
                blank=True, default=list, help_text='The first problems: [{"line", "message"}].'
            ),
        ),
        migrations.RunPython(counts_fill, migrations.RunPython.noop),
    ]
