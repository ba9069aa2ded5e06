"""docs/*.md as pages: the protocol researchers read is the one the code ships with."""

import os

import pytest
from django.urls import reverse

from leaderboard import documents


def test_the_evaluation_protocol_is_a_page_with_its_contents(client):
    response = client.get(reverse("leaderboard:document", args=["evaluator"]))
    html = response.content.decode()

    assert response.status_code == 200
    assert "<title>The evaluator: what is checked" in html
    # Every section has an anchor, and the contents link to it.
    assert 'id="known-gaps"' in html and 'href="#known-gaps"' in html
    assert 'id="verdicts-on-the-gpu"' in html and 'href="#verdicts-on-the-gpu"' in html
    assert "<table>" in html and 'class="highlight"' in html
    assert f'href="{reverse("leaderboard:document", args=["benchmarks"])}"' in html


def test_the_gpu_figures_are_a_page_too(client):
    response = client.get(reverse("leaderboard:document", args=["benchmarks"]))

    assert response.status_code == 200
    assert 'id="timing-stability-issue-3"' in response.content.decode()


def test_every_page_links_to_the_protocol(client, db):
    html = client.get(reverse("leaderboard:home")).content.decode()
    assert f'href="{reverse("leaderboard:document", args=["evaluator"])}"' in html


@pytest.mark.parametrize("slug", ["nope", "settings", "task-format"])
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
