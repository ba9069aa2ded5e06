from django.urls import path

from . import views

app_name = "task_catalog"
urlpatterns = [
    path("", views.task_list_view, name="list"),
    path("<slug:slug>/", views.task_detail_view, name="detail"),
    path("<slug:slug>/guidance/", views.task_guidance_view, name="guidance"),
]
