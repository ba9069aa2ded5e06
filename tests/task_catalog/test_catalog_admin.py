import json
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse

from task_catalog.models import Task, TaskVersion
from task_catalog.services import MEASURED_FIELDS, catalog_load
from tests.factories import UserFactory

pytestmark = pytest.mark.django_db


@pytest.fixture
def task(tmp_path: Path) -> Task:
    shutil.copytree(settings.BASE_DIR / "catalog" / "row_softmax", tmp_path / "row_softmax")
    catalog_load(directory=tmp_path)
    return Task.objects.get()


@pytest.fixture
def admin_client(client):
    client.force_login(UserFactory(is_staff=True, is_superuser=True))
    return client


def test_task_change_page_previews_guidance_as_markdown(admin_client, task):
    task.guidance.filter(level="L1").update(text="Use **exp2**.<script>x()</script>")
    response = admin_client.get(reverse("admin:task_catalog_task_change", args=[task.pk]))
    assert response.status_code == 200
    html = response.content.decode()
    assert "<strong>exp2</strong>" in html
    assert "<script>x()" not in html


def test_task_version_change_page_is_read_only(admin_client, task):
    url = reverse("admin:task_catalog_taskversion_change", args=[task.current_version.pk])
    response = admin_client.get(url)
    assert response.status_code == 200
    assert b"bf16_16384x1024" in response.content
    assert b'name="reference_source"' not in response.content
    admin_client.post(url, {"reference_source": "changed"})
    task.current_version.refresh_from_db()
    assert task.current_version.reference_source != "changed"


def test_new_version_form_is_prefilled_from_the_current_version(admin_client, task):
    url = reverse("admin:task_catalog_taskversion_add") + f"?task={task.pk}"
    response = admin_client.get(url)
    assert response.status_code == 200
    assert b"check_fp32_4x1000" in response.content  # workloads JSON
    assert b"not_multiple_of" in response.content  # the hidden workloads' declaration


@pytest.fixture
def task_with_baseline(tmp_path: Path) -> Task:
    """A task with a `baseline.py` and allowed ops: the optional measured fields set."""
    folder = tmp_path / "fused_adamw"
    shutil.copytree(settings.BASE_DIR / "catalog" / "fused_adamw", folder)
    toml = folder / "task.toml"
    toml.write_text(
        toml.read_text().replace(
            "inplace = true\n", 'inplace = true\nallowed_ops = ["aten::mul"]\n'
        )
    )
    catalog_load(directory=tmp_path)
    task = Task.objects.get()
    assert task.current_version.baseline_source and task.current_version.allowed_ops
    return task


def test_new_version_form_is_prefilled_with_every_measured_field(admin_client, task_with_baseline):
    version = task_with_baseline.current_version
    url = reverse("admin:task_catalog_taskversion_add") + f"?task={task_with_baseline.pk}"

    initial = admin_client.get(url).context["adminform"].form.initial

    for field in MEASURED_FIELDS:
        if field != "workloads":
            assert initial[field] == getattr(version, field), field
    assert [w["name"] for w in initial["workloads"]] == [w.name for w in version.workloads.all()]


def prefilled_form_data(admin_client, task: Task) -> dict:
    """What a browser posts back from the new-version form as it was filled in: textarea
    lines end in CRLF."""
    url = reverse("admin:task_catalog_taskversion_add") + f"?task={task.pk}"
    form = admin_client.get(url).context["adminform"].form
    data = {name: form[name].value() for name in form.fields}
    data = {k: ("" if v is None else v) for k, v in data.items() if v is not False}
    return {k: v.replace("\n", "\r\n") if isinstance(v, str) else v for k, v in data.items()}


def test_the_prefilled_form_saved_unchanged_keeps_the_current_version(
    admin_client, task_with_baseline
):
    old = task_with_baseline.current_version

    response = admin_client.post(
        reverse("admin:task_catalog_taskversion_add"),
        prefilled_form_data(admin_client, task_with_baseline),
    )

    assert response.status_code == 302
    task_with_baseline.refresh_from_db()
    assert task_with_baseline.current_version == old
    assert TaskVersion.objects.count() == 1


