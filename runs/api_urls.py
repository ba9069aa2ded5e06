from django.urls import path

from runs import api

urlpatterns = [
    path("runs/", api.RunListCreateApi.as_view(), name="run-api-list"),
    path("runs/<int:pk>/", api.RunDetailApi.as_view(), name="run-api-detail"),
    path("runs/<int:pk>/moderation/", api.RunModerationApi.as_view(), name="run-api-moderation"),
]
