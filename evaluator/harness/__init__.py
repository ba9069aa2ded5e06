"""The D2K evaluator harness: torch, triton and the standard library only, no Django.

Public entry points: `package.load_task`, `orchestrate.evaluate`, and the CLI
`python -m evaluator check`. The dataclasses that cross into the portal live
in `spec`.
"""
