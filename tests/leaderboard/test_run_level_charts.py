"""The run page's per-level charts, built from the scores the page already read."""

import pytest

from leaderboard.selectors.breakdowns import run_level_charts
from runs.models import Run
from scoring.selectors.runs import RunScoresView


def run(pk, condition, **fields):
    fields.setdefault("is_public", True)
    return Run(pk=pk, condition=condition, **fields)


def scores(implementation, discovery=None):
    empty = {"L1": None, "L2": None, "L3": None, "combined": None}
    return {"implementation": implementation, "discovery": discovery or empty}


IMPL_NONE = {"L1": 40.0, "L2": 20.0, "L3": None, "combined": 30.0}
IMPL_L1 = {"L1": 90.0, "L2": 60.0, "L3": None, "combined": 75.0}


def test_the_twin_without_guidance_comes_first_with_the_uplift_under_each_level():
    guided, plain = run(2, "L1"), run(1, "none")
    view = RunScoresView(
        mine=scores(IMPL_L1),
        twin=scores(IMPL_NONE),
        uplift={"implementation": {"L1": 50.0, "L2": 40.0, "L3": None, "combined": 45.0}},
    )

    charts = run_level_charts(run=guided, pair=plain, scores=view)

    assert [name for name, _ in charts.figures] == ["run-implementation"]  # no discovery
    figure = charts.figures[0][1]
    assert [t["name"] for t in figure["data"]] == ["#1 twin (none)", "#2 this run (L1)"]
    assert [t["y"] for t in figure["data"]] == [
        [40.0, 20.0, None, 30.0],
        [90.0, 60.0, None, 75.0],
    ]
    assert figure["layout"]["xaxis"]["ticktext"][0] == "L1<br>uplift +50.0"
    assert charts.breakdown_ids == [1, 2]


def test_discovery_is_charted_where_a_run_has_a_discovery_score():
    discovery = {"L1": None, "L2": None, "L3": None, "combined": 50.0}
    view = RunScoresView(mine=scores(IMPL_NONE, discovery), twin=None, uplift=None)

    charts = run_level_charts(run=run(1, "none"), pair=None, scores=view)

    assert [name for name, _ in charts.figures] == ["run-implementation", "run-discovery"]
    assert charts.figures[1][1]["data"][0]["y"] == [None, None, None, 50.0]


@pytest.mark.parametrize(
    "mine",
    [None, scores({"L1": None, "L2": None, "L3": None, "combined": None})],
    ids=["not computed", "no level scored"],
)
def test_a_run_without_level_scores_has_no_chart(mine):
    view = RunScoresView(mine=mine, twin=None, uplift=None)

    charts = run_level_charts(run=run(1, "none"), pair=None, scores=view)

    assert charts.figures == [] and charts.breakdown_ids == []


def test_a_twin_whose_scores_are_not_computed_is_left_out():
    view = RunScoresView(mine=scores(IMPL_L1), twin=None, uplift=None)

    charts = run_level_charts(run=run(2, "L1"), pair=run(1, "none"), scores=view)

    assert [t["name"] for t in charts.figures[0][1]["data"]] == ["#2 this run (L1)"]
    assert charts.breakdown_ids == [2]


@pytest.mark.parametrize(
    "mine, twin, expected",
    [
        ({}, {}, [1, 2]),
        ({}, {"is_public": False}, [2]),
        ({}, {"moderation": "hacked"}, [2]),
        ({"is_public": False}, {}, []),  # the breakdowns page would not show this run
        ({"moderation": "withdrawn"}, {}, []),
    ],
)
def test_the_breakdowns_link_names_the_charted_runs_the_breakdowns_page_shows(mine, twin, expected):
    view = RunScoresView(mine=scores(IMPL_L1), twin=scores(IMPL_NONE), uplift=None)

    charts = run_level_charts(run=run(2, "L1", **mine), pair=run(1, "none", **twin), scores=view)

    assert charts.breakdown_ids == expected
