"""The reaper runs every minute in any django-q2 cluster (`evaluation_worker` also runs
it every few seconds in its own process)."""

from django.db import migrations

REAPER = "evaluator.tasks.evaluation_reap"


def schedule_add(apps, schema_editor):
    Schedule = apps.get_model("django_q", "Schedule")
    if not Schedule.objects.filter(func=REAPER).exists():
        Schedule.objects.create(
            name="evaluation reaper", func=REAPER, schedule_type="I", minutes=1, repeats=-1
        )


def schedule_remove(apps, schema_editor):
    apps.get_model("django_q", "Schedule").objects.filter(func=REAPER).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("evaluator", "0002_job_lease"),
        ("django_q", "0019_alter_task_options_alter_ormq_key_alter_ormq_lock_and_more"),
    ]

    operations = [migrations.RunPython(schedule_add, schedule_remove)]
