"""The browser suite's fixtures: Debian's chromium through Playwright, headless."""

import os

import pytest

from tests.browser.support import CHROMIUM, CHROMIUM_ARGS, SKIP_REASON, TIMEOUT_MS, open_page


@pytest.fixture(scope="module")
def browser():
    if CHROMIUM is None:
        pytest.skip(SKIP_REASON)
    sync_api = pytest.importorskip("playwright.sync_api")
    # Playwright's sync API runs an event loop in this thread; Django's async-safety
    # check would otherwise refuse the tests' own ORM calls made beside it.
    saved = os.environ.get("DJANGO_ALLOW_ASYNC_UNSAFE")
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    sync_api.expect.set_options(timeout=TIMEOUT_MS)
    try:
        with sync_api.sync_playwright() as playwright:
            browser = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            yield browser
            browser.close()
    finally:
        if saved is None:
            os.environ.pop("DJANGO_ALLOW_ASYNC_UNSAFE", None)
        else:
            os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = saved


@pytest.fixture
def page(browser, live_server):
    """A desktop-sized page of a fresh browser context on the live server."""
    context, page = open_page(browser, live_server.url)
    yield page
    context.close()


@pytest.fixture
def phone(browser, live_server):
    """A page 390 px wide (a phone held upright) on the live server."""
    context, page = open_page(browser, live_server.url, width=390)
    yield page
    context.close()
