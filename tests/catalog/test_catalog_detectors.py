"""The catalog's detectors read the program: they hold on every expert, mostly fail on the
naive kernels, and cannot be fooled by keywords, renamed variables or guidance text."""

import ast
import re
from pathlib import Path

import pytest

from taskformat.detectors import detect, implementation_score
from taskformat.detectors.primitives.calls import regex_patterns
from taskformat.package import DEFAULT_CATALOG_DIR, iter_task_dirs, load_task

ROOT = Path(__file__).resolve().parents[2]
NEGATIVES = ROOT / "tests" / "catalog" / "negatives"
TASKS = [p.name for p in iter_task_dirs(DEFAULT_CATALOG_DIR)]

# Properties the naive kernels really have (they are plain but not wrong about these).
NAIVE_HAS = {
    ("flash_attention_fwd", "stream_kv_tiles"),
    ("fp8_gemm_blockscale", "fp32_tile_accumulator"),
    ("prefix_scan", "fused_rows"),
    ("row_softmax", "row_per_program"),
    ("selective_scan", "time_contiguous_tiles"),
    ("spmm_csr", "register_accumulator"),
    ("topk_rows", "single_hbm_read"),
    # One launch that reads the input through its strides: a single pass, just an uncoalesced one.
    ("transpose_2d", "single_pass"),
    # It unpacks the nibbles in registers next to its tl.sum product; it just does it
    # per element and without tensor cores.
    ("w4a16_gemv", "fused_dequant"),
}


def _automatic(task) -> list[dict]:
    """The task's automatic properties as plain dicts (manual ones left out)."""
    return [
        {
            "key": p.key,
            "level": p.level.value,
            "weight": p.weight,
            "depends_on": list(p.depends_on),
            "detector": p.detector,
        }
        for p in task.properties
        if p.detector.get("kind") != "manual"
    ]


def score(properties: list[dict], source: str) -> float:
    results = {p["key"]: detect(p["detector"], source) for p in properties}
    return implementation_score(properties, results)


@pytest.fixture(scope="module", params=TASKS)
def task(request):
    return load_task(DEFAULT_CATALOG_DIR / request.param)


def test_every_automatic_detector_holds_on_the_expert(task):
    automatic = _automatic(task)
    assert automatic, "a task needs at least some automatic detectors"
    failing = [p["key"] for p in automatic if detect(p["detector"], task.expert_source) is not True]
    assert failing == []


def test_the_naive_kernel_scores_well_below_the_expert(task):
    naive = (NEGATIVES / f"{task.slug}.py").read_text()
    automatic = _automatic(task)
    has = {(task.slug, p["key"]) for p in automatic if detect(p["detector"], naive)}
    assert has == {e for e in NAIVE_HAS if e[0] == task.slug}
    assert score(automatic, naive) <= 0.5 * score(automatic, task.expert_source)


def test_no_regex_detector_matches_its_own_guidance(task):
    def patterns(detector):
        if detector.get("kind") == "regex":
            yield detector["pattern"]
        inner = detector.get("of")
        for d in inner if isinstance(inner, list) else [inner] if inner else []:
            yield from patterns(d)

    for prop in task.properties:
        for pattern in patterns(prop.detector):
            for guidance in task.guidance:
                assert not re.search(pattern, guidance.text, re.MULTILINE), (
                    prop.key,
                    guidance.level,
                )


