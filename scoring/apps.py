from django.apps import AppConfig


class ScoringConfig(AppConfig):
    name = "scoring"

    def ready(self) -> None:
        from scoring import signals  # noqa: F401  (connects the receivers)
        from scoring.services.version import scores_version_watch

        scores_version_watch()
