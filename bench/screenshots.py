"""Screenshots of the main pages, from a portal holding the catalog and the example runs.

    .venv/bin/python bench/screenshots.py [--out docs/screenshots] [--dir DIR] [--workers 2]

Starts a portal of its own (web server + `evaluation_worker`, interpret mode) on a
fresh SQLite database, loads the catalog, the experts' GPU baselines and the example
campaign (`load_example_runs`: example data written by hand, labelled as such on
every page), waits until the worker has evaluated every example kernel, then drives
Debian's chromium (headless, through Playwright) over the main pages at 1280 px and
a few at 390 px, writing one PNG per page into `--out`, each reduced to a palette of
256 colours by `pngquant` where it is installed (apt-get install pngquant): a third of
the size, which keeps docs/ within its budget (tests/docs/test_docs_size.py); then
`optipng`, where installed, recompresses it without changing a pixel (about 8 % less).

`--board-example RUNS` shoots only the boards (leaderboard, paired view, paper table)
of RUNS generated example runs (`manage.py leaderboard_example`: several attempts per
entry, so intervals and tied ranks show), which need no evaluation.

`--dir DIR` keeps the portal's database in DIR: a second run with the same DIR skips
the set-up and the evaluations and only takes the pictures again.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from d2kportal.processes import ROOT, Portal

USERNAME, PASSWORD = "ada", "a-long-passphrase-42"
IDS = """
import json
from django.contrib.auth import get_user_model
from runs.models import Run
User = get_user_model()
if not User.objects.filter(username="ada").exists():
    User.objects.create_user("ada", email="ada@example.org", password="a-long-passphrase-42",
                             affiliation="Example Lab")
runs = {r.condition: r for r in Run.objects.filter(is_example=True)}
guided = next(r for c, r in runs.items() if c != "none")
sub = guided.submissions.get(task__slug="row_softmax")
print(json.dumps({"guided": guided.pk, "unguided": runs["none"].pk, "submission": sub.pk}))
"""
# (file name, path, width): the path's {placeholders} come from IDS.
PAGES = [
    ("home", "/", 1280),
    ("catalog", "/tasks/", 1280),
    ("task", "/tasks/row_softmax/", 1280),
    ("leaderboard", "/leaderboard/", 1280),
    ("paired", "/leaderboard/paired/", 1280),
    ("charts", "/leaderboard/charts/", 1280),
    ("run", "/runs/{guided}/", 1280),
    ("trace", "/runs/{guided}/traces/row_softmax/", 1280),
    ("submission", "/submissions/{submission}/", 1280),
    ("account", "/accounts/profile/", 1280),
    ("upload-run", "/runs/new/", 1280),
    ("docs-evaluator", "/docs/evaluator/", 1280),
    ("home-390", "/", 390),
    ("trace-390", "/runs/{guided}/traces/row_softmax/", 390),
]
# With --board-example N: the boards of N generated example runs (several attempts per
# entry: intervals, tied ranks, the paper table), no evaluation needed.
BOARD_PAGES = [
    ("leaderboard-intervals", "/leaderboard/", 1280),
    ("paired-intervals", "/leaderboard/paired/", 1280),
    ("paper", "/leaderboard/paper/", 1280),
]
USER = """
from django.contrib.auth import get_user_model
User = get_user_model()
if not User.objects.filter(username="ada").exists():
    User.objects.create_user("ada", email="ada@example.org", password="a-long-passphrase-42",
                             affiliation="Example Lab")