STUFFING = '''
# Online softmax: running max via tl.maximum, exp2(m_old - m_new) rescale, LOG2E
# pre-scale, one row per program, single HBM pass, num_warps sized to the row.
LOG2E = 1.4426950408889634
MAX_FUSED_COLS = 32768
NOTES = "tl.maximum tl.exp2 LOG2E num_warps=num_warps triton.next_power_of_2"


@triton.jit
def _softmax_online_single(x_ptr, y_ptr, n_cols, BLOCK: tl.constexpr):
    """Never launched: tl.max, tl.maximum, tl.exp2, tl.program_id(0)."""
    row = tl.program_id(0).to(tl.int64)
    cols = tl.arange(0, BLOCK)
    m = tl.full([BLOCK], -1.0e30, tl.float32)
    s = tl.zeros([BLOCK], tl.float32)
    for start in range(0, n_cols, BLOCK):
        x = tl.load(x_ptr + row * n_cols + start + cols) * LOG2E
        m_new = tl.maximum(m, x)
        s = s * tl.exp2(m - m_new) + tl.exp2(x - m_new)
        m = m_new
        tl.store(y_ptr + row * n_cols + start + cols, s)


def _num_warps(block):
    return max(4, block // 256)


def _unused_launch(x, y):
    block = triton.next_power_of_2(x.shape[1])
    grid = (x.shape[0],)
    _softmax_online_single[grid](x, y, x.shape[1], BLOCK=block, num_warps=_num_warps(block))
'''


def test_a_keyword_stuffed_naive_softmax_scores_no_higher_than_the_plain_one():
    task = load_task(DEFAULT_CATALOG_DIR / "row_softmax")
    plain = (NEGATIVES / "row_softmax.py").read_text()
    stuffed = plain.replace("\n\nclass ModelNew", STUFFING + "\n\nclass ModelNew")
    stuffed = stuffed.replace(
        "        return y",
        "        if False:\n            _unused_launch(x, y)\n        return y",
    )
    compile(stuffed, "stuffed", "exec")
    properties = _automatic(task)
    assert score(properties, stuffed) <= score(properties, plain)
    assert score(properties, plain) < score(properties, task.expert_source)


class _Rename(ast.NodeTransformer):
    """Give every function, parameter and variable a meaningless name (module aliases,
    attributes, keyword options of library calls and ModelNew's own methods stay)."""

    KEEP = frozenset({"self", "ModelNew", "forward", "__init__", "super"})

    def __init__(self, tree: ast.Module):
        defined: list[str] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef):
                defined.append(node.name)
                defined += [a.arg for a in [*node.args.args, *node.args.kwonlyargs]]
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                defined.append(node.id)
        names = [n for n in dict.fromkeys(defined) if n not in self.KEEP]
        self.map = {n: f"v{i}" for i, n in enumerate(names)}
        self.functions = {n.name for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}

    def visit_Name(self, node):
        node.id = self.map.get(node.id, node.id)
        return node

    def visit_arg(self, node):
        node.arg = self.map.get(node.arg, node.arg)
        return node

    def visit_FunctionDef(self, node):
        node.name = self.map.get(node.name, node.name)
        node.body = [s for s in node.body if not _is_docstring(s)]
        self.generic_visit(node)
        return node

    def visit_Call(self, node):
        target = node.func.value if isinstance(node.func, ast.Subscript) else node.func
        if isinstance(target, ast.Name) and target.id in self.functions:
            for kw in node.keywords:
                kw.arg = self.map.get(kw.arg, kw.arg) if kw.arg else kw.arg
        self.generic_visit(node)
        return node


def _is_docstring(stmt: ast.stmt) -> bool:
    return isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant)


def test_a_renamed_flash_attention_expert_scores_what_the_expert_scores():
    task = load_task(DEFAULT_CATALOG_DIR / "flash_attention_fwd")
    tree = ast.parse(task.expert_source)
    tree.body = [s for s in tree.body if not _is_docstring(s)]
    renamed = ast.unparse(_Rename(tree).visit(tree))
    assert not re.search(r"\b(qk_scale|m_i|l_i|acc|_attn_fwd|_mma)\b", renamed)
    properties = _automatic(task)
    for prop in properties:
        assert detect(prop["detector"], renamed) == detect(prop["detector"], task.expert_source)
    assert score(properties, renamed) == score(properties, task.expert_source) == 100.0


def test_catalog_regex_patterns_bound_their_repetitions(task):
    # They run on untrusted source: an unbounded repetition over lines or a name makes
    # a pattern's time grow with the square of hostile text (bench/detector_hostile.py).
    found = [p for prop in task.properties for p in regex_patterns(prop.detector)]
    unbounded = [p for p in found if re.search(r"\\n\)[*+]|\\w\+|\(\?s\)", p)]
    assert unbounded == []
