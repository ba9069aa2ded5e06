"""How long the catalog's regex detectors take on hostile device code, at the size they read.

    python bench/detector_hostile.py [--chars 131072]

A submission's source is untrusted and the detectors read it on the worker. Each
catalog regex pattern is run over texts of `--chars` characters (the regex
primitive's REGEX_TEXT_LIMIT by default) built to keep its repetitions busy: many
near-matching assignment lines, loads before loops, accumulations, index
arithmetic, one endless line (cut as the primitive cuts every line), and deep
indentation. Prints the slowest patterns
and the worst total over every pattern for one text.
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from taskformat.detectors.primitives.calls import (
    REGEX_LINE_LIMIT,
    REGEX_TEXT_LIMIT,
    regex_patterns,
)
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs, load_task

LINES = {
    "assignments": "    a{i} = b{i} * c + tl.arange(0, 4)\n",
    "loads_before_loops": "    x{i} = tl.load(p)\n    for k in range(n):\n        y = x{i} // 2\n",
    "accumulations": "    acc{i} += tl.dot(a, b)\n",
    "index_arithmetic": "    q{i} = r % s\n    t = r // s\n",
    "indentation": "{indent}v{i} = tl.load(p)\n",
}


def texts(chars: int) -> dict[str, str]:
    out = {"one_line": "    " + "a" * (chars - 5) + "\n"}
    for name, line in LINES.items():
        parts, size, i = [], 0, 0
        while size < chars:
            part = line.format(i=i, indent="    " * (i % 30))
            parts.append(part)
            size, i = size + len(part), i + 1
        out[name] = "".join(parts)[:chars]
    # As the regex primitive reads them: every line cut at REGEX_LINE_LIMIT.
    return {
        name: "\n".join(line[:REGEX_LINE_LIMIT] for line in text.split("\n"))
        for name, text in out.items()
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--chars", type=int, default=REGEX_TEXT_LIMIT)
    args = parser.parse_args()
    found = [
        (task.slug, prop.key, pattern)
        for path in iter_task_dirs(DEFAULT_CATALOG_DIR)
        for task in [load_task(path)]
        for prop in task.properties
        for pattern in regex_patterns(prop.detector)
    ]
    timings, totals = [], {}
    for name, text in texts(args.chars).items():
        total = 0.0
        for slug, key, pattern in found:
            started = time.perf_counter()
            list(re.finditer(pattern, text, flags=re.MULTILINE))
            seconds = time.perf_counter() - started
            total += seconds
            timings.append((seconds, name, slug, key))
        totals[name] = total
    timings.sort(reverse=True)
    print(f"{len(found)} regex patterns, texts of {args.chars} characters")
    for seconds, name, slug, key in timings[:8]:
        print(f"  {seconds * 1e3:9.1f} ms  {slug}.{key} on {name}")
    worst = max(totals, key=totals.__getitem__)
    print(f"worst text: {worst}, {totals[worst]:.2f} s over every pattern")


if __name__ == "__main__":
    main()
