import json

import pytest

from leaderboard.charts import (
    property_dependency_figure,
    run_level_scores_figure,
    workload_speedup_figure,
)
from leaderboard.selectors import RankingRow


def row(rank, owner, speedup, per):
    return RankingRow(
        rank=rank,
        hardware="NVIDIA H200",
        status="correct",
        owner=owner,
        submission_id=rank,
        evaluation_id=rank,
        speedup=speedup,
        workload_speedups=per,
    )


def test_speedup_figure_has_one_bar_trace_per_entry_over_the_workloads():
    rows = [row(1, "alice", 4.0, {"a": 2.0, "b": 8.0}), row(2, "bob", 1.5, {"a": 1.5})]

    figure = workload_speedup_figure(rows=rows, workloads=["a", "b"])

    assert [t["type"] for t in figure["data"]] == ["bar", "bar"]
    assert figure["data"][0]["x"] == ["a", "b"]
    assert figure["data"][0]["y"] == [2.0, 8.0]
    assert figure["data"][1]["y"] == [1.5, None]
    assert figure["data"][0]["name"].startswith("#1 alice (4.00")
    assert figure["layout"]["barmode"] == "group"
    assert figure["layout"]["shapes"][0]["y0"] == 1  # the reference line
    json.dumps(figure)  # plain data, ready for json_script


@pytest.mark.parametrize("count, top, expected", [(0, 5, 0), (3, 5, 3), (8, 5, 5), (8, 2, 2)])
def test_speedup_figure_keeps_the_top_entries(count, top, expected):
    rows = [row(i + 1, f"u{i}", 1.0, {"a": 1.0}) for i in range(count)]
    assert len(workload_speedup_figure(rows=rows, workloads=["a"], top=top)["data"]) == expected


def test_property_figure_places_levels_in_columns_and_draws_dependencies():
    props = [
        {"key": "a", "level": "L1", "title": "A", "depends_on": []},
        {"key": "b", "level": "L1", "title": "B", "depends_on": []},
        {"key": "c", "level": "L2", "title": "C", "depends_on": ["a"]},
        {"key": "d", "level": "L3", "title": "D", "depends_on": ["c", "b", "missing"]},
    ]

    figure = property_dependency_figure(properties=props)

    by_level = {t["name"]: t for t in figure["data"]}
    assert by_level["L1"]["x"] == [0, 0] and by_level["L1"]["y"] == [0, -1]
    assert by_level["L2"]["text"] == ["c"] and by_level["L3"]["x"] == [2]
    arrows = [(a["ax"], a["ay"], a["x"], a["y"]) for a in figure["layout"]["annotations"]]
    assert arrows == [(0, 0, 1, 0), (1, 0, 2, 0), (0, -1, 2, 0)]
    json.dumps(figure)


def test_property_figure_without_properties_is_empty():
    figure = property_dependency_figure(properties=[])
    assert figure["data"] == [] and figure["layout"]["annotations"] == []


def levels(l1, l2, l3, combined):
    return {"L1": l1, "L2": l2, "L3": l3, "combined": combined}


def test_run_level_figure_puts_the_run_without_guidance_beside_its_twin_with_the_uplift():
    rows = [
        {"label": "#1 twin", "condition": "none", "scores": levels(50.0, 25.0, None, 40.0)},
        {"label": "#2 this run", "condition": "L1", "scores": levels(80.0, 50.0, None, 70.0)},
    ]
    uplift = levels(30.0, 25.0, None, 30.0)

    figure = run_level_scores_figure(rows=rows, uplift=uplift)

    assert [t["name"] for t in figure["data"]] == ["#1 twin (none)", "#2 this run (L1)"]
    assert figure["data"][0]["x"] == ["L1", "L2", "L3", "combined"]
    assert figure["data"][0]["y"] == [50.0, 25.0, None, 40.0]
    assert figure["data"][1]["y"] == [80.0, 50.0, None, 70.0]
    assert figure["layout"]["barmode"] == "group"
    assert figure["layout"]["xaxis"]["ticktext"] == [
        "L1<br>uplift +30.0",
        "L2<br>uplift +25.0",
        "L3",
        "combined<br>uplift +30.0",
    ]
    assert figure["layout"]["title"]["text"].startswith("Implementation score per level")
    json.dumps(figure)


def test_run_level_figure_labels_a_level_without_a_score_as_not_scored_where_its_bar_stands():
    rows = [
        {"label": "#1", "condition": "none", "scores": levels(50.0, None, None, 50.0)},
        {"label": "#2", "condition": "L1", "scores": levels(80.0, 40.0, None, 60.0)},
    ]

    notes = run_level_scores_figure(rows=rows)["layout"]["annotations"]

    # Two bars share 0.8 of a category: the first is centred 0.2 left of it, the second 0.2 right.
    assert [(n["x"], n["y"], n["text"]) for n in notes] == [
        (pytest.approx(0.8), 0, "not<br>scored"),  # L2 of #1
        (pytest.approx(1.8), 0, "not<br>scored"),  # L3 of #1
        (pytest.approx(2.2), 0, "not<br>scored"),  # L3 of #2
    ]


def test_run_level_figure_of_one_run_has_no_uplift_and_centres_its_labels():
    rows = [{"label": "#3", "condition": "L1", "scores": levels(None, 20.0, 0.0, 10.0)}]

    figure = run_level_scores_figure(rows=rows, score="discovery")

    assert figure["data"][0]["y"] == [None, 20.0, 0.0, 10.0]  # a real 0 stays a bar
    assert figure["data"][0]["texttemplate"] == "%{y:.0f}"  # written over it: "0"
    assert figure["layout"]["showlegend"] is True  # the legend names the run drawn alone
    assert [n["x"] for n in figure["layout"]["annotations"]] == [pytest.approx(0)]
    assert "ticktext" not in figure["layout"]["xaxis"]
    assert figure["layout"]["title"]["text"].startswith("Discovery score per level")


def test_run_level_figure_tags_example_runs_as_example_data():
    rows = [
        {"label": "#4", "condition": "none", "is_example": True, "scores": levels(1, 2, 3, 2)},
        {"label": "#5", "condition": "L1", "is_example": False, "scores": levels(4, 5, 6, 5)},
    ]

    figure = run_level_scores_figure(rows=rows)

    assert [t["name"] for t in figure["data"]] == ["#4 · example data (none)", "#5 (L1)"]
    assert figure["layout"]["title"]["text"].endswith("· example data")
