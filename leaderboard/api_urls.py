from django.urls import path

from .api import LeaderboardAPI, LeaderboardPairedAPI, TaskRankingAPI

urlpatterns = [
    path("leaderboard/", LeaderboardAPI.as_view(), name="leaderboard-api"),
    path("leaderboard/paired/", LeaderboardPairedAPI.as_view(), name="leaderboard-api-paired"),
    path("tasks/<slug:slug>/ranking/", TaskRankingAPI.as_view(), name="task-api-ranking"),
]
