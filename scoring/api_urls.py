from django.urls import path

from scoring import api

urlpatterns = [
    path("assessments/", api.AssessmentCreateApi.as_view(), name="assessment-api-create"),
    path("tasks/<slug:slug>/rubric/", api.TaskRubricApi.as_view(), name="task-api-rubric"),
]
