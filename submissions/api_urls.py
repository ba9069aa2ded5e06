from django.urls import path

from submissions import api

urlpatterns = [
    path("submissions/", api.SubmissionListCreateApi.as_view(), name="submission-api-list"),
    path("submissions/<int:pk>/", api.SubmissionDetailApi.as_view(), name="submission-api-detail"),
    path(
        "submissions/<int:pk>/moderation/",
        api.SubmissionModerationApi.as_view(),
        name="submission-api-moderation",
    ),
]
