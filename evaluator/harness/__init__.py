"""The D2K evaluator harness: torch, triton and the standard library only, no Django.

Public entry points: `orchestrate.evaluate` and the CLI `python -m evaluator
check`. The task it evaluates against is read by the task format package
(`taskformat.package.load_task`); the verdict dataclasses that cross into the
portal live in `verdict`.
"""
