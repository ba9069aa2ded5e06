"""A workload result's role `hidden` (evaluators before 0.5.0) is `untimed`: checked for
correctness only, never timed. Whether the workload is hidden is its own column."""

from django.db import migrations


def roles_rename(apps, old: str, new: str) -> None:
    apps.get_model("evaluator", "WorkloadResult").objects.filter(role=old).update(role=new)


def forwards(apps, schema_editor):
    roles_rename(apps, "hidden", "untimed")


def backwards(apps, schema_editor):
    roles_rename(apps, "untimed", "hidden")


class Migration(migrations.Migration):
    dependencies = [
        ("evaluator", "0007_workload_counters"),
    ]

    operations = [
        migrations.RunPython(forwards, backwards),
    ]
