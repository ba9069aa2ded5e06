"""docs/lab/ is the lab notebook: kept in the repository, never served by the site."""

from pathlib import Path

import pytest
from django.contrib.staticfiles import finders
from django.urls import NoReverseMatch, reverse

from leaderboard import documents

ROOT = Path(__file__).resolve().parents[2]
LAB = sorted((ROOT / "docs" / "lab").rglob("*.md"))


def test_the_lab_holds_the_notebooks():
    names = {p.name for p in LAB}
    assert {"evaluator-history.md", "benchmarks-history.md"} <= names


def test_no_served_document_lies_in_the_lab():
    for filename, _title in documents.DOCUMENTS.values():
        assert "/" not in filename and (ROOT / "docs" / filename).is_file()


@pytest.mark.parametrize("path", LAB, ids=lambda p: str(p.relative_to(ROOT)))
def test_a_lab_page_is_not_a_document(client, path):
    with pytest.raises(documents.DocumentNotFound):
        documents.document_render(slug=path.stem)
    assert client.get(f"/docs/{path.stem}/").status_code == 404
    assert client.get(f"/docs/lab/{path.stem}/").status_code == 404


@pytest.mark.parametrize("slug", ["lab", "../lab/evaluator-history", "lab/benchmarks-history"])
def test_no_slug_reaches_the_lab(client, slug):
    with pytest.raises(documents.DocumentNotFound):
        documents.document_render(slug=slug)
    try:
        url = reverse("leaderboard:document", args=[slug])
    except NoReverseMatch:
        return  # the URL pattern cannot even name it
    assert client.get(url).status_code == 404


def test_the_lab_is_not_a_static_file():
    for path in (ROOT / "docs" / "lab").rglob("*"):
        if path.is_file():
            relative = path.relative_to(ROOT)
            assert finders.find(str(relative)) is None
            assert finders.find(str(path.relative_to(ROOT / "docs"))) is None
