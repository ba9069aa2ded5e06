from django.urls import path

from . import views

app_name = "leaderboard"
urlpatterns = [
    path("", views.home, name="home"),
    path("leaderboard/", views.leaderboard, name="leaderboard"),
    path("leaderboard/paired/", views.paired, name="paired"),
    path("leaderboard/paper/", views.paper, name="paper"),
    path("leaderboard/charts/", views.charts, name="charts"),
    path("leaderboard/matrix/", views.matrix, name="matrix"),
    path("leaderboard/compare/", views.compare, name="compare"),
    path("leaderboard/hacks/", views.hacks, name="hacks"),
    path("scoring/", views.scoring, name="scoring"),
    path("docs/", views.documents, name="documents"),
    path("docs/<slug:slug>/", views.document, name="document"),
]
