"""Expert multi-tensor AdamW step in Triton: one launch, one pass, in place.

Every tensor is cut into equal chunks; a chunk table (tensor index and start
offset per program, built once per list of sizes and kept on the device)
spreads the work evenly over the SMs whatever the mix of tensor sizes, and a
pointer table (rebuilt every call from the tensors' addresses) lets one kernel
reach all of them. Each program streams its chunk once: it reads p, g, m and
v, applies weight decay, both moment updates and the bias-corrected step in
fp32 registers, and writes p, m and v back; full blocks run without a mask
(so the aligned table pointers get 16-byte accesses) and only a tensor's last
block is masked. Bias corrections are folded into two host scalars.
"""

import math

import torch
import torch.nn as nn
import triton
import triton.language as tl

BLOCK = 1024  # elements per loop step: two 16-byte vectors per tensor per thread at 4 warps
MIN_CHUNK, MAX_CHUNK = 4096, 65536
PROGRAMS_PER_SM = 4


@triton.jit
def _adamw_multi_tensor(
    ptr_table,
    size_table,
    chunk_tensor,
    chunk_start,
    n_tensors,
    decay,
    beta1,
    beta2,
    step_size,
    inv_bc2_sqrt,
    eps,
    CHUNK: tl.constexpr,
    BLOCK: tl.constexpr,
):
    pid = tl.program_id(0)
    t = tl.load(chunk_tensor + pid)
    # Chunk starts are multiples of the chunk size (at least 4096 elements).
    start = tl.multiple_of(tl.load(chunk_start + pid), 16)
    end = tl.minimum(start + CHUNK, tl.load(size_table + t))
    # torch allocations are 16-byte aligned (512 bytes in the CUDA caching
    # allocator): the hint lets the compiler emit 16-byte accesses.
    p_ptr = tl.multiple_of(tl.load(ptr_table + t).to(tl.pointer_type(tl.float32)), 16)
    g_ptr = tl.multiple_of(tl.load(ptr_table + n_tensors + t).to(tl.pointer_type(tl.float32)), 16)
    m_ptr = tl.multiple_of(
        tl.load(ptr_table + 2 * n_tensors + t).to(tl.pointer_type(tl.float32)), 16
    )
    v_ptr = tl.multiple_of(
        tl.load(ptr_table + 3 * n_tensors + t).to(tl.pointer_type(tl.float32)), 16
    )
    # Full blocks without a mask: a mask whose bound has unknown alignment
    # would force 4-byte accesses. The tensor's tail block is masked below.
    n_full = (end - start) // BLOCK
    for i in range(0, n_full):
        offs = start + i * BLOCK + tl.arange(0, BLOCK)
        p = tl.load(p_ptr + offs)
        g = tl.load(g_ptr + offs, eviction_policy="evict_first")
        m = tl.load(m_ptr + offs)
        v = tl.load(v_ptr + offs)
        m = beta1 * m + (1.0 - beta1) * g
        v = beta2 * v + (1.0 - beta2) * g * g
        denom = tl.sqrt(v) * inv_bc2_sqrt + eps
        p = p * decay - step_size * (m / denom)
        tl.store(p_ptr + offs, p)
        tl.store(m_ptr + offs, m)
        tl.store(v_ptr + offs, v)
    offs = start + n_full * BLOCK + tl.arange(0, BLOCK)
    mask = offs < end
    p = tl.load(p_ptr + offs, mask=mask, other=0.0)
    g = tl.load(g_ptr + offs, mask=mask, other=0.0, eviction_policy="evict_first")
    m = tl.load(m_ptr + offs, mask=mask, other=0.0)
    v = tl.load(v_ptr + offs, mask=mask, other=0.0)
    m = beta1 * m + (1.0 - beta1) * g
    v = beta2 * v + (1.0 - beta2) * g * g
    denom = tl.sqrt(v) * inv_bc2_sqrt + eps
    p = p * decay - step_size * (m / denom)
    tl.store(p_ptr + offs, p, mask=mask)
    tl.store(m_ptr + offs, m, mask=mask)
    tl.store(v_ptr + offs, v, mask=mask)


def _num_sms(device: torch.device) -> int:
    if device.type == "cuda":
        return torch.cuda.get_device_properties(device).multi_processor_count
    return 4


def _chunk_size(total: int, sms: int) -> int:
    # Enough chunks for several programs per SM on small models, chunks of
    # 64k elements (1 MB of traffic) on large ones.
    target = triton.next_power_of_2(max(1, total // (sms * PROGRAMS_PER_SM)))
    return max(MIN_CHUNK, min(MAX_CHUNK, target))


class ModelNew(nn.Module):
    def __init__(self, lr: float, beta1: float, beta2: float, eps: float, weight_decay: float):
        super().__init__()
        self.lr, self.beta1, self.beta2 = lr, beta1, beta2
        self.eps, self.weight_decay = eps, weight_decay
        # Chunk tables depend only on the tensor sizes and the device, never on
        # addresses or values.
        self._tables: dict[tuple, tuple] = {}

    def _chunk_table(self, sizes: tuple[int, ...], device: torch.device):
        key = (sizes, str(device))
        if key not in self._tables:
            chunk = _chunk_size(sum(sizes), _num_sms(device))
            tensor_ids, starts = [], []
            for i, size in enumerate(sizes):
                for start in range(0, size, chunk):
                    tensor_ids.append(i)
                    starts.append(start)
            self._tables[key] = (
                chunk,
                torch.tensor(sizes, dtype=torch.int64, device=device),
                torch.tensor(tensor_ids, dtype=torch.int32, device=device),
                torch.tensor(starts, dtype=torch.int64, device=device),
            )
        return self._tables[key]

    def forward(self, step: int, *tensors: torch.Tensor):
        n = len(tensors) // 4
        params, grads = tensors[:n], tensors[n : 2 * n]
        exp_avgs, exp_avg_sqs = tensors[2 * n : 3 * n], tensors[3 * n :]
        if n == 0:
            return ()
        for t in tensors:
            if not t.is_contiguous() or t.dtype != torch.float32:
                raise ValueError("every tensor must be contiguous fp32")
        device = params[0].device
        sizes = tuple(p.numel() for p in params)
        chunk, size_table, chunk_tensor, chunk_start = self._chunk_table(sizes, device)
        # Addresses change between calls, so the pointer table is rebuilt every
        # call. On CUDA it goes through pinned memory with an asynchronous copy:
        # a pageable copy would make the host wait for the stream to drain
        # before it could queue the kernel.
        addresses = [t.data_ptr() for t in (*params, *grads, *exp_avgs, *exp_avg_sqs)]
        if device.type == "cuda":
            host = torch.tensor(addresses, dtype=torch.int64).pin_memory()
            ptr_table = host.to(device, non_blocking=True)
        else:
            ptr_table = torch.tensor(addresses, dtype=torch.int64, device=device)
        # Bias corrections on the host: two scalars instead of two powers per element.
        step_size = self.lr / (1.0 - self.beta1**step)
        inv_bc2_sqrt = 1.0 / math.sqrt(1.0 - self.beta2**step)
        _adamw_multi_tensor[(chunk_tensor.numel(),)](
            ptr_table,
            size_table,
            chunk_tensor,
            chunk_start,
            n,
            1.0 - self.lr * self.weight_decay,
            self.beta1,
            self.beta2,
            step_size,
            inv_bc2_sqrt,
            self.eps,
            CHUNK=chunk,
            BLOCK=BLOCK,
            num_warps=4,
        )
        return (*params, *exp_avgs, *exp_avg_sqs)
