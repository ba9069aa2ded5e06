"""What the browser tests share: Debian's chromium, the marks, and a few user steps."""

from __future__ import annotations

import shutil
from typing import TYPE_CHECKING

import pytest

if TYPE_CHECKING:
    from playwright.sync_api import Browser, BrowserContext, Page

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking"]
SKIP_REASON = (
    "Debian's chromium is not installed: `./dev test` installs it as root "
    "(apt-get install chromium); without it the browser tests cannot run"
)
MARKS = [
    pytest.mark.browser,
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason=SKIP_REASON),
]
# A busy 2-core machine: every wait is for a condition, with room to spare.
TIMEOUT_MS = 60_000
EVALUATION_TIMEOUT_MS = 600_000
PASSWORD = "a-long-passphrase-42"


def open_page(browser: Browser, base_url: str, *, width: int = 1280) -> tuple[BrowserContext, Page]:
    """A fresh browser context (no cookies) on `base_url`, `width` px wide, and its page."""
    context = browser.new_context(
        base_url=base_url, viewport={"width": width, "height": 900 if width > 500 else 844}
    )
    context.set_default_timeout(TIMEOUT_MS)
    context.set_default_navigation_timeout(TIMEOUT_MS)
    return context, context.new_page()


def sign_up(page: Page, *, username: str, email: str | None = None) -> None:
    """Create an account through the sign-up form; the site signs the new user in."""
    from playwright.sync_api import expect

    page.goto("/accounts/signup/")
    page.fill("input[name=username]", username)
    page.fill("input[name=email]", email or f"{username}@example.org")
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", PASSWORD)
    page.click("main button[type=submit]")
    expect(page).to_have_url("/accounts/profile/")
    expect(page.locator("header nav")).to_contain_text(username)


def sign_in(page: Page, *, username: str, password: str = PASSWORD) -> None:
    """Sign in through the header's link and the sign-in form."""
    from playwright.sync_api import expect

    page.goto("/")
    page.click("header nav a:text-is('Sign in')")
    page.fill("input[name=username]", username)
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    expect(page.locator("header nav")).to_contain_text(username)


SIDEWAYS = """() => {
  const width = window.innerWidth;
  const wide = [];
  for (const el of document.querySelectorAll("body *")) {
    const box = el.getBoundingClientRect();
    if (box.right > width + 1 && getComputedStyle(el).position !== "fixed") {
      let scroller = el.parentElement, clipped = false;
      while (scroller && scroller !== document.body) {
        const overflow = getComputedStyle(scroller).overflowX;
        if (overflow !== "visible") { clipped = true; break; }
        scroller = scroller.parentElement;
      }
      if (!clipped) {
        wide.push(el.tagName.toLowerCase() + (el.className && typeof el.className === "string"
          ? "." + el.className.trim().split(/\\s+/).join(".") : "") + " " + Math.round(box.right));
      }
    }
  }
  return {scroll: document.scrollingElement.scrollWidth, inner: width, wide: wide.slice(0, 5)};
}"""


def sideways_scroll(page: Page) -> str | None:
    """None if the page fits the window's width, else what sticks out (for the message)."""
    found = page.evaluate(SIDEWAYS)
    if found["scroll"] <= found["inner"]:
        return None
    return f"scrollWidth {found['scroll']} > {found['inner']}: {', '.join(found['wide'])}"
