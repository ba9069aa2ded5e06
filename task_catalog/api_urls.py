from django.urls import path

from .api import TaskDetailAPI, TaskListAPI, TaskPromptAPI

urlpatterns = [
    path("tasks/", TaskListAPI.as_view(), name="task-api-list"),
    path("tasks/<slug:slug>/", TaskDetailAPI.as_view(), name="task-api-detail"),
    path("tasks/<slug:slug>/prompt/", TaskPromptAPI.as_view(), name="task-api-prompt"),
]