print("{}")
"""
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "screenshots")
    parser.add_argument("--dir", type=Path, default=None, help="keep the portal's database here")
    parser.add_argument("--workers", type=int, default=2, help="evaluations at once")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds for the evaluations")
    parser.add_argument(
        "--board-example",
        type=int,
        metavar="RUNS",
        help="shoot only the boards, of RUNS generated example runs (leaderboard_example)",
    )
    args = parser.parse_args()
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        sys.exit("Debian's chromium is not installed (apt-get install chromium).")

    with tempfile.TemporaryDirectory(prefix="d2k-screenshots-") as tmp:
        directory = args.dir or Path(tmp)
        directory.mkdir(parents=True, exist_ok=True)
        portal = Portal(directory, database="sqlite", D2K_Q_WORKERS=str(args.workers))
        try:
            fresh = not (directory / "db.sqlite3").exists()
            board = args.board_example is not None
            if fresh:
                started = time.monotonic()
                portal.manage("migrate", "--noinput")
                portal.manage("load_catalog")
                portal.manage("import_baselines", str(ROOT / "docs" / "baselines.json"))
                if board:
                    print(portal.manage("leaderboard_example", "--runs", str(args.board_example)))
                else:
                    print(portal.manage("load_example_runs"))
                print(f"set-up: {time.monotonic() - started:.0f} s")
            portal.start_web()
            if fresh and not board:
                portal.start_worker()
                evaluations_wait(portal, timeout=args.timeout)
            ids = json.loads(portal.manage("shell", "-c", USER if board else IDS).splitlines()[-1])
            pages = BOARD_PAGES if board else PAGES
            shoot(portal.base_url, ids, chromium=chromium, out=args.out, pages=pages)
        finally:
            portal.close()


def evaluations_wait(portal: Portal, *, timeout: float) -> None:
    started = time.monotonic()
    while True:
        states = [e["status"] for e in portal.evaluations()]
        pending = sum(s in ("queued", "running") for s in states)
        elapsed = time.monotonic() - started
        print(f"{elapsed:5.0f} s: {len(states) - pending} of {len(states)} evaluations finished")
        if not pending:
            return
        if elapsed > timeout:
            sys.exit(f"{pending} evaluations still pending after {timeout:.0f} s")
        time.sleep(15)


def shoot(
    base_url: str, ids: dict[str, int], *, chromium: str, out: Path, pages: list = PAGES
) -> None:
    from playwright.sync_api import expect, sync_playwright

    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=CHROMIUM_ARGS)
        context = browser.new_context(viewport={"width": 1280, "height": 900})
        page = context.new_page()
        page.set_default_timeout(60_000)
        page.goto(f"{base_url}/accounts/login/")
        page.fill("input[name=username]", USERNAME)
        page.fill("input[name=password]", PASSWORD)
        page.click("main button[type=submit]")
        expect(page.locator("header nav")).to_contain_text(USERNAME)
        page.goto(f"{base_url}/accounts/profile/")
        if page.locator("table.tokens").count() == 0:
            page.fill("input[name=name]", "lab-cluster")
            page.click("form[action$='/profile/tokens/'] button[type=submit]")
            expect(page.locator("#api-token")).to_be_visible()
        for name, path, width in pages:
            page.set_viewport_size({"width": width, "height": 900 if width > 500 else 844})
            page.goto(base_url + path.format(**ids))
            page.wait_for_load_state("networkidle")
            charts = page.locator("[data-figure]")
            for i in range(charts.count()):
                expect(charts.nth(i).locator(".main-svg").first).to_be_attached()
            target = out / f"{name}.png"
            page.screenshot(path=str(target), animations="disabled")
            shrink(target)
            print(f"{target}: {target.stat().st_size / 1024:.0f} KB")
        browser.close()


def shrink(png: Path) -> None:
    """The screenshot in 256 colours, in place (text and charts stay sharp), recompressed."""
    pngquant = shutil.which("pngquant")
    if pngquant is not None:
        options = ["--quality=70-95", "--speed=1", "--strip", "--skip-if-larger", "--force"]
        # Exit status 98/99: the palette would be larger or worse; the PNG is kept as taken.
        subprocess.run([pngquant, *options, "--ext=.png", str(png)], check=False)
    optipng = shutil.which("optipng")
    if optipng is not None:  # lossless: the same pixels in fewer bytes
        subprocess.run([optipng, "-quiet", "-o2", str(png)], check=False)


if __name__ == "__main__":
    main()
