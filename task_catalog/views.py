from django.http import Http404
from django.shortcuts import render

from leaderboard.caching import fragment, versioned
from leaderboard.charts import property_dependency_figure, workload_speedup_figure
from leaderboard.selectors import ranking_hardware, task_expert_baseline, task_ranking
from leaderboard.selectors.experts import baselines_pending

from .selectors import (
    guidance_history,
    guidance_version_current,
    task_get_public,
    task_list,
    task_public_workloads,
)


def task_list_view(request):
    page = versioned(name="catalog", key="", build=_catalog_page)
    return render(request, "task_catalog/list.html", page)


def _catalog_page() -> dict:
    tasks = list(task_list())
    return {
        "count": len(tasks),
        "table": fragment(template="task_catalog/_list.html", context={"tasks": tasks}),
    }


def task_detail_view(request, slug: str):
    page = versioned(name="task-page", key=slug, build=lambda: _task_page(slug))
    if page is None:
        raise Http404(f"No task {slug!r} in the catalog.")
    return render(request, "task_catalog/detail.html", page)


def _task_page(slug: str) -> dict | None:
    task = task_get_public(slug=slug)
    if task is None:
        return None
    workloads = task_public_workloads(task)
    properties = list(task.properties.all())
    ranking = task_ranking(task=task)
    timed = [w.name for w in workloads if w.role == w.Role.TIMED]
    context = {
        "task": task,
        "version": task.current_version,
        "workloads": workloads,
        "guidance": list(task.guidance.all()),
        "guidance_version": guidance_version_current(task=task),
        "properties": properties,
        "rankings": [
            {
                "gpu": gpu,
                "rows": rows,
                "figure": workload_speedup_figure(rows=rows, workloads=timed),
                "figure_id": f"ranking-figure-{index}",
            }
            for index, (gpu, rows) in enumerate(ranking_hardware(ranking))
        ],
        "baseline": task_expert_baseline(task=task),
        "baselines_pending": baselines_pending(task=task),
        "property_figure": property_dependency_figure(
            properties=[
                {"key": p.key, "level": p.level, "title": p.title, "depends_on": p.depends_on}
                for p in properties
            ]
        ),
    }
    content = fragment(template="task_catalog/_detail.html", context=context)
    return {"title": task.title, "content": content}


def task_guidance_view(request, slug: str):
    """Every guidance version of the task, newest first, each with its diff."""
    task = task_get_public(slug=slug)
    if task is None:
        raise Http404(f"No task {slug!r} in the catalog.")
    history = guidance_history(task=task)
    return render(request, "task_catalog/guidance.html", {"task": task, "history": history})
