from django.urls import path

from runs import views

app_name = "runs"

urlpatterns = [
    path("", views.run_list, name="list"),
    path("new/", views.upload, name="upload"),
    path("audit/", views.audit, name="audit"),
    path("<int:pk>/", views.detail, name="detail"),
    path("<int:pk>/pair/", views.pair, name="pair"),
    path("<int:pk>/visibility/", views.visibility, name="visibility"),
    path("<int:pk>/moderate/", views.moderate, name="moderate"),
    path("<int:pk>/verdict/", views.verdict, name="verdict"),
    path("<int:pk>/traces/<slug:task>/", views.trace, name="trace"),
    path("<int:pk>/traces/<slug:task>/raw/", views.trace_raw, name="trace_raw"),
]
