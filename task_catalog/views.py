from django.http import Http404
from django.shortcuts import render

from leaderboard.charts import property_dependency_figure, workload_speedup_figure
from leaderboard.selectors import ranking_hardware, task_expert_baseline, task_ranking

from .selectors import task_get_public, task_list, task_public_workloads


def task_list_view(request):
    return render(request, "task_catalog/list.html", {"tasks": task_list()})


def task_detail_view(request, slug: str):
    task = task_get_public(slug=slug)
    if task is None:
        raise Http404(f"No task {slug!r} in the catalog.")
    workloads = task_public_workloads(task)
    properties = list(task.properties.all())
    ranking = task_ranking(task=task)
    timed = [w.name for w in workloads if w.role == w.Role.TIMED]
    context = {
        "task": task,
        "version": task.current_version,
        "workloads": workloads,
        "guidance": list(task.guidance.all()),
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
        "property_figure": property_dependency_figure(
            properties=[
                {"key": p.key, "level": p.level, "title": p.title, "depends_on": p.depends_on}
                for p in properties
            ]
        ),
    }
    return render(request, "task_catalog/detail.html", context)
