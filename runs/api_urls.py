from django.urls import path

from runs import api

urlpatterns = [
    path("runs/", api.RunCreateApi.as_view(), name="run-api-create"),
    path("runs/<int:pk>/", api.RunDetailApi.as_view(), name="run-api-detail"),
]
