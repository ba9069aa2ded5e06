"""Error answers in each door's format: JSON `{"detail": ...}` under /api/, a page elsewhere.

Django's own pages (the debug 404 listing every URL pattern, the bare "Bad
Request (400)" of a body over DATA_UPLOAD_MAX_MEMORY_SIZE) never reach a
visitor: the handlers below answer 400, 403, 404 and 500, and a body over the
limit is refused with 413 before any of it is read.
"""

from __future__ import annotations

import logging

from django.conf import settings
from django.core.exceptions import RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

from core.sizes import size_human, too_large_message

logger = logging.getLogger("core.errors")

TITLES = {
    400: "Bad request",
    403: "Forbidden",
    404: "Not found",
    413: "Too large",
    500: "Something broke on our side",
}


def error_response(request: HttpRequest, *, status: int, message: str) -> HttpResponse:
    if request.path.startswith("/api/"):
        return JsonResponse({"detail": message}, status=status)
    # No request context: a 500 may come from a broken database its processors would ask.
    html = render_to_string(
        "error.html", {"status": status, "title": TITLES.get(status, "Error"), "message": message}
    )
    return HttpResponse(html, status=status)


def _upload_limit_for(path: str) -> tuple[int, str]:
    """The most bytes a request to `path` may carry, and what the limit is about."""
    if path.rstrip("/") in ("/api/runs", "/runs/new"):
        limit = settings.D2K_RUN_BUNDLE_MAX_BYTES
        return limit + settings.D2K_MAX_REQUEST_BYTES, f"a run bundle may be {size_human(limit)}"
    kernel = size_human(settings.D2K_MAX_UPLOAD_BYTES)
    return settings.D2K_MAX_REQUEST_BYTES, f"a kernel file may be {kernel}"


class RequestSizeLimitMiddleware:
    """413 for a request whose declared body is over the limit of its address, before
    Django reads a byte of it (first in MIDDLEWARE)."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            length = int(request.META.get("CONTENT_LENGTH") or 0)
        except ValueError:
            return error_response(request, status=400, message="Content-Length is not a number.")
        limit, about = _upload_limit_for(request.path)
        content_type = request.META.get("CONTENT_TYPE", "")
        if not content_type.startswith("multipart/"):
            # A form or JSON body is held in memory whole: Django's own limit applies.
            limit = min(limit, settings.DATA_UPLOAD_MAX_MEMORY_SIZE or limit)
            about = f"a body that is not a file upload may be {size_human(limit)}"
        if length > limit:
            message = too_large_message(what="The request", size=length, limit=limit)
            return error_response(request, status=413, message=f"{message} ({about}).")
        return self.get_response(request)


def bad_request(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    if isinstance(exception, RequestDataTooBig):
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE or 0
        return error_response(
            request,
            status=413,
            message=f"The request's form fields are over {size_human(limit)}: upload large "
            "sources as a file.",
        )
    if isinstance(exception, TooManyFieldsSent | TooManyFilesSent):
        return error_response(request, status=400, message="The request has too many fields.")
    return error_response(request, status=400, message="The request could not be understood.")


def permission_denied(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    message = "You may not do this."
    if getattr(exception, "args", None) and str(exception):
        message = str(exception)
    return error_response(request, status=403, message=message)


def page_not_found(request: HttpRequest, exception: Exception | None = None) -> HttpResponse:
    # One answer for "no such thing" and "not yours to see": ids reveal nothing.
    return error_response(request, status=404, message="Not found.")


def server_error(request: HttpRequest) -> HttpResponse:
    return error_response(
        request,
        status=500,
        message="The portal hit an error; it is logged and we will look at it.",
    )


def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    return error_response(
        request,
        status=403,
        message="The form's security token is missing or stale: reload the page and try again.",
    )
