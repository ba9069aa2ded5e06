"""Hidden-workload declarations: what the format accepts, what it refuses, and how a
secret draws them (taskformat.hidden, docs/task-format.md "Hidden workloads")."""

import shutil
import tomllib

import pytest

from taskformat.hidden import (
    HiddenDeclarationError,
    hidden_declaration_dict,
    hidden_declaration_parse,
    hidden_draw,
    task_with_hidden,
)
from taskformat.package import (
    DEFAULT_CATALOG_DIR,
    TaskPackageError,
    load_task,
    measured_content,
    measured_content_hash,
)
from taskformat.spec import Mode, WorkloadRole

SECRETS = [f"secret-{i}" for i in range(40)]


def draw(params: dict, secret: str = "s", count: int = 1) -> list[dict]:
    declaration = hidden_declaration_parse({"cuda": [{"count": count, "params": params}]})
    return [w.params for w in hidden_draw(declaration, secret=secret, slug="t")]


def test_the_same_secret_draws_the_same_workloads_and_another_secret_others():
    params = {"rows": {"min": 1, "max": 10**6}, "cols": {"min": 1, "max": 10**6}}
    assert draw(params, "one") == draw(params, "one")
    assert draw(params, "one") != draw(params, "two")
    # The slug counts too: two tasks with one declaration draw differently.
    declaration = hidden_declaration_parse({"cuda": [{"params": params}]})
    a = hidden_draw(declaration, secret="one", slug="a")
    b = hidden_draw(declaration, secret="one", slug="b")
    assert a[0].params != b[0].params


@pytest.mark.parametrize(
    "rule, holds",
    [
        ({"min": 100, "max": 5000, "multiple_of": 128}, lambda v: v % 128 == 0),
        ({"min": 100, "max": 5000, "not_multiple_of": 16}, lambda v: v % 16 != 0),
        ({"min": 100, "max": 5000, "odd": True}, lambda v: v % 2 == 1),
        ({"min": 10**7, "max": 10**8, "prime": True}, lambda v: all(v % p for p in range(2, 1000))),
        ({"min": 1, "max": 3}, lambda v: v in (1, 2, 3)),
        ({"choice": [32, 64, 128]}, lambda v: v in (32, 64, 128)),
    ],
)
def test_every_draw_keeps_its_rule(rule, holds):
    values = [draw({"x": rule}, secret)[0]["x"] for secret in SECRETS]
    assert all(holds(v) for v in values), values
    assert len(set(values)) > 1  # drawn, not fixed


def test_bounds_may_be_formulas_over_other_parameters_in_any_key_order():
    params = {
        "q_heads": {"min": "kv_heads", "max": 32, "multiple_of": "kv_heads"},
        "kv_heads": {"choice": [1, 2, 4, 8]},
        "k": {"min": "q_heads", "max": "q_heads"},
    }
    reordered = dict(reversed(list(params.items())))
    for secret in SECRETS:
        [one] = draw(params, secret)
        assert one["q_heads"] % one["kv_heads"] == 0 and one["k"] == one["q_heads"]
        assert draw(reordered, secret) == [one]


def test_count_draws_that_many_workloads_named_by_number_in_each_mode():
    declaration = hidden_declaration_parse(
        {
            "cuda": [{"count": 2, "params": {"n": {"min": 1, "max": 9}}}, {"params": {"n": 3}}],
            "interpret": [{"params": {"n": 1}}],
        }
    )
    drawn = hidden_draw(declaration, secret="s", slug="t")
    assert [(w.name, w.role, w.hidden) for w in drawn] == [
        ("hidden_1", WorkloadRole.UNTIMED, True),
        ("hidden_2", WorkloadRole.UNTIMED, True),
        ("hidden_3", WorkloadRole.UNTIMED, True),
        ("check_hidden_1", WorkloadRole.CHECK, True),
    ]
    assert (declaration.count(Mode.CUDA), declaration.count(Mode.INTERPRET)) == (3, 1)


