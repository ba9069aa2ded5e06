"""The child's messages in cuda mode follow exactly the protocol the parent enforces.

The parent flags any deviation as result_channel, so a mismatch between what
child.py sends and what protocol.py expects would flag every honest kernel on
a GPU (it did once: batch messages without their workload). This test runs
the child's whole cuda-mode flow, timing included, on the CPU with CUDA's
timing calls faked, and feeds its messages to the parent's reader.
"""

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.harness import orchestrate, protocol
from evaluator.harness.package import DEFAULT_CATALOG_DIR, load_task
from evaluator.harness.spec import Mode

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow


def test_cuda_mode_messages_satisfy_the_parent_protocol(tmp_path):
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    checks = task.workloads_for(Mode.INTERPRET)[:2]
    plan = orchestrate._plan(task, checks, Mode.CUDA)
    for workload in plan["workloads"]:
        workload["timed"] = True
    job = {
        "mode": "cuda",
        "device": "cpu",
        "reference": str(DEFAULT_CATALOG_DIR / "row_softmax" / "reference.py"),
        "submission": str(DEFAULT_CATALOG_DIR / "row_softmax" / "expert.py"),
        "out_dir": str(tmp_path / "out"),
        "inplace": False,
        "timing": {
            **orchestrate.TIMING,
            "min_calls": 3,
            "max_calls": 4,
            "budget_s": 0.1,
            "batch_ms": 1.0,
        },
        **plan,
    }
    (tmp_path / "job.json").write_text(json.dumps(job))
    read_fd, write_fd = os.pipe()
    bootstrap = (
        "import sys; sys.path[:0] = [sys.argv[3], sys.argv[4]]; import cuda_fakes; "
        "cuda_fakes.install(); from evaluator.harness.child import main; main()"
    )
    proc = subprocess.Popen(
        [
            sys.executable,
            "-c",
            bootstrap,
            str(tmp_path / "job.json"),
            str(write_fd),
            str(ROOT),
            str(Path(__file__).parent),
        ],
        pass_fds=(write_fd,),
        env={**os.environ, "TRITON_INTERPRET": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    os.close(write_fd)
    with os.fdopen(read_fd, "rb") as pipe:
        lines = pipe.read().splitlines()
    log = proc.communicate(timeout=600)[0].decode(errors="replace")
    messages = [(float(i), json.loads(line)) for i, line in enumerate(lines)]

    seen = protocol.collect(messages, plan)
    assert seen.flags == [], (seen.flags, log[-3000:])
    assert seen.done and seen.error is None
    assert set(seen.timings) == set(seen.batches) == {w.name for w in checks}
    for name, timing in seen.timings.items():
        assert timing["sub_ms"] and timing["ref_ms"] and timing["prints"]
        assert seen.batches[name]["calls"] >= 2
