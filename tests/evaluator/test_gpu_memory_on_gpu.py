"""A full GPU's memory, as each layer of the stack says so: every such error is recognised.

    python -m pytest -o addopts="" -m gpu tests/evaluator/test_gpu_memory_on_gpu.py

This process fills the GPU's memory. Then a process that had made its CUDA context
before launches a Triton kernel for the first time (its module is loaded then) and
makes a cuBLAS handle, and a fresh process makes a context. Whatever of these fails
must read as the GPU's memory running out (gpumemory.gpu_out_of_memory), so that
beside other evaluations it is the worker's, and the judge waits for it.
"""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from evaluator.harness.gpumemory import gpu_out_of_memory

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU"),
]

# Made its context and inputs first; after "go", each step's error as "step: Type: text".
STARTED = textwrap.dedent(
    """
    import sys, torch, triton, triton.language as tl

    @triton.jit
    def add_one(x, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        tl.store(x + offs, tl.load(x + offs, mask=offs < n) + 1, mask=offs < n)

    x = torch.zeros(1024, device="cuda")
    a = torch.ones(64, 64, device="cuda", dtype=torch.bfloat16)
    print("ready", flush=True)
    sys.stdin.readline()
    for step, work in [
        ("triton", lambda: add_one[(1,)](x, 1024, BLOCK=1024)),
        ("cublas", lambda: a @ a),
    ]:
        try:
            work()
            torch.cuda.synchronize()
            print(f"{step}: ran", flush=True)
        except Exception as error:
            text = f"{type(error).__name__}: {error}".replace(chr(10), " ")
            print(f"{step}: {text}", flush=True)
    """
)
FRESH = textwrap.dedent(
    """
    import torch
    try:
        torch.zeros(1, device="cuda")
        print("context: ran")
    except Exception as error:
        print(f"context: {type(error).__name__}: {error}".replace(chr(10), " "))
    """
)


def _fill() -> list[torch.Tensor]:
    """Every byte of the GPU's memory this process can take."""
    held = []
    for size in (2**30, 2**26, 2**20):
        while True:
            try:
                held.append(torch.empty(size, dtype=torch.uint8, device="cuda"))
            except torch.OutOfMemoryError:
                break
    return held


def test_every_layer_s_out_of_memory_on_a_full_gpu_reads_as_such():
    started = subprocess.Popen(
        [sys.executable, "-c", STARTED],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    assert started.stdout is not None and started.stdin is not None
    assert started.stdout.readline().strip() == "ready"
    held = _fill()
    free = torch.cuda.mem_get_info()[0]
    started.stdin.write("go\n")
    started.stdin.flush()
    lines = started.communicate(timeout=300)[0].splitlines()
    fresh = subprocess.run(
        [sys.executable, "-c", FRESH], capture_output=True, text=True, timeout=300
    ).stdout.splitlines()
    del held
    torch.cuda.empty_cache()
    results = dict(line.split(": ", 1) for line in lines + fresh if ": " in line)
    print(f"free after the fill: {free / 2**20:.0f} MiB; {results}")
    assert set(results) >= {"triton", "cublas", "context"}, lines + fresh
    failed = {step: text for step, text in results.items() if text != "ran"}
    assert failed, "nothing failed on a full GPU: the fill left room"
    assert all(gpu_out_of_memory(text) for text in failed.values()), failed
