"""The cuda workloads checked for correctness only, never timed, have the role `untimed`
(they were `hidden`, the name of a flag they also carry)."""

from django.db import migrations, models


def roles_rename(apps, old: str, new: str) -> None:
    apps.get_model("task_catalog", "Workload").objects.filter(role=old).update(role=new)


def forwards(apps, schema_editor):
    roles_rename(apps, "hidden", "untimed")


def backwards(apps, schema_editor):
    roles_rename(apps, "untimed", "hidden")


class Migration(migrations.Migration):
    dependencies = [
        ("task_catalog", "0006_guidance_versions"),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name="workload",
            name="workload_hidden_role_is_hidden",
        ),
        migrations.RunPython(forwards, backwards),
        migrations.AlterField(
            model_name="workload",
            name="role",
            field=models.CharField(
                choices=[
                    ("timed", "timed (public)"),
                    ("untimed", "untimed (correctness only)"),
                    ("check", "check (CPU interpreter)"),
                ],
                max_length=8,
            ),
        ),
        migrations.AddConstraint(
            model_name="workload",
            constraint=models.CheckConstraint(
                condition=models.Q(
                    models.Q(("role", "untimed"), _negated=True), ("hidden", True), _connector="OR"
                ),
                name="workload_untimed_role_is_hidden",
            ),
        ),
    ]
