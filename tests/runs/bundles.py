"""Run bundles for tests: zip bytes from a dict of files, damaged in chosen ways."""

import io
import json
import stat
import zipfile

KERNEL = (
    "import torch\n\n\nclass ModelNew(torch.nn.Module):\n"
    "    def forward(self, x):\n        return x\n"
)


def manifest(**changes) -> str:
    data = {
        "schema": 1,
        "model": "model-x",
        "agent": "agent-y",
        "levels": [],
        "turn_budget": 350,
        "hardware": "NVIDIA H200",
        "notes": "test bundle",
    }
    data.update(changes)
    return json.dumps({k: v for k, v in data.items() if v is not None})


def trace_lines(*events) -> str:
    return "".join(json.dumps(e) + "\n" for e in events)


def long_trace(task: str) -> str:
    """705 lines (four pages of the viewer): a start, 699 messages with a submit after
    the 250th and the 500th, an event of an unknown type, an end and a line that is not
    JSON."""
    events = [{"type": "start", "ts": 0, "task": task, "condition": "none"}]
    for n in range(1, 700):
        events.append(
            {
                "type": "message",
                "ts": n,
                "turn": n,
                "role": "assistant",
                "content": f"thinking {n}\nsecond line {n}",
                "tokens_in": 3,
                "tokens_out": 2,
            }
        )
        if n % 250 == 0:
            events.append(
                {
                    "type": "submit",
                    "ts": n,
                    "turn": n,
                    "source": f"class ModelNew:\n    BLOCK = {n}\n",
                }
            )
    events.append({"type": "mystery", "ts": 800, "payload": {"x": 1}})
    events.append({"type": "end", "ts": 801, "reason": "submitted", "turns_used": 699})
    return trace_lines(*events) + "{broken\n"


def good_files(*tasks: str, levels=()) -> dict:
    files = {"manifest.json": manifest(levels=list(levels))}
    for task in tasks or ("row_softmax",):
        files[f"kernels/{task}.py"] = KERNEL.replace("return x", f"return x  # {task}")
        files[f"proposals/{task}.md"] = f"# {task}\n\nFuse **everything**.\n"
        files[f"traces/{task}.jsonl"] = trace_lines(
            {"type": "start", "ts": 0, "task": task, "condition": "none"},
            {
                "type": "message",
                "ts": 1,
                "turn": 1,
                "role": "assistant",
                "content": "hi",
                "tokens_in": 10,
                "tokens_out": 5,
            },
            {"type": "submit", "ts": 2, "turn": 1, "source": files[f"kernels/{task}.py"]},
            {"type": "end", "ts": 3, "turn": 1, "reason": "submitted", "turns_used": 1},
        )
    return files


def make_zip(files: dict, *, symlinks: dict | None = None, level=zipfile.ZIP_DEFLATED) -> bytes:
    """`files`: path -> str or bytes, or a list of such pairs (to repeat a name)."""
    buffer = io.BytesIO()
    items = files.items() if isinstance(files, dict) else files
    with zipfile.ZipFile(buffer, "w", level) as zf:
        for path, content in items:
            zf.writestr(path, content)
        for path, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(path)
            info.create_system = 3
            info.external_attr = (stat.S_IFLNK | 0o777) << 16
            zf.writestr(info, target)
    return buffer.getvalue()
