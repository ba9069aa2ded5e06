"""Text users choose stays text outside HTML too: plotly labels are escaped, CSV cells
that a spreadsheet would run as formulas are neutralised, and an agent's proposal
loads no remote image."""

from types import SimpleNamespace

import pytest

from leaderboard.charts import fast_p_figure, run_level_scores_figure, workload_speedup_figure
from leaderboard.tables import Column, csv_cell, table_csv
from task_catalog.rendering import markdown_render

HOSTILE = '<a href="https://evil.example">gpt</a><b style="font-size:80px">x</b>'
ESCAPED = (
    '&lt;a href="https://evil.example"&gt;gpt&lt;/a&gt;&lt;b style="font-size:80px"&gt;x&lt;/b&gt;'
)


def test_chart_labels_are_plain_text():
    row = SimpleNamespace(
        rank=1, run_label=HOSTILE, owner="o", speedup=2.0, workload_speedups={"w": 2.0}
    )
    figure = workload_speedup_figure(rows=[row], workloads=["w"])
    assert figure["data"][0]["name"] == f"#1 {ESCAPED} (2.00×)"
    curves = fast_p_figure(rows=[{"label": HOSTILE, "fast_p": [[1.0, 0.5]]}])
    assert curves["data"][0]["name"] == ESCAPED
    levels = run_level_scores_figure(
        rows=[{"label": "a & b", "condition": "none", "scores": {"L1": 50}}]
    )
    assert levels["data"][0]["name"] == "a &amp; b (none)"  # escaped once, not twice


@pytest.mark.parametrize(
    ("value", "cell"),
    [
        ('=HYPERLINK("https://evil.example","x")', '\'=HYPERLINK("https://evil.example","x")'),
        ("@SUM(A1:A9)", "'@SUM(A1:A9)"),
        ("+1+2", "'+1+2"),
        ("-2+3", "'-2+3"),
        ("\t=1", "'\t=1"),
        ("gpt-5", "gpt-5"),
        (-1.5, -1.5),
        (None, ""),
    ],
)
def test_csv_cells_that_would_run_as_formulas_are_text(value, cell):
    assert csv_cell(value) == cell


def test_a_csv_export_keeps_no_formula():
    text = table_csv(columns=[Column(key="model", label="model")], rows=[{"model": "=1+1"}])
    assert text == "model\n'=1+1\n"


def test_a_proposal_loads_no_remote_image_but_keeps_its_links():
    html = str(
        markdown_render("![plot](https://evil.example/p.png) [ref](https://x.org)", images=False)
    )
    assert "evil.example" not in html and 'alt="plot"' in html
    assert 'href="https://x.org"' in html
