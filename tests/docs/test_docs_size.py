"""docs/ stays lean: pages a visitor can read in one sitting, no lab data in the tree.

A served document (`leaderboard.documents.DOCUMENTS`) is at most 40 KB of markdown;
no file under docs/ is over 1 MB, and docs/ as a whole stays under 2 MB. Raw output
that no current figure cites belongs in the repository's history (docs/lab/README.md).
"""

from pathlib import Path

import pytest

from leaderboard import documents

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
PAGE_LIMIT = 40 * 1024
FILE_LIMIT = 1024 * 1024
TOTAL_LIMIT = 2 * 1024 * 1024


def docs_files() -> list[Path]:
    return sorted(p for p in DOCS.rglob("*") if p.is_file())


@pytest.mark.parametrize("slug", sorted(documents.DOCUMENTS))
def test_a_served_page_is_at_most_40_kb(slug):
    path = DOCS / documents.DOCUMENTS[slug][0]
    size = path.stat().st_size
    assert size <= PAGE_LIMIT, (
        f"docs/{path.name} is {size / 1024:.0f} KB: the history goes to docs/lab/"
    )


def test_no_file_under_docs_is_over_1_mb():
    large = [
        f"{p.relative_to(ROOT)} ({p.stat().st_size / 2**20:.1f} MB)"
        for p in docs_files()
        if p.stat().st_size > FILE_LIMIT
    ]
    assert not large


def test_docs_as_a_whole_is_under_2_mb():
    total = sum(p.stat().st_size for p in docs_files())
    assert total <= TOTAL_LIMIT, f"docs/ holds {total / 2**20:.2f} MB"


def test_the_limits_see_the_served_pages():
    # The page limit must apply to the pages the site serves, and the scan must see them.
    served = {DOCS / filename for filename, _title in documents.DOCUMENTS.values()}
    assert served and served <= set(docs_files())
    assert DOCS / "evaluator.md" in served
