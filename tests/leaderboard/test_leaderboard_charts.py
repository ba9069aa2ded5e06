import json

import pytest

from leaderboard.charts import property_dependency_figure, workload_speedup_figure
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
