from django.urls import include, path

urlpatterns = [
    path("", include("task_catalog.api_urls")),
    path("", include("submissions.api_urls")),
    path("", include("runs.api_urls")),
    path("", include("scoring.api_urls")),
    path("", include("leaderboard.api_urls")),
]
