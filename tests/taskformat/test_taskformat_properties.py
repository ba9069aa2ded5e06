"""Design properties judged from what ran: gaming kernels get no credit for what they fake.

Each gaming kernel is correct, or would be: what it fakes sits in code that never
runs (a branch every launch's constants turn off, a default no launch changes, a
kernel the profiler never saw launched) or off its data path (a reshape or an int64
cast whose value nothing stores, a power of two that sizes no tile). The same
source with the idiom really used earns the property: the test can fail both ways.
"""

from pathlib import Path

import pytest

from taskformat.detectors import assess
from taskformat.package import DEFAULT_CATALOG_DIR, load_task
from taskformat.properties import declared_evidence, properties_assess

GAMING = Path(__file__).parent / "gaming"


def implemented(slug: str, source: str, **kwargs) -> dict[str, bool | None]:
    task = load_task(DEFAULT_CATALOG_DIR / slug)
    return {f.key: f.implemented for f in properties_assess(task.properties, source, **kwargs)}


def test_idioms_in_a_branch_every_launch_turns_off_earn_nothing():
    gamed = (GAMING / "softmax_dead_branch.py").read_text()
    faked = ("online_normalizer", "looped_two_pass", "exp2_prescaled")
    got = implemented("row_softmax", gamed)
    assert {k: got[k] for k in faked} == dict.fromkeys(faked, False)
    honest = implemented("row_softmax", gamed.replace("FAST=False", "FAST=True"))
    assert {k: honest[k] for k in faked} == dict.fromkeys(faked, True)


def test_a_tensor_core_gemm_in_a_branch_every_launch_turns_off_earns_nothing():
    gamed = (GAMING / "gemm_dead_branch.py").read_text()
    faked = (
        "tensor_core_dot",
        "fp32_tile_accumulator",
        "grouped_ordering",
        "unmasked_k_loop",
        "host_config_from_shape",
    )
    got = implemented("gemm_bf16", gamed)
    assert {k: got[k] for k in faked} == dict.fromkeys(faked, False)
    honest = implemented("gemm_bf16", gamed.replace("TILED=False", "TILED=True"))
    assert {k: honest[k] for k in faked} == dict.fromkeys(faked, True)


KERNEL = """
import torch
import triton
import triton.language as tl


@triton.jit
def _scale(x_ptr, y_ptr, n, BLOCK: tl.constexpr{params}):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
{body}
    tl.store(y_ptr + offs, y, mask=offs < n)


@triton.jit
def _fancy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    x = tl.load(x_ptr + offs, mask=offs < n)
    tl.store(y_ptr + offs, tl.exp2(x * 1.4426950408889634), mask=offs < n)


class ModelNew(torch.nn.Module):
    def forward(self, x):
        y = torch.empty_like(x)
        n = x.numel()
{host}
        return y
"""
LAUNCH = "        _scale[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024{args})"
EXP2 = {"kind": "exp2_log2e"}


def kernel(params="", body="    y = tl.exp(x)", host=None, args=""):
    host = host if host is not None else LAUNCH.format(args=args)
    return KERNEL.format(params=params, body=body, host=host)


DEAD_EXP2 = (
    "    if FAST:\n        y = tl.exp2(x * 1.4426950408889634)\n    else:\n        y = tl.exp(x)"
)


