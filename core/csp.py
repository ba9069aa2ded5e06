"""The Content-Security-Policy header: the site's own scripts and stylesheets only.

Pages carry no inline script or `<style>`; figures travel as `json_script` data blocks
(not run as scripts) and static/js/charts.js draws them with the locally served
plotly.js, whose own rules are served as static/css/plotly.css. Style *attributes*
are allowed (`style-src-attr`): plotly.js and Swagger UI draw with them, and they run
no code; the markdown sanitiser strips them from what users write.
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

POLICY = "; ".join(
    (
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "style-src-attr 'unsafe-inline'",
        "img-src 'self' data:",
        "font-src 'self'",
        "connect-src 'self'",
        "object-src 'none'",
        "base-uri 'self'",
        "form-action 'self'",
        "frame-ancestors 'none'",
    )
)


class ContentSecurityPolicyMiddleware:
    """Adds POLICY to every response that has none of its own."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", POLICY)
        return response
