"""What the big pages render, cached under the data version.

A table of 500 runs takes hundreds of milliseconds to build and render and nothing to
serve again. Each web process keeps what it built under the current data version
(`scoring.selectors.scores_version`, which changes with every write a ranking, table
or chart can show) and the request's canonical key (e.g. the filters' query string), so
a page is never older than its data: the first request after a change builds afresh.
The one query per request is the version's.

Only what every visitor sees alike is cached: fragments rendered without the request
(no user, no CSRF token); the page around them is rendered per request.

A value that follows from its inputs alone (an entry's bootstrap intervals) is cached by
content instead (`by_content`): keyed by the inputs themselves, it is shared by every
page and every data version that has the same inputs, and a changed input is a new key.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from typing import Any, TypeVar

from django.core.cache import cache
from django.template.loader import render_to_string
from django.utils.safestring import SafeString, mark_safe

from scoring.selectors import scores_version

T = TypeVar("T")


def versioned(
    *, name: str, key: str, build: Callable[[], T], keep: Callable[[T], bool] | None = None
) -> T:
    """`build()`, or what it returned for the same `name` and `key` under the current data
    version. A None is never cached (an unknown slug must not fill the cache), nor a value
    that `keep` refuses (a page that shows a job in progress, whose queue states change
    without a new data version)."""
    digest = hashlib.sha256(f"{name}\0{key}\0{scores_version()}".encode()).hexdigest()
    cache_key = f"d2k:versioned:{digest}"
    value = cache.get(cache_key)
    if value is None:
        value = build()
        if value is not None and (keep is None or keep(value)):
            cache.set(cache_key, value)
    return value


def by_content(*, name: str, inputs: object, build: Callable[[], T]) -> T:
    """`build()`, or what it returned for the same `name` and `inputs` (JSON-serialisable:
    everything the value depends on, so a stored value can never disagree with them)."""
    text = json.dumps([name, inputs], sort_keys=True, separators=(",", ":"))
    cache_key = f"d2k:content:{hashlib.sha256(text.encode()).hexdigest()}"
    value = cache.get(cache_key)
    if value is None:
        value = build()
        if value is not None:
            cache.set(cache_key, value)
    return value


def fragment(*, template: str, context: dict[str, Any]) -> SafeString:
    """`template` rendered without the request, to be cached by `versioned`."""
    # Safe: the template escaped what it rendered.
    return mark_safe(render_to_string(template, context))
