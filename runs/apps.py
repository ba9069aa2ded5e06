from django.apps import AppConfig


class RunsConfig(AppConfig):
    name = "runs"

    def ready(self) -> None:
        from runs import signals  # noqa: F401  (connects the receivers)
