"""factory_boy factories shared by the test suite (each engineer appends a section)."""

from collections.abc import Iterable, Mapping

import factory
from django.contrib.auth import get_user_model
from django.utils import timezone

from evaluator.models import Evaluation, WorkloadResult
from submissions.models import Submission
from task_catalog.models import DesignProperty, Guidance, Task, TaskVersion, Workload

# --- task catalog (engineer A) ---------------------------------------------------------


class UserFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = get_user_model()
        django_get_or_create = ["username"]

    username = factory.Sequence(lambda n: f"user{n}")
    email = factory.LazyAttribute(lambda u: f"{u.username}@example.org")
    password = factory.django.Password("correct-horse-battery")


class TaskFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Task

    slug = factory.Sequence(lambda n: f"task_{n}")
    title = factory.LazyAttribute(lambda t: t.slug.replace("_", " ").title())
    category = "normalization"
    statement = "Compute **something** fast."


class TaskVersionFactory(factory.django.DjangoModelFactory):
    """A version that becomes its task's current version."""

    class Meta:
        model = TaskVersion
        skip_postgeneration_save = True

    task = factory.SubFactory(TaskFactory)
    number = factory.Sequence(lambda n: n + 1)
    content_hash = factory.Sequence(lambda n: f"{n:064x}")
    reference_source = "class Model:\n    pass\n"
    expert_source = "class ModelNew:\n    pass\n"
    tolerances = factory.LazyFunction(
        lambda: {"default": {"atol": 1e-5, "rtol": 1e-4, "rel_l2": 1e-4}}
    )
    forbidden_ops = factory.LazyFunction(lambda: ["aten::_softmax"])

    @factory.post_generation
    def make_current(self, create, extracted, **kwargs):
        if create and extracted is not False:
            self.task.current_version = self
            self.task.save(update_fields=["current_version"])


class WorkloadFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Workload

    version = factory.SubFactory(TaskVersionFactory)
    name = factory.Sequence(lambda n: f"wl_{n}")
    role = Workload.Role.TIMED
    hidden = factory.LazyAttribute(lambda w: w.role == Workload.Role.UNTIMED)
    params = factory.LazyFunction(lambda: {"rows": 1024, "cols": 1024, "dtype": "float32"})
    flops = 5 * 1024 * 1024
    bytes = 8 * 1024 * 1024
    flops_formula = "5 * rows * cols"
    bytes_formula = "2 * rows * cols * esize"
    position = factory.Sequence(lambda n: n)


def task_with_workloads(
    *,
    timed: Iterable[str] | Mapping[str, dict] = ("bf16_4096x4096", "fp32_1024x50000"),
    hidden: Iterable[str] = ("hidden_tail",),
    checks: Iterable[str] = (),
    hidden_checks: Iterable[str] = (),
    **version_fields,
) -> Task:
    """A task whose current version (TaskVersionFactory with `version_fields`, `task__slug=`
    and the like) has the named workloads: the timed ones, the hidden ones, then the check
    workloads, public before hidden, at positions 0, 1, 2, … in that order.

    The defaults are two timed workloads and one hidden, named as in the GPU verdict
    fixture `gpu_verdict()` (tests/evaluator/test_baselines.py). `timed` may map each name
    to its workload's own fields (`{"timed_a": {"flops": 10, "bytes": 20}}`).
    """
    version = TaskVersionFactory(**version_fields)
    timed_fields = timed if isinstance(timed, Mapping) else {name: {} for name in timed}
    rows = [
        (name, {"role": Workload.Role.TIMED, **fields}) for name, fields in timed_fields.items()
    ]
    rows += [(name, {"role": Workload.Role.UNTIMED}) for name in hidden]
    rows += [(name, {"role": Workload.Role.CHECK}) for name in checks]
    rows += [(name, {"role": Workload.Role.CHECK, "hidden": True}) for name in hidden_checks]
    for position, (name, fields) in enumerate(rows):
        WorkloadFactory(version=version, name=name, position=position, **fields)
    return version.task


class GuidanceFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Guidance

    task = factory.SubFactory(TaskFactory)
    level = "L1"
    text = "Use an **online** normalizer."
    depends_on = factory.LazyFunction(list)


class DesignPropertyFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = DesignProperty

    task = factory.SubFactory(TaskFactory)
    key = factory.Sequence(lambda n: f"prop_{n}")
    level = "L1"
    title = factory.LazyAttribute(lambda p: p.key.replace("_", " "))
    weight = 1.0
    detector = factory.LazyFunction(lambda: {"kind": "manual"})


class SubmissionFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Submission

    owner = factory.SubFactory(UserFactory)
    task_version = factory.SubFactory(TaskVersionFactory)
    task = factory.SelfAttribute("task_version.task")
    source = "class ModelNew:\n    pass\n"
    sha256 = factory.LazyAttribute(lambda s: Submission.digest(s.source))
    is_public = True


class EvaluationFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Evaluation

    submission = factory.SubFactory(SubmissionFactory)
    status = "correct"
    mode = "cuda"
    # A GPU verdict names its GPU; an interpreter one is untimed.
    hardware = factory.LazyAttribute(lambda e: "NVIDIA H200" if e.mode == "cuda" else "")
    finished_at = factory.LazyFunction(timezone.now)


class WorkloadResultFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = WorkloadResult

    evaluation = factory.SubFactory(EvaluationFactory)
    name = factory.Sequence(lambda n: f"wl_{n}")
    role = "timed"
    status = "correct"
    median_ms = 1.0
    ref_median_ms = 2.0
    speedup = factory.LazyAttribute(lambda r: r.ref_median_ms / r.median_ms)
    position = factory.Sequence(lambda n: n)


# --- runs (engineer R) ---------------------------------------------------------------


class RunFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = "runs.Run"

    owner = factory.SubFactory(UserFactory)
    model = "model-x"
    agent = "agent-y"
    levels = factory.LazyFunction(list)
    condition = factory.LazyAttribute(lambda r: "+".join(r.levels) if r.levels else "none")
    hardware = "NVIDIA H200"
    catalog_version = "0123456789ab"
    state = "evaluating"
    is_public = True


# --- accounts (engineer accounts) ----------------------------------------------------


def api_token_key(user, *, scopes=("upload",), name="tests") -> str:
    """A fresh API token for `user` (hashed in the database), as the key a client sends."""
    from accounts.services import token_issue

    return token_issue(user=user, name=name, scopes=scopes).key


def token_client(user, *, scopes=("upload",)):
    """An APIClient sending `Authorization: Token <key>` for a new token of `user`."""
    from rest_framework.test import APIClient

    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {api_token_key(user, scopes=scopes)}")
    client.user = user
    return client
