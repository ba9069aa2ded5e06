from django.conf import settings
from django.core.management.base import BaseCommand, CommandError

from evaluator.selectors import baselines_pending
from evaluator.services import expert_remeasure_queue
from task_catalog.models import Task


class Command(BaseCommand):
    help = (
        "Queue the expert implementations whose task changed what is measured for a GPU "
        "re-measure on each GPU's pool, so their baselines come back (idempotent)."
    )

    def add_arguments(self, parser):
        parser.add_argument("--task", action="append", default=[], help="only these slugs")
        parser.add_argument(
            "--hardware", default="", help="a GPU pool; with --task, measure there even if new"
        )

    def handle(self, *args, task: list[str], hardware: str, **options) -> None:
        pools = {p.strip() for p in settings.D2K_HARDWARE_POOLS} | {settings.D2K_DEFAULT_HARDWARE}
        if hardware and hardware not in pools:
            raise CommandError(f"No pool {hardware!r}: D2K_HARDWARE_POOLS names {sorted(pools)}.")
        tasks = {t.slug: t for t in Task.objects.filter(current_version__isnull=False)}
        if unknown := sorted(set(task) - set(tasks)):
            raise CommandError(f"Unknown task(s): {', '.join(unknown)}.")
        wanted = {(p.slug, p.gpu) for p in baselines_pending() if hardware in ("", p.gpu)}
        if task:
            wanted = {(slug, gpu) for slug, gpu in wanted if slug in task}
            wanted |= {(slug, hardware) for slug in task if hardware}
        for slug, gpu in sorted(wanted):
            if gpu not in pools:
                self.stdout.write(f"{slug}: skipped: no pool {gpu!r} (see D2K_HARDWARE_POOLS)")
            else:
                self.stdout.write(str(expert_remeasure_queue(task=tasks[slug], hardware=gpu)))
        self.stdout.write(self.style.SUCCESS(f"{len(wanted)} baseline(s) to re-measure"))
