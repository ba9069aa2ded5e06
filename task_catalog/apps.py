from django.apps import AppConfig


class TaskCatalogConfig(AppConfig):
    name = "task_catalog"
