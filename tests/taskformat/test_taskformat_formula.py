import pytest

from taskformat.formula import FormulaError, evaluate_formula


@pytest.mark.parametrize(
    ("expression", "params", "expected"),
    [
        ("2 * M * N * K", {"M": 4, "N": 5, "K": 6}, 240.0),
        ("rows * cols * (2 * esize)", {"rows": 2, "cols": 3, "dtype": "bfloat16"}, 24.0),
        ("rows * cols * esize", {"rows": 2, "cols": 3, "dtype": "float32"}, 24.0),
        ("max(a, b) + min(a, b)", {"a": 3, "b": 7}, 10.0),
        ("ceil(n / 128) * 128", {"n": 1000}, 1024.0),
        ("2 ** 24", {}, 16777216.0),
        (1234, {}, 1234.0),
        ("-x + 10", {"x": 3}, 7.0),
    ],
)
def test_formula_evaluates_arithmetic_over_params(expression, params, expected):
    assert evaluate_formula(expression, params) == expected


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "rows.__class__",
        "open('/etc/passwd')",
        "[x for x in range(3)]",
        "lambda: 1",
        "unknown_name * 2",
        "2 *",
    ],
)
def test_formula_rejects_anything_but_arithmetic(expression):
    with pytest.raises(FormulaError):
        evaluate_formula(expression, {"rows": 1})
