"""Hypothesis strategies for run bundles: zips that follow runformat's manifest and trace
schemas (kernels, traces, proposals of known tasks), with what an agent may really write
in them: any Unicode text, odd timestamps, unknown event types, a line that is not JSON,
a root folder, stored or deflated entries."""

from __future__ import annotations

import io
import json
import zipfile

from hypothesis import strategies as st

from runformat.schema import schema_load

LEVELS = schema_load("manifest-v1")["properties"]["levels"]["items"]["enum"]
ROLES = ["system", "user", "assistant", "tool"]
# Text as an agent writes it: any code point a JSON file can carry as UTF-8 (no lone
# surrogate), control characters included.
TEXT = st.text(st.characters(exclude_categories=("Cs",)), max_size=300)
NAME = st.text(st.characters(exclude_categories=("Cs", "Cc")), min_size=1, max_size=200).filter(
    str.strip
)
TS = st.one_of(
    st.floats(min_value=0, max_value=4e9, allow_nan=False),
    st.integers(min_value=0, max_value=2**53),
    st.datetimes().map(lambda d: d.isoformat() + "Z"),
)
TURN = st.integers(min_value=0, max_value=10**6)


def _event(kind: str, **fields: st.SearchStrategy) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries(
        {"type": st.just(kind), "ts": TS, **fields}, optional={"turn": TURN}
    )


def _events(task: str, kernel: str) -> st.SearchStrategy[list[dict]]:
    event = st.one_of(
        _event(
            "message",
            role=st.sampled_from(ROLES),
            content=TEXT,
        ).flatmap(
            lambda e: st.fixed_dictionaries(
                {k: st.just(v) for k, v in e.items()},
                optional={
                    "tokens_in": st.integers(0, 10**7),
                    "tokens_out": st.integers(0, 10**7),
                },
            )
        ),
        _event(
            "tool_call",
            name=NAME,
            arguments=st.one_of(TEXT, st.dictionaries(NAME, TEXT, max_size=3)),
        ),
        _event("tool_result", name=NAME, ok=st.booleans(), output=TEXT),
        _event("submit", source=st.one_of(st.just(kernel), TEXT)),
        # Unknown event types are kept as they are.
        _event(
            "x-" + "custom",
            payload=st.recursive(
                st.none() | st.booleans() | st.integers() | TEXT,
                lambda inner: (
                    st.lists(inner, max_size=3) | st.dictionaries(NAME, inner, max_size=3)
                ),
                max_leaves=8,
            ),
        ),
    )
    start = _event("start", task=st.just(task), condition=st.sampled_from(["none", "L1", "L1+L2"]))
    end = _event("end", reason=st.sampled_from(["submitted", "budget"]), turns_used=TURN)
    return st.tuples(start, st.lists(event, max_size=12), end).map(
        lambda parts: [parts[0], *parts[1], parts[2]]
    )


def _trace(task: str, kernel: str) -> st.SearchStrategy[bytes]:
    lines = _events(task, kernel).flatmap(
        lambda events: st.lists(st.booleans(), min_size=len(events), max_size=len(events)).map(
            lambda ascii_flags: [
                json.dumps(e, ensure_ascii=a) for e, a in zip(events, ascii_flags, strict=True)
            ]
        )
    )
    # Now and then a line that is not JSON: a trace problem, never a refusal.
    broken = st.sampled_from(["", "{broken", "[1, 2", "null"])
    return st.tuples(lines, st.lists(broken, max_size=1)).map(
        lambda parts: ("\n".join(parts[0] + parts[1]) + "\n").encode()
    )


KERNEL_TEMPLATE = (
    "import torch\n\n\nclass ModelNew(torch.nn.Module):\n"
    "    def forward(self, x):\n        return x  # {note}\n"
)


def _kernel() -> st.SearchStrategy[str]:
    note = st.text(st.characters(exclude_categories=("Cs", "Cc")), max_size=80)
    return note.map(lambda n: KERNEL_TEMPLATE.format(note=n))


def _manifest(tasks: list[str]) -> st.SearchStrategy[dict]:
    return st.fixed_dictionaries(
        {
            "schema": st.just(1),
            "model": NAME,
            "agent": NAME,
            "levels": st.lists(st.sampled_from(LEVELS), unique=True),
            "hardware": st.one_of(st.sampled_from(["NVIDIA H200", "NVIDIA H100 80GB HBM3"]), NAME),
        },
        optional={
            "turn_budget": st.integers(1, 100_000),
            # A NUL is the one character a manifest may not hold (JSON to PostgreSQL).
            "notes": TEXT.map(lambda t: t.replace("\x00", "")),
            "example": st.booleans(),
        },
    )


@st.composite
def run_bundles(draw, *, tasks: tuple[str, ...]) -> bytes:
    """Zip bytes of a run bundle a validator accepts: a manifest and, for one or more of
    `tasks`, a kernel, a trace and maybe a proposal."""
    chosen = draw(st.lists(st.sampled_from(tasks), min_size=1, unique=True))
    files: dict[str, bytes] = {}
    manifest = draw(_manifest(chosen))
    files["manifest.json"] = json.dumps(manifest, ensure_ascii=draw(st.booleans())).encode()
    for task in chosen:
        kernel = draw(_kernel())
        files[f"kernels/{task}.py"] = kernel.encode()
        if draw(st.booleans()) or len(chosen) == 1:
            files[f"traces/{task}.jsonl"] = draw(_trace(task, kernel))
        if draw(st.booleans()):
            files[f"proposals/{task}.md"] = draw(
                TEXT.filter(lambda t: t.strip() and "\x00" not in t)
            ).encode()
    root = draw(st.sampled_from(["", "run/", "my run 1/"]))
    method = draw(st.sampled_from([zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED]))
    names = draw(st.permutations(sorted(files)))
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", method) as zf:
        for name in names:
            zf.writestr(root + name, files[name])
    return buffer.getvalue()
