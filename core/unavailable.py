"""Answering 503 when the database or the queue cannot take a request.

A locked or unreachable database, or a broker that does not answer, is a
moment's trouble of the service, not a bug: the visitor gets a sentence and a
503 (JSON in the API's error format under /api/, a page elsewhere), never a
500, and what a request wrote so far was rolled back with its transaction.
"""

from __future__ import annotations

import logging

from django.db import InterfaceError, OperationalError
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.template.loader import render_to_string

logger = logging.getLogger("core.unavailable")

RETRY_AFTER_S = 30


class ServiceUnavailable(Exception):
    """A dependency of the request (the database, the queue) is unavailable."""


UNAVAILABLE = (ServiceUnavailable, OperationalError, InterfaceError)


def unavailable_message(error: BaseException) -> str:
    if isinstance(error, ServiceUnavailable):
        return str(error)
    return (
        "The database is busy or unavailable right now, so nothing was stored. "
        "Try again in a minute."
    )


class ServiceUnavailableMiddleware:
    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if not isinstance(exception, UNAVAILABLE):
            return None
        logger.warning("503 for %s %s: %s", request.method, request.path, exception)
        message = unavailable_message(exception)
        response: HttpResponse
        if request.path.startswith("/api/"):
            response = JsonResponse({"detail": message}, status=503)
        else:
            # No request context: its processors would ask the unavailable database.
            html = render_to_string("503.html", {"message": message})
            response = HttpResponse(html, status=503)
        response["Retry-After"] = str(RETRY_AFTER_S)
        return response
