"""The `d2k` command: the portal's REST API from a terminal (docs/client.md)."""

from __future__ import annotations

import functools
import importlib.util
import subprocess
import sys
import time
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated, Any, TypeVar

import typer
from rich.console import Console
from rich.progress import (
    BarColumn,
    DownloadColumn,
    Progress,
    SpinnerColumn,
    TextColumn,
    TimeElapsedColumn,
    TransferSpeedColumn,
)

from .api import Api
from .config import ClientError, Config, server_normalize
from .display import (
    board_columns,
    board_table,
    bundle_problems,
    console,
    err_console,
    evaluation_show,
    fitted_columns,
    job_line,
    plain,
    print_json,
    run_show,
    say,
    table,
    task_show,
    terminal_width,
)
from .follow import (
    REJECTED,
    VALIDATING,
    FollowTimedOut,
    run_follow,
    run_tally,
    run_validation_wait,
)
from .packing import bundle_check, bundle_pack

app = typer.Typer(
    name="d2k",
    help="The D2K Portal from a terminal: tasks, submissions, runs and the leaderboard.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)

F = TypeVar("F", bound=Callable[..., Any])
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the API's JSON answer.")]
POLL_SECONDS = 2.0
# Exit statuses past 1 (an error): docs/client.md lists them.
EXIT_NOT_CORRECT = 3
EXIT_TIMED_OUT = 4
EXIT_INTERRUPTED = 130
TimeoutOpt = Annotated[
    float | None,
    typer.Option(min=0, metavar="SECONDS", help="With --wait: stop following after this long."),
]
PollOpt = Annotated[
    float | None,
    typer.Option(
        "--poll-interval",
        min=0.1,
        metavar="SECONDS",
        help=f"With --wait: time between two looks (default {POLL_SECONDS:g}).",
    ),
]

# What is uploaded is private (its owner and the moderators see it) until published: here,
# on the upload pages and in the API alike. `--private` is the default, kept for scripts.
PublicOpt = Annotated[
    bool,
    typer.Option(
        "--public/--private",
        help="--public publishes it at once: everyone sees it. Without it, it stays private "
        "(you and the moderators) until you publish it from its page; --private, the "
        "default, is accepted for older scripts.",
    ),
]


# `d2k check` runs `python -m evaluator check …`, the portal's evaluator CLI.
EVALUATOR_MODULE = "evaluator"


def friendly(fn: F) -> F:
    """A ClientError becomes one line on stderr and exit status 1."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except ClientError as exc:
            say(f"d2k: error: {exc}")
            raise typer.Exit(1) from None

    return wrapper  # type: ignore[return-value]


class State:
    def __init__(self, server: str | None):
        self.explicit_server = server

    @functools.cached_property
    def config(self) -> Config:
        return Config.load()

    @functools.cached_property
    def api(self) -> Api:
        server = self.config.server(self.explicit_server)
        return Api(server, self.config.tokens.get(server))


def _state(ctx: typer.Context) -> State:
    return ctx.ensure_object(State)


@app.callback()
def main_options(
    ctx: typer.Context,
    server: Annotated[
        str | None,
        typer.Option(envvar="D2K_SERVER", help="Portal address; default: the last login's."),
    ] = None,
) -> None:
    ctx.obj = State(server)


@app.command()
@friendly
def login(
    ctx: typer.Context,
    server: Annotated[
        str | None,
        typer.Option(help="The portal to log in to (as `d2k --server URL login`)."),
    ] = None,
    token: Annotated[
        str | None,
        typer.Option(envvar="D2K_TOKEN", help="API token (your profile page shows it)."),
    ] = None,
) -> None:
    """Check an API token against the server and store it for that server."""
    state = _state(ctx)
    server = state.config.server(server or state.explicit_server)
    if token is None:
        token = typer.prompt(
            f"API token for {server} (from {server}/accounts/profile/)", hide_input=True
        )
    token = token.strip()
    # Any authenticated endpoint tells a good token from a bad one.
    Api(server, token).get("/api/submissions/", page=1)
    state.config.tokens[server] = token
    state.config.default_server = server
    path = state.config.save()
    console.print(plain(f"Logged in to {server}; the token is stored in {path}."))


@app.command()
@friendly
def tasks(
    ctx: typer.Context,
    category: Annotated[str | None, typer.Option(help="Only this category.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """The tasks of the catalog."""
    items = list(_state(ctx).api.pages("/api/tasks/", category=category))
    if as_json:
        return print_json(items)
    console.print(table(None, items, ["slug", "title", "category", "version", "timed_workloads"]))


@app.command()
@friendly
def task(
    ctx: typer.Context,
    slug: str,
    for_agent: Annotated[
        bool, typer.Option("--for-agent", help="Print the task prompt an agent is given.")
    ] = False,
    levels: Annotated[
        str, typer.Option(help="With --for-agent: guidance levels, e.g. L1,L2 (none: '').")
    ] = "",
    as_json: JsonOpt = False,
) -> None:
    """One task: statement, public workloads and guidance by level (or its agent prompt)."""
    api = _state(ctx).api
    if for_agent:
        prompt = api.get(f"/api/tasks/{slug}/prompt/", levels=levels)
        if as_json:
            return print_json(prompt)
        # Byte for byte what the API serves: no wrapping, no markup.
        sys.stdout.write(prompt["text"])
        return None
    if levels:
        raise ClientError("--levels goes with --for-agent")
    detail = api.get(f"/api/tasks/{slug}/")
    if as_json:
        return print_json(detail)
    task_show(detail)
    return None


def _wait_for_submission(api: Api, pk: int) -> dict[str, Any]:
    """Poll the submission until its evaluation finishes, with a live line of its state."""
    columns = (SpinnerColumn(), TextColumn("{task.description}", markup=False), TimeElapsedColumn())
    with Progress(*columns, console=err_console, transient=True) as progress:
        line = progress.add_task("asking the portal…", total=None)
        while True:
            submission = api.get(f"/api/submissions/{pk}/")
            evaluation = submission.get("evaluation")
            if evaluation is not None and evaluation["is_finished"]:
                return submission
            progress.update(line, description=job_line(submission))
            time.sleep(POLL_SECONDS)


def _finish(submission: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(submission)
    else:
        evaluation_show(submission)
    evaluation = submission.get("evaluation")
    if evaluation is not None and evaluation["is_finished"] and evaluation["status"] != "correct":
        raise typer.Exit(EXIT_NOT_CORRECT)


@app.command()
@friendly
def submit(
    ctx: typer.Context,
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    task_slug: Annotated[str, typer.Option("--task", help="The task's slug.")],
    wait: Annotated[bool, typer.Option(help="Wait for the evaluation and show it.")] = False,
    public: PublicOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Upload a kernel file (class ModelNew) for a task; private until published."""
    api = _state(ctx).api
    submission = api.upload(
        "/api/submissions/",
        field="file",
        file=file,
        data={"task": task_slug, "is_public": str(public).lower()},
    )
    if not as_json:
        console.print(
            plain(
                f"Submission {submission['id']} for {submission['task']}: {api.server}"
                f"/submissions/{submission['id']}/"
            )
        )
    if wait:
        submission = _wait_for_submission(api, submission["id"])
    _finish(submission, as_json) if (wait or as_json) else None


@app.command()
@friendly
def status(
    ctx: typer.Context,
    submission_id: Annotated[int, typer.Argument(metavar="ID")],
    wait: Annotated[bool, typer.Option(help="Follow it live until it finishes.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """A submission's evaluation: state, then the per-workload table."""
    api = _state(ctx).api
    if wait:
        submission = _wait_for_submission(api, submission_id)
    else:
        submission = api.get(f"/api/submissions/{submission_id}/")
    _finish(submission, as_json)


def _task_slugs(api: Api) -> frozenset[str]:
    return frozenset(t["slug"] for t in api.pages("/api/tasks/"))


@app.command("pack-run")
@friendly
def pack_run(
    ctx: typer.Context,
    directory: Annotated[Path, typer.Argument(exists=True, file_okay=False)],
    output: Annotated[
        Path | None, typer.Option("--output", "-o", help="Where to write (DIR.zip).")
    ] = None,
) -> None:
    """Zip a run folder into a bundle, checked with the portal's own rules."""
    data = bundle_pack(directory)
    bundle = bundle_check(data, task_slugs=_task_slugs(_state(ctx).api))
    if not bundle.ok:
        for e in bundle.errors:
            where = ":".join(str(p) for p in (e.file, e.line) if p is not None)
            say(f"{where or 'bundle'}: {e.message}")
        raise ClientError(f"{len(bundle.errors)} problem(s); no bundle written")
    target = output or directory.resolve().with_suffix(".zip")
    target.write_bytes(data)
    assert bundle.manifest is not None
    console.print(
        plain(
            f"Wrote {target} ({len(data):,} bytes): {len(bundle.kernels)} kernel(s), "
            f"{len(bundle.traces)} trace(s), {len(bundle.proposals)} proposal(s), "
            f"condition {bundle.manifest.condition}."
        )
    )


@app.command("submit-run")
@friendly
def submit_run(
    ctx: typer.Context,
    bundle: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    public: PublicOpt = False,
    wait: Annotated[
        bool, typer.Option(help="Follow its evaluations until all have finished, then show it.")
    ] = False,
    timeout: TimeoutOpt = None,
    poll_interval: PollOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """Upload a run bundle (zip), private until published, with a progress bar; --wait
    follows its evaluations. A big bundle is validated by the portal after the upload: the
    command waits for that, and exits 1 with the bundle's problems if it is rejected."""
    _follow_options_check(wait=wait, timeout=timeout, poll_interval=poll_interval)
    state = _state(ctx)
    api = state.api
    size = bundle.stat().st_size
    columns = (
        TextColumn("uploading {task.description}", markup=False),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
    )
    with Progress(*columns, console=err_console, transient=as_json) as progress:
        bar = progress.add_task(bundle.name, total=size)
        created = api.upload(
            "/api/runs/",
            field="bundle",
            file=bundle,
            data={"is_public": str(public).lower()},
            advance=lambda n: progress.advance(bar, n),
        )
    if created.get("state") == VALIDATING:
        _validation_wait(state, created["id"], poll=poll_interval, as_json=as_json)
        created = {"id": created["id"], "url": created["url"]}
    if as_json and not wait:
        return print_json(created)
    if not as_json:
        console.print(plain(f"Run {created['id']}: {created['url']}"))
    if wait:
        _follow_run(state, created["id"], as_json=as_json, timeout=timeout, poll=poll_interval)
    return None


def _validation_wait(state: State, pk: int, *, poll: float | None, as_json: bool) -> None:
    """Wait while the portal validates the run's bundle (its upload answered 202); a
    ClientError listing the problems when it is rejected."""
    try:
        run = run_validation_wait(state.api, pk, poll=poll or POLL_SECONDS, transient=as_json)
    except KeyboardInterrupt:
        server = f"--server {state.api.server} " if state.explicit_server else ""
        say(
            f"Stopped waiting for run {pk}; the portal goes on validating its bundle. "
            f"Look at it with: d2k {server}run {pk}"
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    _rejected_check(run)


def _rejected_check(run: dict[str, Any]) -> None:
    if run["state"] != REJECTED:
        return
    problems = bundle_problems(run)
    for line in problems:
        say(line)
    raise ClientError(
        f"the portal rejected the bundle of run {run['id']} ({len(problems)} problem(s)); "
        "nothing of it was kept: fix it and upload it again"
    )


def _follow_options_check(
    *, wait: bool, timeout: float | None, poll_interval: float | None
) -> None:
    for name, value in (("--timeout", timeout), ("--poll-interval", poll_interval)):
        if value is not None and not wait:
            raise ClientError(f"{name} goes with --wait")


def _run_print(detail: dict[str, Any], as_json: bool) -> None:
    if as_json:
        print_json(detail)
    else:
        run_show(detail)


def _follow_run(
    state: State, pk: int, *, as_json: bool, timeout: float | None, poll: float | None
) -> None:
    """Follow the run's evaluations, then print it as `d2k run` does; exit 3 when one
    finished other than correct, 4 when the time ran out, 130 on Ctrl-C."""
    server = f"--server {state.api.server} " if state.explicit_server else ""
    again = f"d2k {server}run {pk} --wait"
    try:
        detail = run_follow(
            state.api, pk, timeout=timeout, poll=poll or POLL_SECONDS, transient=as_json
        )
    except KeyboardInterrupt:
        say(
            f"Stopped following run {pk}; it stays uploaded and its evaluations go on. "
            f"Follow it again with: {again}"
        )
        raise typer.Exit(EXIT_INTERRUPTED) from None
    except FollowTimedOut as exc:
        _run_print(exc.run, as_json)
        tally = run_tally(exc.run)
        say(
            f"d2k: run {pk} is still {exc.run['state']} after {timeout:g} s "
            f"({tally.finished}/{tally.total} finished). Follow it again with: {again}"
        )
        raise typer.Exit(EXIT_TIMED_OUT) from None
    _rejected_check(detail)
    _run_print(detail, as_json)
    if run_tally(detail).not_correct:
        raise typer.Exit(EXIT_NOT_CORRECT)


@app.command()
@friendly
def runs(ctx: typer.Context, as_json: JsonOpt = False) -> None:
    """The runs you may see, newest first."""
    items = list(_state(ctx).api.pages("/api/runs/"))
    if as_json:
        return print_json(items)
    columns = ["id", "owner", "model", "agent", "condition", "state", "pair", "created_at"]
    console.print(table(None, items, columns))
    return None


@app.command()
@friendly
def run(
    ctx: typer.Context,
    run_id: Annotated[int, typer.Argument(metavar="ID")],
    wait: Annotated[
        bool, typer.Option(help="Follow its evaluations until all have finished.")
    ] = False,
    timeout: TimeoutOpt = None,
    poll_interval: PollOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """One run: its manifest, state, and each task's result beside its twin's."""
    _follow_options_check(wait=wait, timeout=timeout, poll_interval=poll_interval)
    if wait:
        return _follow_run(
            _state(ctx), run_id, as_json=as_json, timeout=timeout, poll=poll_interval
        )
    _run_print(_state(ctx).api.get(f"/api/runs/{run_id}/"), as_json)
    return None


class BoardFormat(StrEnum):
    table = "table"
    csv = "csv"
    json = "json"


def _filters(pairs: list[str]) -> dict[str, str]:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ClientError(f"--filter {pair!r}: write KEY=VALUE")
        out[key] = value
    return out


@app.command()
@friendly
def leaderboard(
    ctx: typer.Context,
    fmt: Annotated[BoardFormat, typer.Option("--format", help="How to print it.")] = (
        BoardFormat.table
    ),
    task_slug: Annotated[str | None, typer.Option("--task", help="Only this task.")] = None,
    condition: Annotated[str | None, typer.Option(help="e.g. none, L1+L2+L3.")] = None,
    model: Annotated[str | None, typer.Option(help="Only runs of this model.")] = None,
    hardware: Annotated[str | None, typer.Option(help="Only results timed on this GPU.")] = None,
    filters: Annotated[
        list[str] | None,
        typer.Option("--filter", help="Any other filter of the API, KEY=VALUE (repeatable)."),
    ] = None,
    columns: Annotated[
        str | None,
        typer.Option(
            help="The table's columns, comma-separated (e.g. model,condition,geomean_speedup), "
            "or 'all'; default: run, GPU, model, agent, condition and the headline scores."
        ),
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """The leaderboard (GET /api/leaderboard/), as a table, CSV or JSON.

    The table keeps each cell on one line and shows the columns that fit the terminal;
    those left out are named on stderr."""
    api = _state(ctx).api
    params: dict[str, Any] = {
        "task": task_slug,
        "condition": condition,
        "model": model,
        "hardware": hardware,
        **_filters(filters or []),
    }
    params = {k: v for k, v in params.items() if v not in (None, "")}
    if fmt is BoardFormat.csv:
        # ?format=csv picks the portal's CSV renderer, which answers only a client that
        # accepts text/csv (the JSON default would be a 406).
        response = api.request(
            "GET",
            "/api/leaderboard/",
            params={**params, "format": "csv"},
            headers={"Accept": "text/csv"},
        )
        sys.stdout.write(plain(response.text).plain)
        return None
    data = api.get("/api/leaderboard/", **params)
    if as_json or fmt is BoardFormat.json:
        return print_json(data)
    rows = list((data.get("results", data.get("rows")) if isinstance(data, dict) else data) or [])
    chosen = [c.strip() for c in columns.split(",") if c.strip()] if columns else None
    try:
        wanted = board_columns(rows, chosen)
    except ValueError as exc:
        raise ClientError(f"--columns: {exc}") from None
    width = terminal_width()
    shown, left_out = fitted_columns(rows, wanted, width)
    # A console as wide as the terminal is now (the shared one keeps the width it started with).
    Console(width=width).print(board_table(rows, shown))
    if left_out:
        say(
            f"{len(left_out)} column(s) left out to fit {width} characters: "
            f"{', '.join(left_out)} (choose with --columns, or widen the terminal)"
        )
    return None


@app.command()
@friendly
def check(
    file: Annotated[Path, typer.Argument(exists=True, dir_okay=False, readable=True)],
    task_slug: Annotated[str, typer.Option("--task", help="The task's slug.")],
    mode: Annotated[str, typer.Option(help="auto, interpret or cuda.")] = "auto",
    catalog: Annotated[
        Path | None, typer.Option(help="The catalog folder (default: the portal's own).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """Evaluate a kernel file locally with the portal's evaluator (the evaluator extra)."""
    if importlib.util.find_spec(EVALUATOR_MODULE) is None:
        raise ClientError(
            "d2k check needs the portal's evaluator, which is not installed in this Python "
            "environment: install a D2K Portal checkout here with `pip install -e "
            "'.[evaluator]'` (and the client with `pip install './client[evaluator]'`)"
        )
    argv = [sys.executable, "-m", EVALUATOR_MODULE, "check", str(file), "--task", task_slug]
    argv += ["--mode", mode]
    if catalog is not None:
        argv += ["--catalog", str(catalog)]
    if as_json:
        argv.append("--json")
    # The evaluator's own process: the client imports nothing of the portal.
    raise typer.Exit(subprocess.call(argv))


def main() -> None:
    app()


__all__ = ["app", "main", "server_normalize"]
