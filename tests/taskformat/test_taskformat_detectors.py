# ruff: noqa: E501  (table rows: one case per line reads better than wrapped source strings)
"""Detector primitives, each fooled both ways: renamed variables, dead code, keywords in
comments and strings, host-side look-alikes, and CUDA C++ compiled with load_inline."""

import pytest

from taskformat.detectors import (
    DetectorError,
    DetectorResult,
    assess,
    detect,
    implementation_score,
)

HEAD = "import math\nimport torch\nimport torch.nn as nn\nimport triton\nimport triton.language as tl\n"


def prog(kernel: str, body: str = "", launch: str = "_k[(n,)](x, y, n, BLOCK=256)") -> str:
    """A module with `kernel` (jit functions) and a ModelNew.forward that runs `body`
    and then `launch`."""
    lines = ["", "class ModelNew(nn.Module):", "    def forward(self, x):"]
    lines += ["        n = x.shape[0]", "        y = torch.empty_like(x)"]
    lines += [f"        {line}" for line in body.splitlines() if line.strip()]
    lines += [f"        {launch}", "        return y", ""]
    return HEAD + kernel + "\n".join(lines)


def jit(name: str, params: str, body: str) -> str:
    lines = "\n".join(f"    {line}" for line in body.splitlines() if line.strip())
    return f"\n\n@triton.jit\ndef {name}({params}):\n{lines}\n"


K = "x_ptr, y_ptr, n, BLOCK: tl.constexpr"
LOAD = "offs = tl.arange(0, BLOCK)\nv = tl.load(x_ptr + offs, mask=offs < n, other=0.0)"
STORE = "tl.store(y_ptr + offs, v, mask=offs < n)"
MAXIMUM = {"kind": "device_call", "names": ["tl.maximum"]}

ONLINE_BODY = """
offs = tl.arange(0, BLOCK)
run = tl.full([BLOCK], -1.0e30, tl.float32)
tot = tl.zeros([BLOCK], tl.float32)
for s in range(0, n, BLOCK):
    v = tl.load(x_ptr + s + offs, mask=s + offs < n, other=-float('inf'))
    hi = tl.maximum(run, v)
    tot = tot * tl.exp(run - hi) + tl.exp(v - hi)
    run = hi
tl.store(y_ptr + offs, tot)
"""
THREE_PASS = """
offs = tl.arange(0, BLOCK)
top = -float('inf')
for s in range(0, n, BLOCK):
    v = tl.load(x_ptr + s + offs, mask=s + offs < n, other=-float('inf'))
    top = tl.where(tl.max(v, 0) > top, tl.max(v, 0), top)
tot = 0.0
for s in range(0, n, BLOCK):
    v = tl.load(x_ptr + s + offs, mask=s + offs < n, other=-float('inf'))
    tot += tl.sum(tl.exp(v - top), 0)
tl.store(y_ptr + offs, tot)
"""
CUDA_SHFL = '''
SRC = """
// __shfl_xor_sync would go here
__global__ void k(float* y) { float v = y[threadIdx.x];
  v += __shfl_xor_sync(0xffffffff, v, 16); y[threadIdx.x] = v; }
"""
'''
CUDA_COMMENT_ONLY = '''
SRC = """
// __shfl_xor_sync is what a fast version would use
__global__ void k(float* y) { const char* s = "__shfl_xor_sync"; y[threadIdx.x] = 1.0f; }
"""
'''
INLINE = (
    "mod = torch.utils.cpp_extension.load_inline('m', cpp_sources='', "
    "cuda_sources=SRC, functions=['k'])"
)
SHFL = {"kind": "regex", "pattern": r"__shfl_\w+_sync\s*\("}