@pytest.mark.parametrize(
    "raw, message",
    [
        ([{"name": "hidden_x", "params": {"n": 3}}], "not part of a package"),
        ({"gpu": []}, "unknown keys"),
        ({"cuda": {"params": {}}}, "must be a list"),
        ({"cuda": [{"params": {"n": 1}, "name": "x"}]}, "unknown keys"),
        ({"cuda": [{"params": {}}]}, "needs a params table"),
        ({"cuda": [{"count": 0, "params": {"n": 1}}]}, "count must be a positive integer"),
        ({"cuda": [{"params": {"n": {"min": 1}}}]}, "needs both min and max"),
        ({"cuda": [{"params": {"n": {"min": 1, "max": 9, "step": 2}}}]}, "unknown keys"),
        ({"cuda": [{"params": {"n": {"choice": []}}}]}, "non-empty list"),
        ({"cuda": [{"params": {"n": {"min": 9, "max": 1}}}]}, "params.n: no multiple of 1"),
        (
            {"cuda": [{"params": {"n": {"min": 24, "max": 28, "prime": True}}}]},
            "params.n: no value",
        ),
        ({"cuda": [{"params": {"n": {"min": 2, "max": 9, "not_multiple_of": 1}}}]}, "at least 2"),
        ({"cuda": [{"params": {"n": {"min": 1, "max": "m"}}}]}, "unknown parameters ['m']"),
        (
            {"cuda": [{"params": {"a": {"min": "b", "max": 9}, "b": {"min": "a", "max": 9}}}]},
            "a cycle",
        ),
        ({"cuda": [{"count": 33, "params": {"n": 1}}]}, "at most 32"),
        ({"cuda": [{"params": {"d": "x", "n": {"min": 1, "max": "d * 2"}}}]}, "fails"),
        ({"cuda": [{"params": {"n": {"min": 1, "max": "1 / 0"}}}]}, "fails"),
        ({"cuda": [{"params": {"n": [1, 2]}}]}, "a parameter is"),
    ],
)
def test_a_bad_declaration_is_refused_with_what_is_wrong(raw, message):
    with pytest.raises(
        HiddenDeclarationError, match=message.replace("[", r"\[").replace("]", r"\]")
    ):
        hidden_declaration_parse(raw)


def test_the_stored_form_reads_back_to_the_same_declaration():
    meta = tomllib.loads((DEFAULT_CATALOG_DIR / "flash_decoding" / "task.toml").read_text())
    declaration = hidden_declaration_parse(meta["hidden"])
    assert hidden_declaration_parse(hidden_declaration_dict(declaration)) == declaration


@pytest.fixture
def row_softmax(tmp_path):
    folder = tmp_path / "row_softmax"
    shutil.copytree(DEFAULT_CATALOG_DIR / "row_softmax", folder)
    return folder


def test_the_package_format_has_no_place_for_a_concrete_hidden_workload(row_softmax):
    toml = row_softmax / "task.toml"
    text = toml.read_text()
    toml.write_text(
        text + '\n[[checks]]\nname = "x"\nparams = { rows = 3, cols = 5 }\nhidden = true\n'
    )
    with pytest.raises(TaskPackageError, match="every listed workload is public"):
        load_task(row_softmax)
    start = text.index("[[hidden.cuda]]")
    end = text.index("[guidance.L1]")
    old_form = '[[hidden]]\nname = "h"\nparams = { rows = 3, cols = 5, dtype = "float32" }\n\n'
    toml.write_text(text[:start] + old_form + text[end:])
    with pytest.raises(TaskPackageError, match=r"declare how they are drawn"):
        load_task(row_softmax)


def test_the_task_hash_covers_the_declaration_never_the_drawn_workloads(row_softmax):
    task = load_task(row_softmax)
    digest = measured_content_hash(measured_content(task))
    for secret in ("one", "two"):
        drawn = task_with_hidden(task, secret=secret)
        assert any(w.hidden for w in drawn.workloads)
        assert measured_content_hash(measured_content(drawn)) == digest
    toml = row_softmax / "task.toml"
    toml.write_text(toml.read_text().replace("min = 3000, max = 5000", "min = 3000, max = 5001"))
    assert measured_content_hash(measured_content(load_task(row_softmax))) != digest
