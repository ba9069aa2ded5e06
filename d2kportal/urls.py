from django.contrib import admin
from django.urls import include, path
from drf_spectacular.views import SpectacularAPIView, SpectacularSwaggerSplitView

from d2kportal import views as portal_views
from runs import views as runs_views

urlpatterns = [
    path("", include("leaderboard.urls")),
    path("tasks/", include("task_catalog.urls")),
    path("submissions/", include("submissions.urls")),
    path("runs/", include("runs.urls")),
    path("schemas/runs/<slug:name>.json", runs_views.schema, name="run-schema"),
    path("accounts/", include("accounts.urls")),
    path("healthz", portal_views.healthz, name="healthz"),
    path("admin/", admin.site.urls),
    path("api/", include("d2kportal.api_urls")),
    path("api/schema/", SpectacularAPIView.as_view(), name="api-schema"),
    # Swagger UI inside the site's layout, its assets served locally and its start-up
    # script served from a URL of its own (no inline JavaScript).
    path(
        "api/docs/",
        SpectacularSwaggerSplitView.as_view(
            url_name="api-schema", template_name="core/api_docs.html"
        ),
        name="api-docs",
    ),
]

handler400 = "core.errors.bad_request"
handler403 = "core.errors.permission_denied"
handler404 = "core.errors.page_not_found"
handler500 = "core.errors.server_error"
