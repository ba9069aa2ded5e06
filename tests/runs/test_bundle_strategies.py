"""The fuzzer's run bundles are bundles the validator accepts (else it fuzzes refusals only)."""

from hypothesis import HealthCheck, given, settings

from runformat.bundle import DEFAULT_LIMITS, bundle_validate
from tests.runs.bundle_strategies import run_bundles

TASKS = ("row_softmax", "layernorm_fwd")


@given(data=run_bundles(tasks=TASKS))
@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
def test_every_generated_bundle_passes_validation(data):
    bundle = bundle_validate(data=data, task_slugs=frozenset(TASKS), limits=DEFAULT_LIMITS)
    assert bundle.ok, [e.as_dict() for e in bundle.errors]
    assert set(bundle.kernels) <= set(TASKS) and bundle.kernels


def test_an_empty_proposal_is_refused_with_its_name():
    from tests.runs.bundles import good_files, make_zip

    files = {**good_files("row_softmax"), "proposals/row_softmax.md": " \n"}
    bundle = bundle_validate(
        data=make_zip(files), task_slugs=frozenset(TASKS), limits=DEFAULT_LIMITS
    )
    assert [e.as_dict() for e in bundle.errors] == [
        {
            "file": "proposals/row_softmax.md",
            "line": None,
            "message": "The proposal file is empty; leave it out of the bundle instead.",
        }
    ]