def test_a_new_version_from_the_prefilled_form_keeps_the_baseline_and_allowed_ops(
    admin_client, task_with_baseline
):
    old = task_with_baseline.current_version
    data = prefilled_form_data(admin_client, task_with_baseline)
    data["reference_source"] = old.reference_source + "\n# v2\n"

    response = admin_client.post(reverse("admin:task_catalog_taskversion_add"), data)

    assert response.status_code == 302, response.content.decode()[:2000]
    task_with_baseline.refresh_from_db()
    new = task_with_baseline.current_version
    assert new.number == 2
    assert new.baseline_source == old.baseline_source
    assert new.allowed_ops == old.allowed_ops


def new_version_data(task: Task, **changes) -> dict:
    version = task.current_version
    data = {
        "task": task.pk,
        "reference_source": version.reference_source,
        "expert_source": version.expert_source,
        "tolerances": json.dumps(version.tolerances),
        "forbidden_ops": json.dumps(version.forbidden_ops),
        "inplace": "",
        "seeds": version.seeds,
        "hidden_draws": json.dumps(version.hidden_draws),
        "workloads": json.dumps(
            [
                {
                    k: getattr(w, k)
                    for k in (
                        "name",
                        "role",
                        "hidden",
                        "params",
                        "flops_formula",
                        "bytes_formula",
                        "flops",
                        "bytes",
                    )
                }
                for w in version.workloads.all()
            ]
        ),
    }
    data.update(changes)
    return data


def test_new_version_form_makes_a_new_version_through_the_service(admin_client, task):
    old = task.current_version
    response = admin_client.post(
        reverse("admin:task_catalog_taskversion_add"),
        new_version_data(task, reference_source=old.reference_source + "\n# v2\n"),
    )
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.current_version.number == 2
    assert task.current_version.workloads.count() == old.workloads.count()


def test_a_changed_hidden_declaration_makes_a_new_version(admin_client, task):
    old = task.current_version
    draws = {**old.hidden_draws, "interpret": old.hidden_draws["interpret"][:1]}
    response = admin_client.post(
        reverse("admin:task_catalog_taskversion_add"),
        new_version_data(task, hidden_draws=json.dumps(draws)),
    )
    assert response.status_code == 302
    task.refresh_from_db()
    assert task.current_version.number == 2
    assert task.current_version.hidden_draws["interpret"] == draws["interpret"]


@pytest.mark.parametrize(
    "draws, message",
    [
        ({"cuda": [{"params": {"rows": {"min": 5, "max": 1}}}]}, b"between 5 and 1"),
        ({"gpu": []}, b"unknown keys"),
        ([{"name": "h", "params": {"rows": 3}}], b"not part of a package"),
    ],
)
def test_new_version_form_reports_a_bad_hidden_declaration(admin_client, task, draws, message):
    response = admin_client.post(
        reverse("admin:task_catalog_taskversion_add"),
        new_version_data(task, hidden_draws=json.dumps(draws)),
    )
    assert response.status_code == 200
    assert message in response.content
    assert TaskVersion.objects.count() == 1


def test_new_version_form_refuses_a_listed_hidden_workload(admin_client, task):
    version = task.current_version
    listed = [{"name": w.name, "role": w.role, "params": w.params} for w in version.workloads.all()]
    listed.append({"name": "h", "role": "untimed", "params": {"rows": 3, "cols": 5}})
    response = admin_client.post(
        reverse("admin:task_catalog_taskversion_add"),
        new_version_data(task, workloads=json.dumps(listed)),
    )
    assert response.status_code == 200
    assert b"drawn from the version" in response.content
    assert TaskVersion.objects.count() == 1


def test_new_version_form_reports_invalid_content(admin_client, task):
    response = admin_client.post(
        reverse("admin:task_catalog_taskversion_add"),
        new_version_data(task, tolerances=json.dumps({"fp32": {"atol": 1}})),
    )
    assert response.status_code == 200
    assert b"default" in response.content
    assert TaskVersion.objects.count() == 1
