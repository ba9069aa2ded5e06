"""Accounts in a real headless Chromium: sign up, sign out, sign in, and an API token
issued on the account page, shown once, that works until it is revoked."""

import pytest

from tests.browser.support import MARKS, PASSWORD, sign_in, sign_up

pytestmark = [*MARKS, pytest.mark.django_db(transaction=True)]


def test_a_visitor_signs_up_signs_in_and_issues_an_api_token_shown_once(page, browser, live_server):
    from playwright.sync_api import expect

    page.goto("/")
    page.click("header nav a:text-is('Sign up')")
    expect(page).to_have_url("/accounts/signup/")
    # A mismatched confirmation is refused on the form, the account is not created.
    page.fill("input[name=username]", "grace")
    page.fill("input[name=email]", "grace@example.org")
    page.fill("input[name=password1]", PASSWORD)
    page.fill("input[name=password2]", PASSWORD + "x")
    page.click("main button[type=submit]")
    expect(page.locator(".field-invalid .errorlist")).to_contain_text("didn’t match")

    sign_up(page, username="grace")
    expect(page.locator(".messages")).to_contain_text("Welcome!")
    page.click("header nav button:text-is('Sign out')")
    expect(page.locator("header nav")).to_contain_text("Sign in")

    # A wrong password is refused with a message, the right one signs in.
    page.click("header nav a:text-is('Sign in')")
    page.fill("input[name=username]", "grace")
    page.fill("input[name=password]", "not-the-passphrase")
    page.click("main button[type=submit]")
    expect(page.locator("main")).to_contain_text("correct username and password")
    sign_in(page, username="grace")

    page.click("header nav a:text-is('grace')")
    expect(page).to_have_url("/accounts/profile/")
    expect(page.locator("main")).to_contain_text("You have no API token yet.")
    page.fill("input[name=name]", "lab-cluster")
    expect(page.locator("input[name=scopes][value=upload]")).to_be_checked()
    page.click("form[action$='/profile/tokens/'] button[type=submit]")
    issued = page.locator("#api-token")
    expect(issued).to_be_visible()
    key = issued.inner_text().strip()
    assert len(key) > 20
    row = page.locator("table.tokens tbody tr", has_text="lab-cluster")
    expect(row).to_contain_text("upload")

    # The token works from outside the browser session...
    api = browser.new_context(base_url=live_server.url)
    try:
        with_key = api.request.get("/api/submissions/", headers={"Authorization": f"Token {key}"})
        assert with_key.status == 200, with_key.text()
        assert api.request.get("/api/submissions/").status == 401

        # ...and is shown once only: the account page lists it by its first characters.
        page.click("header nav a:text-is('grace')")
        expect(page.locator("#api-token")).to_have_count(0)
        assert key not in page.content()
        expect(row.locator("code")).to_contain_text(key[:4])

        row.locator("button:text-is('Revoke')").click()
        expect(page.locator(".messages")).to_contain_text("is revoked")
        revoked = api.request.get("/api/submissions/", headers={"Authorization": f"Token {key}"})
        assert revoked.status in (401, 403), revoked.text()
    finally:
        api.close()
