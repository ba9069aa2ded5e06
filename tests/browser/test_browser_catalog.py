"""A visitor browses the catalog in a real headless Chromium and opens a task."""

from pathlib import Path

import pytest

from task_catalog.services import catalog_load
from tests.browser.support import MARKS

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [*MARKS, pytest.mark.django_db(transaction=True)]


def test_a_visitor_goes_from_the_home_page_to_a_task_and_sees_its_property_graph(page):
    from playwright.sync_api import expect

    catalog_load(directory=ROOT / "catalog")
    tasks = sum(1 for p in (ROOT / "catalog").iterdir() if (p / "task.toml").exists())

    page.goto("/")
    page.click("header nav a:text-is('Catalog')")
    expect(page).to_have_url("/tasks/")
    expect(page.locator("h1")).to_have_text("Task catalog")
    expect(page.locator("table.catalog tbody tr")).to_have_count(tasks)

    page.click("table.catalog a:text-is('Row-wise softmax')")
    expect(page).to_have_url("/tasks/row_softmax/")
    expect(page.locator("h1")).to_contain_text("Row-wise softmax")
    expect(page.locator("#statement")).to_contain_text("softmax")
    expect(page.locator("#reference")).to_contain_text("class Model")
    expect(page.locator("#guidance-L1")).to_be_visible()
    # plotly.js, served from the site's own static files, draws the property graph.
    graph = page.locator("[data-figure=property-figure] .main-svg").first
    expect(graph).to_be_visible()
    # The breadcrumb leads back to the catalog.
    page.click("main p.muted a:text-is('Catalog')")
    expect(page).to_have_url("/tasks/")
