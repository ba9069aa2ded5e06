"""How the CLI shows what the API answers: rich tables for people, JSON for scripts."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from typing import Any

from rich.console import Console
from rich.markdown import Markdown
from rich.table import Table

console = Console()
err_console = Console(stderr=True)


def say(text: str) -> None:
    """A plain sentence on stderr: no markup, no highlighting, one unbroken line."""
    err_console.print(text, markup=False, highlight=False, soft_wrap=True)


def print_json(data: Any) -> None:
    sys.stdout.write(json.dumps(data, indent=2, default=str) + "\n")


def _cell(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, float):
        return f"{value:.4g}"
    if isinstance(value, dict | list):
        return json.dumps(value, sort_keys=True)
    return str(value)


def table(title: str | None, rows: Iterable[dict[str, Any]], columns: list[str]) -> Table:
    out = Table(title=title, title_justify="left")
    for column in columns:
        out.add_column(column)
    for row in rows:
        out.add_row(*(_cell(row.get(c)) for c in columns))
    return out


def rows_table(rows: list[dict[str, Any]], title: str | None = None) -> Table:
    """A table of whatever keys the rows have (the first row's order)."""
    columns: list[str] = []
    for row in rows:
        columns.extend(k for k in row if k not in columns)
    return table(title, rows, columns)


def task_show(task: dict[str, Any]) -> None:
    console.rule(f"{task['slug']}: {task['title']} (v{task['version']}, {task['category']})")
    console.print(Markdown(task["statement"]))
    console.print(
        table("Public workloads", task["workloads"], ["name", "role", "params", "flops", "bytes"])
    )
    for guidance in task["guidance"]:
        deps = ", ".join(guidance["depends_on"]) or "nothing"
        console.rule(f"Guidance {guidance['level']} (builds on {deps})")
        console.print(Markdown(guidance["text"] or "_(empty)_"))


RESULT_COLUMNS = ["name", "role", "status", "max_abs_err", "median_ms", "speedup", "message"]


def evaluation_show(submission: dict[str, Any]) -> None:
    evaluation = submission.get("evaluation")
    head = f"Submission {submission['id']} · {submission['task']} v{submission['task_version']}"
    if evaluation is None:
        console.print(f"{head}: no evaluation yet")
        return
    console.print(f"{head}: [bold]{evaluation['status']}[/bold] ({evaluation['mode']} mode)")
    if evaluation.get("message"):
        console.print(evaluation["message"])
    if evaluation["results"]:
        console.print(table("Workloads", evaluation["results"], RESULT_COLUMNS))
    for flag in evaluation.get("flags") or []:
        console.print(f"flag {flag.get('check')}: {flag.get('detail')}")


def job_line(submission: dict[str, Any]) -> str:
    """One line of where an evaluation stands, for the live display."""
    evaluation = submission.get("evaluation")
    if evaluation is None:
        return "waiting for the evaluation to be created"
    job = evaluation["job"]
    state = job["state"]
    if state == "queued" and job.get("queue_position") is not None:
        state = f"queued, {job['queue_position']} ahead"
    elif state == "running":
        state = f"running (attempt {job['attempt']}/{job['max_attempts']}) on {job['worker']}"
    return f"{evaluation['status']}: {state} · {job['next_step']}"


def run_show(run: dict[str, Any]) -> None:
    console.print(
        f"Run {run['id']} · {run['model']} / {run['agent']} · condition {run['condition']} · "
        f"[bold]{run['state']}[/bold]"
        + (f" · {run['example_label']}" if run.get("example_label") else "")
    )
    rows = []
    for item in run["tasks"]:
        mine, twin = item["result"] or {}, item["pair_result"] or {}
        rows.append(
            {
                "task": item["task"],
                "status": mine.get("status"),
                "speedup": mine.get("speedup"),
                "submission": mine.get("submission"),
                "twin status": twin.get("status"),
                "twin speedup": twin.get("speedup"),
            }
        )
    console.print(table("Tasks", rows, list(rows[0]) if rows else ["task"]))
    console.print(run["url"])
