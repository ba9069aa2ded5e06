"""Expert histogram in CUDA C++ (through torch.utils.cpp_extension.load_inline).

The same contract as expert.py: `ModelNew(bins)(x)` returns int32 counts of
the values of a uint8 or int32 tensor x, every value in [0, bins).

Each block counts a grid-stride share of the input into a sub-histogram in
shared memory. A warp first aggregates its 32 values: `__match_any_sync`
gives each lane the lanes holding the same bin, and only the lowest of them
adds their count (`__popc`) to the shared counter, so a hot bin costs one
shared atomic per warp rather than one per value. When the block is done,
each non-zero bin of its sub-histogram is added to the output with one
global atomic. Bins beyond what one block's shared memory holds (16384 int32
counters, 64 KiB) are counted in slices: the grid's second dimension picks
the slice, and each slice reads the input once.

Needs a CUDA GPU (sm_70 or newer, for `__match_any_sync`); the build runs at
import, in the evaluator's sandbox, and is never timed.
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

CUDA = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAException.h>
#include <algorithm>

constexpr int THREADS = 512;
constexpr int SLICE_BINS = 16384;  // 64 KiB of int32 counters in shared memory

template <typename T>
__global__ void __launch_bounds__(THREADS) d2k_histogram_shared(
        const T* __restrict__ x, int* __restrict__ out, int64_t n, int bins) {
    extern __shared__ int counts[];
    const int lo = blockIdx.y * SLICE_BINS;
    const int width = min(SLICE_BINS, bins - lo);
    for (int b = threadIdx.x; b < width; b += blockDim.x) counts[b] = 0;
    __syncthreads();

    const int lane = threadIdx.x & 31;
    const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
    // The loop bound is the same for every thread of a block, so whole warps
    // reach __match_any_sync together; lanes past the end carry key -1.
    for (int64_t base = static_cast<int64_t>(blockIdx.x) * blockDim.x; base < n; base += stride) {
        const int64_t i = base + threadIdx.x;
        int key = -1;
        if (i < n) {
            const int v = static_cast<int>(x[i]) - lo;
            if (v >= 0 && v < width) key = v;
        }
        const unsigned same = __match_any_sync(0xffffffffu, key);
        if (key >= 0 && lane == __ffs(same) - 1) atomicAdd(&counts[key], __popc(same));
    }
    __syncthreads();

    // One global atomic per non-zero bin of this block's sub-histogram.
    for (int b = threadIdx.x; b < width; b += blockDim.x) {
        const int c = counts[b];
        if (c) atomicAdd(&out[lo + b], c);
    }
}

template <typename T>
void launch(const torch::Tensor& x, torch::Tensor& out, int bins) {
    const int64_t n = x.numel();
    const int slices = (bins + SLICE_BINS - 1) / SLICE_BINS;
    const int shared = std::min(bins, SLICE_BINS) * static_cast<int>(sizeof(int));
    cudaFuncSetAttribute(d2k_histogram_shared<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                         shared);
    const int sms = at::cuda::getCurrentDeviceProperties()->multiProcessorCount;
    const int64_t wanted = (n + THREADS - 1) / THREADS;
    const int blocks = static_cast<int>(std::min<int64_t>(wanted, static_cast<int64_t>(sms) * 4));
    const dim3 grid(std::max(blocks, 1), slices);
    d2k_histogram_shared<T><<<grid, THREADS, shared, at::cuda::getCurrentCUDAStream()>>>(
        x.data_ptr<T>(), out.data_ptr<int>(), n, bins);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
}

torch::Tensor histogram(torch::Tensor x, int64_t bins) {
    TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor");
    TORCH_CHECK(bins >= 1 && bins <= (1 << 30), "bins out of range");
    auto flat = x.contiguous().view(-1);
    auto out = torch::zeros({bins}, flat.options().dtype(torch::kInt32));
    if (flat.numel() == 0) return out;
    if (flat.scalar_type() == torch::kUInt8) {
        launch<uint8_t>(flat, out, static_cast<int>(bins));
    } else {
        TORCH_CHECK(flat.scalar_type() == torch::kInt32, "x must be uint8 or int32");
        launch<int32_t>(flat, out, static_cast<int>(bins));
    }
    return out;
}
"""

_ext = load_inline(
    name="d2k_histogram_expert_cuda",
    cpp_sources="torch::Tensor histogram(torch::Tensor x, int64_t bins);",
    cuda_sources=CUDA,
    functions=["histogram"],
    extra_cuda_cflags=["-O3"],
)


class ModelNew(nn.Module):
    def __init__(self, bins: int):
        super().__init__()
        self.bins = bins

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return _ext.histogram(x, self.bins)
