from django.urls import path

from runs import api
from runs.api import traces, verdicts

urlpatterns = [
    path("runs/", api.RunListCreateApi.as_view(), name="run-api-list"),
    path("runs/<int:pk>/", api.RunDetailApi.as_view(), name="run-api-detail"),
    path("runs/<int:pk>/moderation/", api.RunModerationApi.as_view(), name="run-api-moderation"),
    path("runs/<int:pk>/verdicts/", verdicts.RunVerdictsApi.as_view(), name="run-api-verdicts"),
    path("runs/<int:pk>/traces/<slug:task>/", traces.RunTraceApi.as_view(), name="run-api-trace"),
    path(
        "runs/<int:pk>/traces/<slug:task>/raw/",
        traces.RunTraceRawApi.as_view(),
        name="run-api-trace-raw",
    ),
]