@pytest.mark.parametrize(
    ("case", "source", "detector", "faked"),
    [
        (
            "a constexpr branch a launch turns off",
            kernel(params=", FAST: tl.constexpr", body=DEAD_EXP2, args=", FAST=False"),
            EXP2,
            True,
        ),
        (
            "a constexpr branch behind a default no launch changes",
            kernel(params=", FAST: tl.constexpr = False", body=DEAD_EXP2),
            EXP2,
            True,
        ),
        (
            "a constexpr branch a launch turns on",
            kernel(params=", FAST: tl.constexpr", body=DEAD_EXP2, args=", FAST=True"),
            EXP2,
            False,
        ),
        (
            "a default that a heuristics decorator may override",
            kernel(params=", FAST: tl.constexpr = False", body=DEAD_EXP2).replace(
                "@triton.jit\ndef _scale",
                "@triton.heuristics({'FAST': lambda args: args['n'] > 4096})\n"
                "@triton.jit\ndef _scale",
            ),
            EXP2,
            False,
        ),
        (
            "a branch on a tile size no launch passes",
            kernel(
                body="    if BLOCK > 4096:\n        y = tl.exp2(x * 1.4426950408889634)\n"
                "    else:\n        y = tl.exp(x)"
            ),
            EXP2,
            True,
        ),
        (
            "an autotuned tile size no config gives",
            kernel(
                body="    if BLOCK == 64:\n        y = tl.exp2(x * 1.4426950408889634)\n"
                "    else:\n        y = tl.exp(x)"
            )
            .replace(
                "@triton.jit\ndef _scale",
                "@triton.autotune(configs=[triton.Config({'BLOCK': 1024}), "
                "triton.Config({'BLOCK': 2048})], key=['n'])\n@triton.jit\ndef _scale",
            )
            .replace(", BLOCK=1024)", ")"),
            EXP2,
            True,
        ),
        (
            "a reshape whose value nothing stores",
            kernel(body="    z = tl.reshape(x, (BLOCK // 2, 2))\n    y = x * 2"),
            {"kind": "device_call", "names": ["tl.reshape"], "feeds_store": True},
            True,
        ),
        (
            "a reshape on the data path",
            kernel(body="    y = tl.reshape(tl.reshape(x, (BLOCK // 2, 2)), (BLOCK,))"),
            {"kind": "device_call", "names": ["tl.reshape"], "feeds_store": True},
            False,
        ),
        (
            "an int64 cast no address uses",
            kernel(body="    wide = tl.program_id(0).to(tl.int64)\n    y = x * 2"),
            {"kind": "device_ref", "names": ["tl.int64"], "feeds_store": True},
            True,
        ),
        (
            "an int64 offset the store uses",
            kernel(body="    y = x * 2\n    offs = offs.to(tl.int64)"),
            {"kind": "device_ref", "names": ["tl.int64"], "feeds_store": True},
            False,
        ),
        (
            "next_power_of_2 merely called",
            kernel(
                host="        block = triton.next_power_of_2(n)\n"
                + LAUNCH.format(args="").replace("(triton.cdiv(n, 1024),)", "(block,)")
            ),
            {"kind": "host_call", "names": ["triton.next_power_of_2"], "to_tile": True},
            True,
        ),
        (
            "next_power_of_2 sizing the tile",
            kernel(
                host="        block = triton.next_power_of_2(n)\n"
                + LAUNCH.format(args="").replace("BLOCK=1024", "BLOCK=block")
            ),
            {"kind": "host_call", "names": ["triton.next_power_of_2"], "to_tile": True},
            False,
        ),
        (
            "a tensor-core dot padded into a branch every launch turns off",
            kernel(
                params=", PAD: tl.constexpr",
                body="    acc = tl.zeros((16, 16), tl.float32)\n    for k in range(4):\n"
                "        if PAD:\n            acc = tl.dot(tl.reshape(x, (16, 16)), "
                "tl.reshape(x, (16, 16)), acc)\n    y = x + tl.sum(acc)",
                args=", PAD=False",
            ),
            {"kind": "dot_accumulate"},
            True,
        ),
    ],
)
def test_a_faked_idiom_earns_nothing_and_a_real_one_earns_its_property(
    case, source, detector, faked
):
    compile(source, case, "exec")
    result = assess(detector, source)
    assert result is not None and result.kind == "source"
    assert result.value is (not faked), (case, result.rationale)


def test_a_kernel_the_profiler_never_saw_launched_earns_nothing():
    # `_fancy` runs only for a shape no workload has: the host condition cannot be
    # folded from the source, but the cuda verdict names the kernels that ran.
    source = kernel(
        host="        if n == 12345:\n"
        "            _fancy[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)\n"
        "        else:\n" + "    " + LAUNCH.format(args="")
    )
    assert assess(EXP2, source).value is True  # the source alone: provisional
    assert assess(EXP2, source, launched=["_scale"]).value is False
    assert assess(EXP2, source, launched=["_scale", "_fancy"]).value is True


def test_the_findings_name_their_evidence_and_leave_manual_properties_to_a_judge():
    task = load_task(DEFAULT_CATALOG_DIR / "histogram")
    findings = properties_assess(task.properties, task.expert_source)
    assert [f.key for f in findings] == [p.key for p in task.properties]
    for finding, prop in zip(findings, task.properties, strict=True):
        entry = finding.to_dict()
        assert set(entry) >= {"key", "level", "implemented", "evidence"}
        assert set(entry["evidence"]) == {"kind", "excerpt"}
        if declared_evidence(prop.detector, prop.counters) is None:
            assert entry["implemented"] is None and entry["evidence"]["kind"] is None
        else:
            assert entry["evidence"]["kind"] in ("counter", "compiled_code", "source")
    timed = [{"name": "w", "counters": {"dram_bytes": 100, "min_bytes": 100, "tool": "ncu"}}]
    rule = {"kind": "traffic", "max_ratio": 1.3}

    class Prop:
        key, level, detector, counters = "single", "L2", {"kind": "manual"}, rule

    (counted,) = properties_assess([Prop()], "", timed=timed)
    assert (counted.implemented, counted.kind) == (True, "counter")
    (untimed,) = properties_assess([Prop()], "")
    assert (untimed.implemented, untimed.kind) == (None, None)


CUDA = '''
import torch
from torch.utils.cpp_extension import load_inline

SRC = r"""
__global__ void plain(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = expf(x[i]); }
}
__global__ void __launch_bounds__(256) fancy(const float* x, float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) { y[i] = exp2f(x[i] * 1.4426950408889634f); }
}
"""
mod = load_inline("m", cpp_sources="", cuda_sources=SRC, functions=["run"])


class ModelNew(torch.nn.Module):
    def forward(self, x):
        return mod.run(x)
'''


def test_a_cuda_kernel_the_profiler_never_saw_launched_earns_nothing():
    found = {"kind": "regex", "pattern": "exp2f", "scope": "cuda"}
    assert assess(found, CUDA).value is True  # the source alone: provisional
    assert assess(found, CUDA, launched=["plain"]).value is False
    assert assess(found, CUDA, launched=["plain", "fancy"]).value is True
