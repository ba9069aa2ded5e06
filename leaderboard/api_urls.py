from django.urls import path

from .api import TaskRankingAPI

urlpatterns = [
    path("tasks/<slug:slug>/ranking/", TaskRankingAPI.as_view(), name="task-api-ranking"),
]
