"""The API's JSON parser: hostile JSON is a 400, never a 500 or a row PostgreSQL refuses."""

from __future__ import annotations

import codecs
from typing import IO, Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from runformat.jsonsafe import JsonRefused, json_loads_checked


class CheckedJSONParser(JSONParser):
    """DRF's JSON parser, refusing nesting deeper than MAX_JSON_DEPTH, NUL characters and
    lone UTF-16 surrogates with a 400 that names the line."""

    def parse(
        self, stream: IO[bytes], media_type: str | None = None, parser_context: Any = None
    ) -> Any:
        parser_context = parser_context or {}
        encoding = parser_context.get("encoding", settings.DEFAULT_CHARSET)
        try:
            text = codecs.getreader(encoding)(stream).read()
            return json_loads_checked(text)
        except JsonRefused as exc:
            where = f" (line {exc.line})" if exc.line else ""
            raise ParseError(f"JSON parse error{where} - {exc.message}") from exc
        except (ValueError, UnicodeDecodeError) as exc:
            raise ParseError(f"JSON parse error - {exc}") from exc
