"""Fixtures shared by the test suite (each engineer appends a section)."""

# --- submissions / evaluator (engineer B) --------------------------------------------

import pytest

from tests.evaluator.fake_cli import FakeCli

# --- CI's second pass: the tests that use the database, on PostgreSQL with Redis ------


def pytest_addoption(parser):
    parser.addoption(
        "--database-only",
        action="store_true",
        help="run only the tests that use the database (CI runs them again on PostgreSQL)",
    )


def _uses_the_database(item) -> bool:
    return item.get_closest_marker("django_db") is not None or "_django_db_helper" in getattr(
        item, "fixturenames", ()
    )


def pytest_collection_modifyitems(config, items):
    if not config.getoption("--database-only"):
        return
    dropped = [item for item in items if not _uses_the_database(item)]
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = [item for item in items if _uses_the_database(item)]


# --- the broker (Redis in CI's PostgreSQL pass) --------------------------------------


@pytest.fixture(autouse=True)
def _redis_broker_emptied():
    """With D2K_TEST_REDIS_URL set the broker is Redis: each test starts and ends with this
    worker's Redis database empty, as each starts and ends with its database rolled back."""
    from django.conf import settings

    # A GPU host runs the evaluator's tests without pytest-django: no settings, no broker.
    url = settings.Q_CLUSTER.get("redis") if settings.configured else None
    if not url:
        yield
        return
    import redis

    connection = redis.Redis.from_url(url)
    connection.flushdb()
    yield
    connection.flushdb()
    connection.close()


@pytest.fixture
def fake_cli(tmp_path, settings) -> FakeCli:
    cli = FakeCli.install(tmp_path / "fake-cli")
    settings.D2K_EVALUATOR_PYTHON = str(cli.script)
    settings.D2K_EVALUATOR_MODE = "interpret"
    return cli


@pytest.fixture
def eval_task_version(db):
    """A current task version with two check workloads (one hidden) and one timed workload."""
    from tests.factories import TaskVersionFactory, WorkloadFactory

    version = TaskVersionFactory(task__slug="row_softmax", task__title="Row-wise softmax")
    WorkloadFactory(version=version, name="check_small", role="check", position=0)
    WorkloadFactory(
        version=version, name="check_hidden_tail", role="check", hidden=True, position=1
    )
    WorkloadFactory(version=version, name="bf16_big", role="timed", position=2)
    return version


# --- runs (engineer R) ---------------------------------------------------------------


@pytest.fixture
def run_tasks(db):
    """Two tasks with a current version each (row_softmax, layernorm_fwd)."""
    from tests.factories import TaskVersionFactory, WorkloadFactory

    versions = []
    for position, slug in enumerate(("row_softmax", "layernorm_fwd")):
        version = TaskVersionFactory(task__slug=slug, task__position=position)
        WorkloadFactory(version=version, name="check_small", role="check", position=0)
        versions.append(version)
    return [v.task for v in versions]


@pytest.fixture
def uploader(db):
    """A user with an API client authenticated by token."""
    from tests.factories import UserFactory, token_client

    return token_client(UserFactory(username="lab-bot"))
