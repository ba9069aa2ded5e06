"""Semantic primitives: each reads a `Program` and returns a `DetectorResult`.

Every primitive looks only at live code reachable from `ModelNew.forward`; device
primitives only at jit functions (and CUDA text where they say so).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from taskformat.detectors.primitives.calls import (
    device_call,
    device_ref,
    host_attr,
    host_call,
    regex,
)
from taskformat.detectors.primitives.fused import kernel
from taskformat.detectors.primitives.launch import (
    kernels,
    launch_option,
    launches,
    tile_from_runtime,
)
from taskformat.detectors.primitives.layout import (
    grouped_tile_order,
    indirect_load,
    program_id,
    reversed_program_order,
    subscript_none,
    unmasked_load,
    zeros_tile,
)
from taskformat.detectors.primitives.loops import (
    carried_accumulate,
    carried_call,
    dot_accumulate,
    dot_scaled,
    grid_stride_loop,
    loop_bound,
    online_rescale,
)
from taskformat.detectors.primitives.numeric import centred_square, device_const, exp2_log2e
from taskformat.detectors.program import Program
from taskformat.detectors.result import DetectorResult

PRIMITIVES: dict[str, Callable[[Program, dict[str, Any]], DetectorResult]] = {
    "device_call": device_call,
    "call": device_call,
    "device_ref": device_ref,
    "host_call": host_call,
    "host_attr": host_attr,
    "carried_call": carried_call,
    "online_rescale": online_rescale,
    "dot_accumulate": dot_accumulate,
    "exp2_log2e": exp2_log2e,
    "zeros_tile": zeros_tile,
    "subscript_none": subscript_none,
    "launch_option": launch_option,
    "tile_from_runtime": tile_from_runtime,
    "program_id": program_id,
    "reversed_program_order": reversed_program_order,
    "grid_stride_loop": grid_stride_loop,
    "launches": launches,
    "kernels": kernels,
    "kernel": kernel,
    "unmasked_load": unmasked_load,
    "regex": regex,
    "grouped_tile_order": grouped_tile_order,
    "loop_bound": loop_bound,
    "indirect_load": indirect_load,
    "carried_accumulate": carried_accumulate,
    "centred_square": centred_square,
    "device_const": device_const,
    "dot_scaled": dot_scaled,
}
