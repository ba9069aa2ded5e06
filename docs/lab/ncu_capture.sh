#!/usr/bin/env bash
# Lab: what Nsight Compute reads on this GPU host (metric names, permission, CSV format).
# Writes ncu-version.txt, ncu-metrics.txt (tensor/dram metric names) and ncu-softmax.csv to $1.
set -uo pipefail
out=${1:-/tmp/ncu}; mkdir -p "$out"
{ which ncu; ncu --version; } >"$out/ncu-version.txt" 2>&1
ncu --query-metrics --chip gh100 2>&1 | grep -Ei 'dram__bytes|pipe_tensor|inst_executed\b|smsp__inst_executed\.|sm__inst_executed\.' >"$out/ncu-metrics.txt"
cat >/tmp/ncu_softmax.py <<'PY'
import torch
x = torch.randn(8192, 1024, device="cuda", dtype=torch.bfloat16)
a = torch.randn(2048, 2048, device="cuda", dtype=torch.bfloat16)
torch.cuda.synchronize()
torch.cuda.nvtx.range_push("d2k_call")
y = torch.softmax(x, dim=-1)
z = a @ a
torch.cuda.nvtx.range_pop()
torch.cuda.synchronize()
PY
ncu --csv --page raw --nvtx --nvtx-include "d2k_call/" \
  --metrics dram__bytes_read.sum,dram__bytes_write.sum,sm__inst_executed_pipe_tensor_op_hmma.sum,sm__inst_executed_pipe_tensor_op_gmma.sum,smsp__inst_executed.sum,sm__inst_executed.sum \
  python /tmp/ncu_softmax.py >"$out/ncu-softmax.csv" 2>"$out/ncu-softmax.err"
echo "ncu rc=$?" >>"$out/ncu-softmax.err"
