"""One evaluation's side of a GPU lease, a process of its own (tests/evaluator/test_gpu_lease.py).

python lease_member.py FOLDER share SECONDS TICKS OUT   hold a share for SECONDS with a child
                                                     process that writes a tick to TICKS every
                                                     10 ms; write the paused seconds to OUT
python lease_member.py FOLDER time DELAY SECONDS OUT   after DELAY, hold the lease exclusive
                                                     for SECONDS, three times; write the
                                                     (start, end) of each to OUT
"""

import json
import subprocess
import sys
import time
from pathlib import Path

from evaluator.harness import gpulease

TICKER = (
    "import sys, time\n"
    "with open(sys.argv[1], 'a', buffering=1) as out:\n"
    "    while True:\n"
    "        out.write(f'{time.monotonic()}\\n')\n"
    "        time.sleep(0.01)\n"
)


def main() -> None:
    folder, role, first, second, out = sys.argv[1:6]
    with gpulease.joined(Path(folder)) as lease:
        if role == "share":
            ticker = subprocess.Popen([sys.executable, "-c", TICKER, second])
            Path(f"{out}.pid").write_text(str(ticker.pid))
            time.sleep(float(first))
            ticker.kill()
            ticker.wait()
            report = {"paused_s": lease.paused_seconds(), "gpu_busy": lease.gpu_busy}
            Path(out).write_text(json.dumps(report))
            return
        time.sleep(float(first))
        phases = []
        for _ in range(3):
            with lease.exclusive():
                started = time.monotonic()
                time.sleep(float(second))
                phases.append((started, time.monotonic()))
        Path(out).write_text(json.dumps({"phases": phases, "report": lease.summary()}))


if __name__ == "__main__":
    main()
