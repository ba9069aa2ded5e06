"""The program a submission runs, as detectors see it.

`Program(source)` parses the source with `ast` (so comments, and docstrings and
strings that nothing executes, never count), starts at `ModelNew.forward` (and
`ModelNew.__init__`, which the harness runs too) and follows what they call:
module functions, methods, `autograd.Function.apply`, `@triton.jit` kernels
launched as `kernel[grid](...)` and the jit functions those call, and the
CUDA/C++ sources handed to `torch.utils.cpp_extension.load_inline`. Branches
whose condition folds to a constant (`if False:`) and code after a `return` are
dead. Code in jit functions is *device* code; the rest is *host* code.

What ran, not what is written: a jit function's parameter that every reachable
launch and call fixes (a constant, a default, an autotune config's values) is
folded into its branches, so a branch false for every value passed is dead; and
given `launched` (the kernel names the profiler saw), a jit function launched
under no such name is not reached at all.

The stages, one module each: `syntax` (functions, call sites, dotted names),
`source` (parsing and collecting the module), `reach` (what runs), `folding`
(constants, and the values the launches fix), `loops` (loop facts of device code)
and `core` (`Program` itself, live code and the queries).
"""

from taskformat.detectors.program.core import Program
from taskformat.detectors.program.folding import MAX_COMBINATIONS
from taskformat.detectors.program.syntax import LOADS, LOOPS, MEMBER_FNS, Func, Site, dotted

__all__ = ["LOADS", "LOOPS", "MAX_COMBINATIONS", "MEMBER_FNS", "Func", "Program", "Site", "dotted"]
