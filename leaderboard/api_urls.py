from django.urls import path

from .api import LeaderboardAPI, LeaderboardPairedAPI, LeaderboardPaperAPI, TaskRankingAPI

urlpatterns = [
    path("leaderboard/", LeaderboardAPI.as_view(), name="leaderboard-api"),
    path("leaderboard/paired/", LeaderboardPairedAPI.as_view(), name="leaderboard-api-paired"),
    path("leaderboard/paper/", LeaderboardPaperAPI.as_view(), name="leaderboard-api-paper"),
    path("tasks/<slug:slug>/ranking/", TaskRankingAPI.as_view(), name="task-api-ranking"),
]
