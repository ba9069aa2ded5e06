"""docs/*.md as pages: the protocol researchers read is the one the code ships with."""

import os
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from leaderboard import documents


def test_the_evaluation_protocol_is_a_page_with_its_contents(client):
    response = client.get(reverse("leaderboard:document", args=["evaluator"]))
    html = response.content.decode()

    assert response.status_code == 200
    assert "<title>The evaluator: what is checked" in html
    # Every section has an anchor, and the contents link to it.
    assert 'id="statuses"' in html and 'href="#statuses"' in html
    assert 'id="defence-in-depth"' in html and 'href="#defence-in-depth"' in html
    assert "<table>" in html and 'class="highlight"' in html
    assert f'href="{reverse("leaderboard:document", args=["exploits"])}"' in html


def test_the_exploits_and_their_gpu_verdicts_are_a_page(client):
    response = client.get(reverse("leaderboard:document", args=["exploits"]))
    html = response.content.decode()

    assert response.status_code == 200
    assert 'id="known-gaps"' in html and 'href="#known-gaps"' in html
    assert 'id="verdicts-on-the-gpu"' in html and 'href="#verdicts-on-the-gpu"' in html
    assert f'href="{reverse("leaderboard:document", args=["benchmarks"])}"' in html


def test_the_gpu_figures_are_a_page_too(client):
    response = client.get(reverse("leaderboard:document", args=["benchmarks"]))

    assert response.status_code == 200
    assert 'id="timing-stability"' in response.content.decode()


def test_every_page_links_to_the_protocol(client, db):
    html = client.get(reverse("leaderboard:home")).content.decode()
    assert f'href="{reverse("leaderboard:document", args=["evaluator"])}"' in html


def test_every_document_of_docs_is_listed_and_the_index_links_each(client, db):
    shipped = {p.name for p in (Path(settings.BASE_DIR) / "docs").glob("*.md")}
    assert {filename for filename, _ in documents.DOCUMENTS.values()} == shipped
    index = client.get(reverse("leaderboard:documents"))
    assert index.status_code == 200
    for slug in documents.DOCUMENTS:
        assert f'href="{reverse("leaderboard:document", args=[slug])}"' in index.content.decode()
        assert client.get(reverse("leaderboard:document", args=[slug])).status_code == 200
    home = client.get(reverse("leaderboard:home")).content.decode()
    assert f'<a href="{reverse("leaderboard:documents")}">Docs</a>' in home


@pytest.mark.parametrize("slug", ["nope", "README", "lab"])
def test_only_listed_documents_are_served(client, slug):
    response = client.get(reverse("leaderboard:document", args=[slug]))
    assert response.status_code == 404


def test_a_missing_file_is_a_404_not_a_500(client, settings, tmp_path):
    settings.BASE_DIR = tmp_path
    response = client.get(reverse("leaderboard:document", args=["evaluator"]))
    assert response.status_code == 404


def test_a_document_is_sanitised_and_re_read_when_it_changes(settings, tmp_path):
    settings.BASE_DIR = tmp_path
    (tmp_path / "docs").mkdir()
    path = tmp_path / "docs" / "evaluator.md"
    path.write_text(
        '# Title\n\n## Part\n\n<script>alert(1)</script><a href="x" onclick="y">z</a>\n'
    )

    first = documents.document_render(slug="evaluator")
    assert "<script" not in first.html and "onclick" not in first.html
    assert first.title == "Title" and [e.anchor for e in first.toc] == ["part"]

    path.write_text("# Title\n\n## Another part\n")
    os.utime(path, ns=(1, 10**18))
    assert [e.anchor for e in documents.document_render(slug="evaluator").toc] == ["another-part"]


# A list item indented by one to three spaces: Python-Markdown does not nest it
# (four spaces do).
SHALLOW_ITEM = re.compile(r"^ {1,3}([-*+]|\d+\.) ")


@pytest.mark.parametrize("slug", sorted(documents.DOCUMENTS))
def test_the_pages_markdown_is_written_the_way_the_site_renders_it(slug):
    # Python-Markdown nests a list only under four spaces, and leaves a code
    # fence inside a list item as inline text: either would read as a mess
    # on the site (GitHub, a CommonMark renderer, shows neither problem).
    source = Path(settings.BASE_DIR) / "docs" / documents.DOCUMENTS[slug][0]
    lines = source.read_text(encoding="utf-8").splitlines()
    shallow = [n for n, line in enumerate(lines, 1) if SHALLOW_ITEM.match(line)]
    indented_fences = [
        n
        for n, line in enumerate(lines, 1)
        if line.lstrip(" ") != line and line.lstrip(" ").startswith("```")
    ]
    assert not shallow, f"{source.name}: list items indented by 1-3 spaces on lines {shallow}"
    assert not indented_fences, f"{source.name}: indented code fences on lines {indented_fences}"
    html = documents.document_render(slug=slug).html
    assert "<code>sh\n" not in html and "<code>python\n" not in html


def test_a_nested_list_renders_nested():
    html = str(documents.document_render(slug="exploits").html)
    known_gaps = html[html.index('id="known-gaps"') :]
    nested = "<ul>\n<li><strong>Defence:</strong>"
    assert nested in known_gaps