CASES = [
    # device_call: device code only, live code only, no text
    (
        "tl.maximum in the kernel",
        MAXIMUM,
        prog(jit("_k", K, f"{LOAD}\nv = tl.maximum(v, 0.0)\n{STORE}")),
        True,
    ),
    (
        "renamed triton.language import",
        MAXIMUM,
        prog(
            jit(
                "_k",
                K,
                "o = T.arange(0, BLOCK)\nT.store(y_ptr + o, T.maximum(T.load(x_ptr + o), 0.0))",
            )
        ).replace("import triton.language as tl", "import triton.language as T"),
        True,
    ),
    (
        "builtin max() inside a jit function is tl.maximum",
        MAXIMUM,
        prog(jit("_k", K, f"{LOAD}\nv = max(v, 0.0)\n{STORE}")),
        True,
    ),
    (
        "builtin max() on the host",
        MAXIMUM,
        prog(jit("_k", K, f"{LOAD}\n{STORE}"), body="n = max(n, 1)"),
        False,
    ),
    (
        "tl.maximum only in an uncalled jit function",
        MAXIMUM,
        prog(
            jit("_k", K, f"{LOAD}\n{STORE}")
            + jit("_dead", K, f"{LOAD}\nv = tl.maximum(v, 0.0)\n{STORE}")
        ),
        False,
    ),
    (
        "tl.maximum only in comments, docstrings and strings",
        MAXIMUM,
        prog(
            jit(
                "_k",
                K,
                f'"""Uses tl.maximum(v, 0)."""\n{LOAD}\n# tl.maximum(v, 0.0)\nnote = "tl.maximum"\n{STORE}',
            )
        ),
        False,
    ),
    (
        "tl.maximum behind if False",
        MAXIMUM,
        prog(jit("_k", K, f"{LOAD}\nif False:\n    v = tl.maximum(v, 0.0)\n{STORE}")),
        False,
    ),
    (
        "tl.maximum after a return",
        MAXIMUM,
        prog(jit("_k", K, f"{LOAD}\n{STORE}\nreturn\nv = tl.maximum(v, 0.0)")),
        False,
    ),
    (
        "kernel launched only behind if False",
        MAXIMUM,
        prog(
            jit("_k", K, f"{LOAD}\n{STORE}")
            + jit("_k2", K, f"{LOAD}\nv = tl.maximum(v, 0.0)\n{STORE}"),
            body="if False:\n    _k2[(n,)](x, y, n, BLOCK=256)",
        ),
        False,
    ),
    (
        "jit helper called from the kernel",
        MAXIMUM,
        prog(
            jit("_relu", "v", "return tl.maximum(v, 0.0)")
            + jit("_k", K, f"{LOAD}\nv = _relu(v)\n{STORE}")
        ),
        True,
    ),
    (
        "kernel launched from a host helper",
        MAXIMUM,
        prog(
            jit("_k", K, f"{LOAD}\nv = tl.maximum(v, 0.0)\n{STORE}")
            + "\n\ndef run(x, y, n):\n    _k[(n,)](x, y, n, BLOCK=256)\n",
            launch="run(x, y, n)",
        ),
        True,
    ),
    (
        "in_loop: a helper called inside a loop",
        {**MAXIMUM, "in_loop": True},
        prog(
            jit("_relu", "v", "return tl.maximum(v, 0.0)")
            + jit(
                "_k",
                K,
                "offs = tl.arange(0, BLOCK)\nfor s in range(0, n, BLOCK):\n    tl.store(y_ptr + s + offs, _relu(tl.load(x_ptr + s + offs)))",
            )
        ),
        True,
    ),
    (
        "in_loop: outside any loop",
        {**MAXIMUM, "in_loop": True},
        prog(jit("_k", K, f"{LOAD}\nv = tl.maximum(v, 0.0)\n{STORE}")),
        False,
    ),
    (
        "tensor method x.exp2() is tl.exp2",
        {"kind": "device_call", "names": ["tl.exp2"]},
        prog(jit("_k", K, f"{LOAD}\nv = v.exp2()\n{STORE}")),
        True,
    ),
    (
        "kwargs: evict_first",
        {"kind": "device_call", "names": ["tl.load"], "kwargs": {"eviction_policy": "evict_first"}},
        prog(
            jit(
                "_k",
                K,
                "o = tl.arange(0, BLOCK)\ntl.store(y_ptr + o, tl.load(x_ptr + o, eviction_policy='evict_first'))",
            )
        ),
        True,
    ),
    (
        "kwargs: evict_first only in a string",
        {"kind": "device_call", "names": ["tl.load"], "kwargs": {"eviction_policy": "evict_first"}},
        prog(jit("_k", K, f"{LOAD}\npolicy = 'evict_first'\n{STORE}")),
        False,
    ),
    # device_ref
    (
        "tl.int64 in the kernel",
        {"kind": "device_ref", "names": ["tl.int64"]},
        prog(jit("_k", K, f"r = tl.program_id(0).to(tl.int64)\n{LOAD}\n{STORE}")),
        True,
    ),
    (
        "torch.int64 on the host is not device int64",
        {"kind": "device_ref", "names": ["tl.int64"]},
        prog(jit("_k", K, f"{LOAD}\n{STORE}"), body="t = torch.zeros(1, dtype=torch.int64)"),
        False,
    ),
    # host primitives
    (
        "host reads the SM count",
        {"kind": "host_attr", "names": ["multi_processor_count"]},
        prog(
            jit("_k", K, f"{LOAD}\n{STORE}"),
            body="sms = torch.cuda.get_device_properties(0).multi_processor_count",
        ),
        True,
    ),
    (
        "SM count only in an uncalled host function",
        {"kind": "host_attr", "names": ["multi_processor_count"]},
        prog(
            jit("_k", K, f"{LOAD}\n{STORE}")
            + "\n\ndef _sms():\n    return torch.cuda.get_device_properties(0).multi_processor_count\n"
        ),
        False,
    ),
    (
        "host sync through .item()",
        {"kind": "host_call", "names": [".item"]},
        prog(jit("_k", K, f"{LOAD}\n{STORE}"), body="n = int(x.sum().item())"),
        True,
    ),
    # loop-carried values
    ("online rescale, renamed", {"kind": "online_rescale"}, prog(jit("_k", K, ONLINE_BODY)), True),
    (
        "three passes: no online rescale",
        {"kind": "online_rescale"},
        prog(jit("_k", K, THREE_PASS)),
        False,
    ),
    (
        "online rescale only in dead code",
        {"kind": "online_rescale"},
        prog(jit("_k", K, THREE_PASS) + jit("_dead", K, ONLINE_BODY)),
        False,
    ),
    (
        "running max through tl.maximum",
        {"kind": "carried_call", "names": ["tl.maximum"]},
        prog(jit("_k", K, ONLINE_BODY)),
        True,
    ),
    (
        "tl.maximum in a loop on a fresh value only",
        {"kind": "carried_call", "names": ["tl.maximum"]},
        prog(
            jit(
                "_k",
                K,
                "offs = tl.arange(0, BLOCK)\nfor s in range(0, n, BLOCK):\n    v = tl.maximum(tl.load(x_ptr + s + offs), 0.0)\n    tl.store(y_ptr + s + offs, v)",
            )
        ),
        False,
    ),
    (
        "per-lane accumulator",
        {"kind": "carried_accumulate"},
        prog(
            jit(
                "_k",
                K,
                "offs = tl.arange(0, BLOCK)\nlanes = tl.zeros([BLOCK], tl.float32)\nfor s in range(0, n, BLOCK):\n    lanes += tl.load(x_ptr + s + offs)\ntl.store(y_ptr, tl.sum(lanes, 0))",
            )
        ),
        True,
    ),
    (
        "scalar accumulator",
        {"kind": "carried_accumulate"},
        prog(
            jit(
                "_k",
                K,
                "offs = tl.arange(0, BLOCK)\nt = 0.0\nfor s in range(0, n, BLOCK):\n    t += tl.sum(tl.load(x_ptr + s + offs), 0)\ntl.store(y_ptr, t)",
            )
        ),
        False,
    ),
]

