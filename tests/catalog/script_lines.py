"""Running a catalog test script (`python -m tests.catalog.<module>`) in its own process."""

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def script_json_lines(module: str, *args: str, timeout: float = 1800) -> list[dict]:
    """The JSON objects the script printed, a line each; it must exit 0."""
    proc = subprocess.run(
        [sys.executable, "-m", f"tests.catalog.{module}", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    return [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
