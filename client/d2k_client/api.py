"""The portal's REST API over httpx; every failure becomes one readable ClientError."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

import httpx

from . import __version__
from .config import ClientError

TIMEOUT = httpx.Timeout(60.0, connect=10.0)


def error_text(body: Any) -> str:
    """The portal's error body (`{"detail"}`, `{"errors": [...]}` or field errors) as one line."""
    if isinstance(body, dict):
        if "detail" in body and len(body) == 1:
            return error_text(body["detail"])
        if isinstance(body.get("errors"), list):
            problems = []
            for e in body["errors"]:
                where = ":".join(str(p) for p in (e.get("file"), e.get("line")) if p is not None)
                problems.append(f"{where}: {e.get('message')}" if where else str(e.get("message")))
            return f"{len(problems)} problem(s): " + "; ".join(problems)
        return "; ".join(
            f"{error_text(v)}" if k in ("non_field_errors", "detail") else f"{k}: {error_text(v)}"
            for k, v in body.items()
        )
    if isinstance(body, list):
        return "; ".join(error_text(v) for v in body)
    return " ".join(str(body).split())


class ProgressReader:
    """A file whose reads report their progress: httpx streams a multipart file by reading
    it in chunks; fileno() lets it send a Content-Length (a dev server refuses chunked)."""

    def __init__(self, handle: BinaryIO, advance: Callable[[int], None]):
        self._handle, self._advance = handle, advance

    def read(self, size: int = -1) -> bytes:
        chunk = self._handle.read(size)
        self._advance(len(chunk))
        return chunk

    def fileno(self) -> int:
        return self._handle.fileno()

    def seek(self, offset: int, whence: int = os.SEEK_SET) -> int:
        return self._handle.seek(offset, whence)

    def tell(self) -> int:
        return self._handle.tell()


class Api:
    def __init__(self, server: str, token: str | None = None, *, transport=None):
        headers = {"User-Agent": f"d2k-client/{__version__}", "Accept": "application/json"}
        if token:
            headers["Authorization"] = f"Token {token}"
        self.server = server
        self.http = httpx.Client(
            base_url=server, headers=headers, timeout=TIMEOUT, transport=transport
        )

    def request(self, method: str, path: str, **kwargs: Any) -> httpx.Response:
        try:
            response = self.http.request(method, path, **kwargs)
        except httpx.TimeoutException as exc:
            raise ClientError(f"{self.server} did not answer in time ({method} {path})") from exc
        except httpx.HTTPError as exc:
            raise ClientError(f"cannot reach {self.server}: {exc}") from exc
        if response.status_code >= 400:
            raise ClientError(self._failure(method, path, response))
        return response

    def _failure(self, method: str, path: str, response: httpx.Response) -> str:
        code = response.status_code
        try:
            detail = error_text(response.json())
        except ValueError:
            detail = response.reason_phrase
        if code == 401:
            detail = f"{detail} (run d2k login --server {self.server})"
        return f"{method} {path}: HTTP {code}: {detail}"

    def get(self, path: str, **params: Any) -> Any:
        clean = {k: v for k, v in params.items() if v not in (None, "")}
        return self.request("GET", path, params=clean).json()

    def pages(self, path: str, **params: Any) -> Iterator[dict[str, Any]]:
        """Every item of a paginated list (`{"results", "next"}`), following `next`."""
        page = self.get(path, **params)
        while True:
            if isinstance(page, list):
                yield from page
                return
            yield from page.get("results", [])
            if not page.get("next"):
                return
            page = self.request("GET", page["next"]).json()

    def upload(
        self,
        path: str,
        *,
        field: str,
        file: Path,
        data: dict[str, str],
        advance: Callable[[int], None] | None = None,
    ) -> Any:
        with file.open("rb") as handle:
            body: Any = ProgressReader(handle, advance) if advance else handle
            files = {field: (file.name, body, "application/octet-stream")}
            return self.request("POST", path, files=files, data=data).json()