DOT_KERNEL = "a_ptr, b_ptr, c_ptr, K, BLOCK: tl.constexpr"
DOT_LOOP = """
o = tl.arange(0, BLOCK)
c = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
for kk in range(0, K, BLOCK):
    a = tl.load(a_ptr + o[:, None] * K + kk + o[None, :])
    b = tl.load(b_ptr + (kk + o[:, None]) * BLOCK + o[None, :])
    {update}
tl.store(c_ptr + o[:, None] * BLOCK + o[None, :], c)
"""
CUDA_CORE = """
o = tl.arange(0, BLOCK)
c = tl.zeros((BLOCK, BLOCK), dtype=tl.float32)
for kk in range(0, K):
    a = tl.load(a_ptr + o * K + kk)
    b = tl.load(b_ptr + kk * BLOCK + o)
    c += a[:, None] * b[None, :]
tl.store(c_ptr + o[:, None] * BLOCK + o[None, :], c)
"""
GEMM_LAUNCH = "_k[(1,)](x, x, y, n, BLOCK=32)"
DOT = {"kind": "dot_accumulate"}
CASES += [
    (
        "acc = tl.dot(a, b, acc)",
        DOT,
        prog(
            jit("_k", DOT_KERNEL, DOT_LOOP.format(update="c = tl.dot(a, b, c)")), launch=GEMM_LAUNCH
        ),
        True,
    ),
    (
        "acc += tl.dot(a, b)",
        DOT,
        prog(
            jit("_k", DOT_KERNEL, DOT_LOOP.format(update="c += tl.dot(a, b)")), launch=GEMM_LAUNCH
        ),
        True,
    ),
    (
        "CUDA-core GEMM with tl.dot only in an uncalled function",
        DOT,
        prog(
            jit("_k", DOT_KERNEL, CUDA_CORE)
            + jit("_dead", DOT_KERNEL, DOT_LOOP.format(update="c = tl.dot(a, b, c)")),
            launch=GEMM_LAUNCH,
        ),
        False,
    ),
    (
        "tl.dot that is not accumulated",
        DOT,
        prog(jit("_k", DOT_KERNEL, DOT_LOOP.format(update="c = tl.dot(a, b)")), launch=GEMM_LAUNCH),
        False,
    ),
    (
        "2-D fp32 tile",
        {"kind": "zeros_tile"},
        prog(jit("_k", DOT_KERNEL, CUDA_CORE), launch=GEMM_LAUNCH),
        True,
    ),
    (
        "1-D tile is not 2-D",
        {"kind": "zeros_tile"},
        prog(jit("_k", K, f"t = tl.zeros([BLOCK], tl.float32)\n{LOAD}\n{STORE}")),
        False,
    ),
    (
        "broadcast [:, None] and [None, :]",
        {"kind": "subscript_none"},
        prog(jit("_k", DOT_KERNEL, CUDA_CORE), launch=GEMM_LAUNCH),
        True,
    ),
    (
        "[:, None] in a comment",
        {"kind": "subscript_none"},
        prog(jit("_k", K, f"# o[:, None] * o[None, :]\n{LOAD}\n{STORE}")),
        False,
    ),
    (
        "unmasked loads in the loop",
        {"kind": "unmasked_load", "in_loop": True},
        prog(jit("_k", DOT_KERNEL, CUDA_CORE), launch=GEMM_LAUNCH),
        True,
    ),
    (
        "masked loads in the loop",
        {"kind": "unmasked_load", "in_loop": True},
        prog(jit("_k", K, ONLINE_BODY)),
        False,
    ),
]

