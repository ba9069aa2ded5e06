"""Convert an agent log (an OpenAI-style chat transcript) to a D2K trace (JSON Lines)."""

import json
import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from runs.convert import TranscriptError, openai_chat_to_trace, trace_dumps


class Command(BaseCommand):
    help = "Convert an OpenAI-style chat transcript (JSON) to traces/<task>.jsonl."

    def add_arguments(self, parser):
        parser.add_argument("transcript", type=Path, help="The transcript's JSON file.")
        parser.add_argument("--task", required=True, help="The task's slug.")
        parser.add_argument("--condition", default="none", help="`none`, or e.g. L1+L2+L3.")
        parser.add_argument("--output", type=Path, help="Where to write (default: stdout).")

    def handle(self, *args, **options):
        try:
            transcript = json.loads(options["transcript"].read_text(encoding="utf-8"))
            events = openai_chat_to_trace(
                transcript=transcript, task=options["task"], condition=options["condition"]
            )
        except (OSError, UnicodeDecodeError, json.JSONDecodeError, TranscriptError) as exc:
            raise CommandError(f"{options['transcript']}: {exc}") from exc
        text = trace_dumps(events)
        if options["output"]:
            options["output"].write_text(text, encoding="utf-8")
            self.stderr.write(f"Wrote {len(events)} events to {options['output']}.")
        else:
            sys.stdout.write(text)
