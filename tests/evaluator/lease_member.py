"""One evaluation's side of a GPU lease, a process of its own (tests/evaluator/test_gpu_lease.py).

python lease_member.py FOLDER share SECONDS TICKS OUT   hold a share for SECONDS with a child
                                                     process that writes a tick to TICKS every
                                                     10 ms; write the paused seconds to OUT
python lease_member.py FOLDER time DELAY SECONDS OUT   after DELAY, hold the lease exclusive
                                                     for SECONDS, three times; write the
                                                     (start, end) of each to OUT
python lease_member.py FOLDER start SECONDS TICKS OUT   run a sandboxed child's part of the lease:
                                                     a child process that writes a tick to
                                                     TICKS every 10 ms asks for the GPU after
                                                     SECONDS (as the harness child does once
                                                     its imports are done) and runs on until
                                                     OUT.done exists; write when it asked and
                                                     was granted the GPU to OUT
python lease_member.py FOLDER clean SECONDS MARK OUT   measure row_softmax's clean reference on
                                                     a GPU named GPU-lease-test: its timing
                                                     holds the lease exclusive for SECONDS,
                                                     after writing MARK; write the answer
                                                     to OUT
"""

import json
import subprocess
import sys
import time
from pathlib import Path

from evaluator.harness import cleanreference, gpulease
from evaluator.harness.job import CleanReference, TimingSettings
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import Mode

TICKER = (
    "import sys, time\n"
    "with open(sys.argv[1], 'a', buffering=1) as out:\n"
    "    while True:\n"
    "        out.write(f'{time.monotonic()}\\n')\n"
    "        time.sleep(0.01)\n"
)


def measure_clean(lease: gpulease.GpuLease, seconds: float, mark: Path) -> dict:
    """The clean reference as an evaluation asks for it, its timing a hold of the lease."""

    def timed(*args: object) -> CleanReference:
        mark.write_text("measuring")
        with lease.exclusive():
            time.sleep(seconds)
        return CleanReference(ref_median_ms={"w": 0.5})

    cleanreference.clean_reference_times = timed  # type: ignore[assignment]
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    clean = cleanreference.reusable_clean_reference(
        task, Mode.CUDA, TimingSettings(), Path("/nonexistent"), 60.0, None, "GPU-lease-test"
    )
    return {"age_s": clean.age_s, "ref_median_ms": clean.ref_median_ms}


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
        if role == "start":
            with lease.child(lambda request: {"step": "end"}) as steps:
                assert steps is not None
                ticker = subprocess.Popen([sys.executable, "-c", TICKER, second])
                time.sleep(float(first))
                asked = time.monotonic()
                steps({"what": "gpu"})
                granted = time.monotonic()
                Path(f"{out}.granted").write_text(str(granted))
                while not Path(f"{out}.done").exists():
                    time.sleep(0.02)
                ticker.kill()
                ticker.wait()
            report = {"asked": asked, "granted": granted, "lease": lease.summary()}
            Path(out).write_text(json.dumps(report))
            return
        if role == "clean":
            Path(out).write_text(json.dumps(measure_clean(lease, float(first), Path(second))))
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