LOG2E_CASES = [
    (
        "literal log2(e) on the device",
        "v = tl.exp2(v * 1.4426950408889634)",
        "",
        "_k[(n,)](x, y, n, BLOCK=256)",
        True,
    ),
    (
        "divided by ln 2",
        "v = tl.exp2(v / 0.6931471805599453)",
        "",
        "_k[(n,)](x, y, n, BLOCK=256)",
        True,
    ),
    (
        "scale folded on the host under another name",
        "v = tl.exp2(v * sc)",
        "c = 0.125 / math.log(2)",
        "_k[(n,)](x, y, n, c, BLOCK=256)",
        True,
    ),
    (
        "exp2 without the scale, LOG2E defined but unused",
        "v = tl.exp2(v)",
        "LOG2E = 1.4426950408889634",
        "_k[(n,)](x, y, n, 1.0, BLOCK=256)",
        False,
    ),
    (
        "math.exp2 on the host is not device exp2",
        "v = tl.exp(v)",
        "c = math.exp2(1.4426950408889634)",
        "_k[(n,)](x, y, n, c, BLOCK=256)",
        False,
    ),
]
for name, stmt, body, launch, expected in LOG2E_CASES:
    CASES.append(
        (
            name,
            {"kind": "exp2_log2e"},
            prog(
                jit(
                    "_k",
                    K.replace("n,", "n, sc,") if "sc" in launch or launch.count(",") > 3 else K,
                    f"{LOAD}\n{stmt}\n{STORE}",
                ),
                body=body,
                launch=launch,
            ),
            expected,
        )
    )

