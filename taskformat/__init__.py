"""The D2K task package format: reading and checking a task folder, no Django, no evaluator.

`package.load_task` reads one package (`docs/task-format.md`) into the frozen
dataclasses of `spec`, checking its FLOP and byte formulas (`formula`), its
detectors (`detectors`) and counter rules (`counter_rules`) on the way;
`kernelbench` writes a KernelBench problem file as a package. The catalog
loader (`task_catalog`) and the evaluator harness (`evaluator.harness`) both
import it, and neither reaches into the other for it. The standard library
and `tomli_w` only (`kernelbench` asks torch for a problem's shapes).
"""
