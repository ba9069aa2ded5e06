"""`d2k leaderboard` as a readable table (chosen columns, fitted to the terminal) and
`d2k run ID` with the headline scores and the uplift, against a live portal."""

import pytest

from tests.leaderboard.test_board_views import pair, scored

WIDTH = 100


@pytest.fixture
def narrow(monkeypatch):
    monkeypatch.setenv("COLUMNS", str(WIDTH))


def _lines(result):
    assert result.exit_code == 0, result.output
    return result.stdout.splitlines()


def test_the_table_shows_the_headline_columns_within_the_terminal(portal, d2k, narrow):
    scored(model="model-board", agent="agent-board", ps=1.5)

    result = d2k("leaderboard")

    lines = _lines(result)
    assert max(len(line) for line in lines) <= WIDTH
    header = next(line for line in lines if "GPU" in line)
    for column in ("runs", "model", "agent", "condition", "correct", "PS", "geomean", "impl"):
        assert f" {column} " in header
    row = next(line for line in lines if "model-board" in line)
    assert "agent-board" in row and "1.5" in row and "…" not in row
    # what did not fit is named, never cut to "runs…"
    assert "left out to fit 100 characters" in result.stderr
    assert "--columns" in result.stderr


def test_columns_chooses_what_the_table_shows(portal, d2k, narrow):
    scored(model="model-board", ps=1.5)

    lines = _lines(d2k("leaderboard", "--columns", "model,performance_score,geomean_speedup"))

    header = next(line for line in lines if "model" in line and "PS" in line)
    assert "geomean" in header and "runs" not in header and "GPU" not in header
    assert any("model-board" in line and "1.5" in line and "1.7" in line for line in lines)


def test_all_columns_on_a_wide_terminal_and_an_unknown_column_is_one_line(portal, d2k, monkeypatch):
    scored(model="model-board")
    # Every key of the API's rows: the scores, their intervals, the entry's attempts.
    monkeypatch.setenv("COLUMNS", "4000")
    result = d2k("leaderboard", "--columns", "all")
    assert "implementation_L3" in result.stdout and "turns" in result.stdout
    assert result.stderr == ""

    bad = d2k("leaderboard", "--columns", "model,speed")
    assert bad.exit_code == 1
    [line] = bad.stderr.strip().splitlines()
    assert "unknown column(s) speed" in line and "performance_score" in line


def test_run_shows_its_headline_scores_beside_its_twin_with_the_uplift(portal, d2k, monkeypatch):
    monkeypatch.setenv("COLUMNS", "160")
    _, with_guidance = pair(model="model-pair", without=1.46, with_=1.95)

    lines = _lines(d2k("run", str(with_guidance.pk)))

    def row(name):
        return next(line for line in lines if name in line)

    assert "1.95" in row("Performance Score") and "1.46" in row("Performance Score")
    assert "+0.49" in row("Performance Score")
    assert "2.15× (N=20)" in row("geomean speedup") and "+0.49×" in row("geomean speedup")
    assert "23/26 (90.0%)" in row("correct tasks")
    assert "50.0" in row("implementation") and "+0.0" in row("implementation")


def test_a_run_without_scores_says_they_are_not_computed_yet(portal, d2k):
    from tests.factories import RunFactory

    run = RunFactory(model="model-unscored")
    result = d2k("run", str(run.pk))
    assert result.exit_code == 0, result.output
    assert "Scores: not computed yet" in result.stdout