CUDA_EXP2 = '''
SRC = """
#define SCALE 1.4426950408889634f
__global__ void k(float* y) { y[threadIdx.x] = exp2f(y[threadIdx.x] * SCALE); }
"""
'''
CUDA_EXP2_IN_COMMENT = '''
SRC = """
// exp2f(x * 1.4426950408889634f) would be faster
__global__ void k(float* y) { y[threadIdx.x] = expf(y[threadIdx.x]); }
"""
'''
CASES += [
    (
        "CUDA: exp2f with log2(e) through load_inline",
        {"kind": "exp2_log2e"},
        HEAD + CUDA_EXP2 + prog("", launch=INLINE)[len(HEAD) :],
        True,
    ),
    (
        "CUDA: exp2f only in a C comment",
        {"kind": "exp2_log2e"},
        HEAD + CUDA_EXP2_IN_COMMENT + prog("", launch=INLINE)[len(HEAD) :],
        False,
    ),
    (
        "CUDA: __shfl_xor_sync in load_inline source",
        SHFL,
        HEAD + CUDA_SHFL + prog("", launch=INLINE)[len(HEAD) :],
        True,
    ),
    (
        "CUDA: __shfl_xor_sync only in a comment and a string",
        SHFL,
        HEAD + CUDA_COMMENT_ONLY + prog("", launch=INLINE)[len(HEAD) :],
        False,
    ),
    (
        "CUDA source that nothing compiles",
        SHFL,
        HEAD + CUDA_SHFL + prog(jit("_k", K, f"{LOAD}\n{STORE}"))[len(HEAD) :],
        False,
    ),
    (
        "CUDA: one __global__ kernel",
        {"kind": "kernels", "max": 1, "min": 1},
        HEAD + CUDA_SHFL + prog("", launch=INLINE)[len(HEAD) :],
        True,
    ),
]

