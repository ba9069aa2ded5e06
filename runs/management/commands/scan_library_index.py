"""Rebuild the pasted-library index (runs/scanners/data/library-index.json) from the
library sources installed in this environment."""

import importlib.util
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError

from runs.scanners.library import INDEX_PATH, LibraryIndex

# (name shown in a hit, module whose file is indexed)
SOURCES = (
    ("torch.nn.functional", "torch.nn.functional"),
    ("torch.nn.modules.activation", "torch.nn.modules.activation"),
    ("triton.language.standard", "triton.language.standard"),
)


def _module_file(module: str) -> Path:
    parent, _, leaf = module.rpartition(".")
    spec = importlib.util.find_spec(parent)
    if spec is None or not spec.submodule_search_locations:
        raise CommandError(f"{parent} is not installed here: cannot index {module}.")
    return Path(next(iter(spec.submodule_search_locations))) / f"{leaf}.py"


class Command(BaseCommand):
    help = "Rebuild the index of known library sources that the pasted-library scanner uses."

    def handle(self, *args: Any, **options: Any) -> None:
        sources = {
            name: _module_file(module).read_text(encoding="utf-8") for name, module in SOURCES
        }
        index = LibraryIndex.from_sources(sources)
        INDEX_PATH.parent.mkdir(parents=True, exist_ok=True)
        INDEX_PATH.write_text(index.dump() + "\n", encoding="utf-8")
        self.stdout.write(f"{len(index.hashes)} shingles from {len(sources)} sources: {INDEX_PATH}")
