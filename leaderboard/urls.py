from django.urls import path

from . import views

app_name = "leaderboard"
urlpatterns = [
    path("", views.home, name="home"),
    path("scoring/", views.scoring, name="scoring"),
    path("docs/<slug:slug>/", views.document, name="document"),
]