CONFIG = "\n\ndef _cfg(n):\n    if n > 4096:\n        return 8, 4\n    return 4, 3\n"
CASES += [
    (
        "num_warps from a host helper",
        {"kind": "launch_option", "option": "num_warps", "runtime": True},
        prog(
            jit("_k", K, f"{LOAD}\n{STORE}") + CONFIG,
            body="w, st = _cfg(n)",
            launch="_k[(n,)](x, y, n, BLOCK=256, num_warps=w, num_stages=st)",
        ),
        True,
    ),
    (
        "num_warps a constant",
        {"kind": "launch_option", "option": "num_warps", "runtime": True},
        prog(jit("_k", K, f"{LOAD}\n{STORE}"), launch="_k[(n,)](x, y, n, BLOCK=256, num_warps=4)"),
        False,
    ),
    (
        "num_stages at least 3 on every path",
        {"kind": "launch_option", "option": "num_stages", "min": 4},
        prog(
            jit("_k", K, f"{LOAD}\n{STORE}") + CONFIG,
            body="w, st = _cfg(n)",
            launch="_k[(n,)](x, y, n, BLOCK=256, num_warps=w, num_stages=st)",
        ),
        True,
    ),
    (
        "tile size from the shape",
        {"kind": "tile_from_runtime"},
        prog(
            jit("_k", K, f"{LOAD}\n{STORE}"),
            body="b = triton.next_power_of_2(n)",
            launch="_k[(n,)](x, y, n, BLOCK=b)",
        ),
        True,
    ),
    (
        "tile size a constant",
        {"kind": "tile_from_runtime"},
        prog(jit("_k", K, f"{LOAD}\n{STORE}")),
        False,
    ),
    ("one launch", {"kind": "launches", "max": 1}, prog(jit("_k", K, f"{LOAD}\n{STORE}")), True),
    (
        "a launch per tensor in a host loop",
        {"kind": "launches", "max": 1},
        prog(
            jit("_k", K, f"{LOAD}\n{STORE}"),
            body="for t in (x, y):\n    _k[(n,)](t, t, n, BLOCK=256)",
        ),
        False,
    ),
    (
        "second axis of the grid",
        {"kind": "program_id", "axis": 1},
        prog(jit("_k", K, f"h = tl.program_id(1)\n{LOAD}\n{STORE}")),
        True,
    ),
    (
        "program_id(1) only in a docstring",
        {"kind": "program_id", "axis": 1},
        prog(jit("_k", K, f'"""tl.program_id(1) is the head."""\n{LOAD}\n{STORE}')),
        False,
    ),
    (
        "reverse order",
        {"kind": "reversed_program_order"},
        prog(jit("_k", K, f"t = tl.num_programs(0) - 1 - tl.program_id(0)\n{LOAD}\n{STORE}")),
        True,
    ),
    (
        "forward order",
        {"kind": "reversed_program_order"},
        prog(jit("_k", K, f"t = tl.program_id(0) * BLOCK - 1\n{LOAD}\n{STORE}")),
        False,
    ),
    (
        "grid-stride loop",
        {"kind": "grid_stride_loop"},
        prog(
            jit(
                "_k",
                K,
                "o = tl.arange(0, BLOCK)\nfor r in range(tl.program_id(0), n, tl.num_programs(0)):\n    tl.store(y_ptr + r * BLOCK + o, tl.load(x_ptr + r * BLOCK + o))",
            )
        ),
        True,
    ),
    (
        "a loop over columns is no grid stride",
        {"kind": "grid_stride_loop"},
        prog(jit("_k", K, ONLINE_BODY)),
        False,
    ),
    (
        "loop clipped by the program id",
        {"kind": "loop_bound", "on": "program_id"},
        prog(
            jit(
                "_k",
                K,
                "p = tl.program_id(0)\no = tl.arange(0, BLOCK)\nfor s in range(0, (p + 1) * BLOCK, BLOCK):\n    tl.store(y_ptr + s + o, tl.load(x_ptr + s + o))",
            )
        ),
        True,
    ),
    (
        "loop over the whole row",
        {"kind": "loop_bound", "on": "program_id"},
        prog(jit("_k", K, ONLINE_BODY)),
        False,
    ),
    (
        "gather through a tile of indices",
        {"kind": "indirect_load", "vector": True},
        prog(
            jit(
                "_k",
                K,
                "o = tl.arange(0, BLOCK)\nidx = tl.load(x_ptr + o)\ntl.store(y_ptr + o, tl.load(y_ptr + idx))",
            )
        ),
        True,
    ),
    ("plain loads", {"kind": "indirect_load"}, prog(jit("_k", K, f"{LOAD}\n{STORE}")), False),
    (
        "centred variance",
        {"kind": "centred_square"},
        prog(
            jit(
                "_k",
                K,
                f"{LOAD}\nmu = tl.sum(v, 0) / n\nd = v - mu\ntl.store(y_ptr, tl.sum(d * d, 0))",
            )
        ),
        True,
    ),
    (
        "E[x^2] - mean^2",
        {"kind": "centred_square"},
        prog(
            jit(
                "_k",
                K,
                f"{LOAD}\nmu = tl.sum(v, 0) / n\ntl.store(y_ptr, tl.sum(v * v, 0) / n - mu * mu)",
            )
        ),
        False,
    ),
    (
        "GELU constant through a module name",
        {"kind": "device_const", "values": [0.044715]},
        prog(
            "\nC0 = tl.constexpr(0.044715)\n"
            + jit("_k", K, f"{LOAD}\nv = v + C0 * v * v * v\n{STORE}")
        ),
        True,
    ),
    (
        "GELU constant only on the host",
        {"kind": "device_const", "values": [0.044715]},
        prog(jit("_k", K, f"{LOAD}\n{STORE}"), body="c = 0.044715"),
        False,
    ),
    (
        "one kernel reads the row once",
        {"kind": "kernel", "single_read": True},
        prog(jit("_k", K, f"{LOAD}\n{STORE}")),
        True,
    ),
    (
        "three passes read the row three times",
        {"kind": "kernel", "single_read": True},
        prog(jit("_k", K, THREE_PASS)),
        False,
    ),
    (
        "grouped tile order",
        {"kind": "grouped_tile_order"},
        prog(
            jit(
                "_k",
                K,
                "pid = tl.program_id(0)\ngs = min(n - pid // 8 * 8, 8)\npm = pid // 8 * 8 + pid % gs\no = tl.arange(0, BLOCK)\ntl.store(y_ptr + pm * BLOCK + o, tl.load(x_ptr + o))",
            )
        ),
        True,
    ),
    (
        "row-major tile order",
        {"kind": "grouped_tile_order"},
        prog(
            jit(
                "_k",
                K,
                "pid = tl.program_id(0)\npm = pid // n\npn = pid % n\no = tl.arange(0, BLOCK)\ntl.store(y_ptr + pm * BLOCK + pn + o, tl.load(x_ptr + o))",
            )
        ),
        False,
    ),
]


