"""Hardware counters on a real GPU: the row_softmax expert moves about its minimum bytes.

    python -m pytest -o addopts="" -m gpu tests/evaluator/test_counters_on_gpu.py -v

The expert reads x once and writes y once, so each timed workload's traffic
(DRAM reads, plus the writes the SMs sent to the L2) must lie within 0.9 and
1.5 times its `bytes` formula. Needs ncu with access to the performance
counters (the H200 hosts); where ncu cannot read them the verdict's note
says why and the test fails with that note.
"""

from __future__ import annotations

import pytest
import torch

from evaluator.harness.orchestrate import evaluate
from evaluator.harness.verdict import Status
from taskformat.hidden import task_with_hidden
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.spec import Mode

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]


def test_the_row_softmax_expert_moves_about_its_minimum_bytes():
    task = task_with_hidden(load_task(DEFAULT_CATALOG_DIR / "row_softmax"), secret="gpu-counters")
    source = (DEFAULT_CATALOG_DIR / "row_softmax" / "expert.py").read_text()
    verdict = evaluate(task=task, source=source, mode=Mode.CUDA, timeout_s=300)
    assert verdict.status is Status.CORRECT, verdict.message
    note = verdict.environment["counters"]
    assert note.startswith("read by ncu"), note
    parts = {"child", "judge", "clean_reference", "counters"}
    assert set(verdict.environment["phase_seconds"]) == parts
    timed = [w for w in verdict.workloads if w.role == "timed"]
    assert timed and all(w.counters for w in timed), note
    for w in timed:
        c = w.counters
        assert c is not None
        assert 0.9 <= c["traffic_ratio"] <= 1.5, (w.name, c)
        assert c["kernels"] >= 1 and c["tool"].startswith("ncu ")
        # A softmax has no matrix product: no tensor-core instruction.
        assert c["tensor_share"] is not None and c["tensor_share"] < 0.01, (w.name, c)
    hidden = [w for w in verdict.workloads if w.hidden]
    assert hidden and all(w.counters is None for w in hidden)
