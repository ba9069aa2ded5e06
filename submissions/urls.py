from django.urls import path

from submissions import views

app_name = "submissions"

urlpatterns = [
    path("new/", views.upload, name="upload"),
    path("mine/", views.mine, name="mine"),
    path("<int:pk>/", views.detail, name="detail"),
    path("<int:pk>/visibility/", views.visibility, name="visibility"),
    path("<int:pk>/moderate/", views.moderate, name="moderate"),
]