@pytest.mark.parametrize(
    ("detector", "source", "expected"), [c[1:] for c in CASES], ids=[c[0] for c in CASES]
)
def test_primitive(detector, source, expected):
    compile(source, "case", "exec")
    result = assess(detector, source)
    assert isinstance(result, DetectorResult)
    assert result.value is expected, result.rationale
    assert result.rationale
    if expected:
        assert result.evidence


def test_combinations_and_manual():
    source = prog(jit("_k", K, f"{LOAD}\nv = tl.maximum(v, 0.0)\n{STORE}"))
    assert detect({"kind": "all", "of": [MAXIMUM, {"kind": "not", "of": SHFL}]}, source) is True
    assert detect({"kind": "any", "of": [SHFL, {"kind": "not", "of": MAXIMUM}]}, source) is False
    assert detect({"kind": "manual"}, source) is None
    assert detect({"kind": "all", "of": [MAXIMUM, {"kind": "manual"}]}, source) is None


@pytest.mark.parametrize(
    ("source", "reason"),
    [("def broken(:\n", "does not parse"), (HEAD + jit("_k", K, "tl.maximum(1, 2)"), "ModelNew")],
)
def test_sources_without_a_model_implement_nothing(source, reason):
    result = assess(MAXIMUM, source)
    assert result is not None and result.value is False and reason in result.rationale


@pytest.mark.parametrize(
    "detector",
    [{"kind": "nope"}, {"kind": "device_call"}, {"kind": "regex", "pattern": "("}, {"kind": "all"}],
)
def test_malformed_detectors_raise(detector):
    with pytest.raises(DetectorError):
        detect(detector, prog(jit("_k", K, f"{LOAD}\n{STORE}")))


PROPS = [
    {"key": "a", "level": "L1", "weight": 2.0, "depends_on": [], "detector": {}},
    {"key": "b", "level": "L2", "weight": 1.0, "depends_on": ["a"], "detector": {}},
    {"key": "c", "level": "L3", "weight": 1.0, "depends_on": ["gone"], "detector": {}},
]


@pytest.mark.parametrize(
    ("results", "expected"),
    [
        ({"a": True, "b": True, "c": True}, 100.0),
        ({"a": False, "b": True, "c": True}, 25.0),  # b depends on a
        ({"a": True, "b": None, "c": False}, 50.0),
        ({}, 0.0),
    ],
)
def test_implementation_score(results, expected):
    assert implementation_score(PROPS, results) == expected


def test_regex_detectors_read_bounded_device_code():
    from taskformat.detectors.primitives.calls import REGEX_LINE_LIMIT, REGEX_TEXT_LIMIT

    spec = {"kind": "regex", "pattern": r"\bzz_marker\b"}
    kernel = "@triton.jit\ndef _k(x, y, n, BLOCK: tl.constexpr):\n    zz_marker = tl.load(x)\n"
    assert detect(spec, prog(kernel)) is True
    # Device code past the limit is not read: no credit, and no time spent on it.
    padding = "".join(f"    v{i} = tl.load(x + {i})\n" for i in range(REGEX_TEXT_LIMIT // 20))
    padded = kernel + padding
    result = assess(spec, prog(padded))
    assert result.value is False and "over the" in result.rationale
    # A line past REGEX_LINE_LIMIT is cut before matching: what lies beyond is unseen.
    long_name = "w" * REGEX_LINE_LIMIT
    hidden = kernel.replace("zz_marker = tl.load(x)", f"{long_name} = tl.load(x) + zz_marker")
    assert detect(spec, prog(hidden)) is False
