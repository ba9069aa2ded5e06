"""What saving and reading a call's output file costs, on this machine's CPU.

    .venv/bin/python bench/output_files.py [--gib 1.5] [--repeat 3]

The child saves each checked call's outputs (`outputs.write_raw`: a JSON header
line, then each output's raw bytes, hashed with SHA-256 as they are written) and the
judge reads them back (`outputs.read_raw`: one read into one buffer, the digest
checked, each output a view of it). A large task's calls hold GiBs of outputs
(`fused_adamw`: 29 GiB an evaluation), so both are on the path of its evaluation.
Prints the best of `--repeat` runs of each, in seconds and GB/s, for two fp32
outputs of `--gib` GiB together; the file is written to a temporary folder.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from evaluator.harness import outputs  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--gib", type=float, default=1.5, help="the outputs' size together")
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()
    elements = int(args.gib * 2**30 / 4)
    made = (torch.randn(elements * 2 // 3), torch.randn(elements - elements * 2 // 3))
    size = sum(t.numel() * 4 for t in made)
    writes, reads = [], []
    with tempfile.TemporaryDirectory(prefix="d2k-output-bench-") as folder:
        path = Path(folder) / "w.0.out"
        for _ in range(args.repeat):
            started = time.perf_counter()
            digest = outputs.write_raw(made, path)
            writes.append(time.perf_counter() - started)
            started = time.perf_counter()
            back = outputs.read_raw(path, torch.device("cpu"), sha256=digest)
            reads.append(time.perf_counter() - started)
            assert all(torch.equal(a, b) for a, b in zip(back, made, strict=True))
            del back
    for label, seconds in (("write_raw", min(writes)), ("read_raw", min(reads))):
        rate = size / seconds / 1e9
        print(f"{label}: {seconds:.2f} s for {size / 2**30:.2f} GiB ({rate:.2f} GB/s)")


if __name__ == "__main__":
    main()
