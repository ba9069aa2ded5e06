"""The API's page of results, as the schema documents it."""

from __future__ import annotations

from drf_spectacular.utils import inline_serializer
from rest_framework import serializers


def paginated(item: type[serializers.Serializer], *, name: str) -> serializers.Serializer:
    """The schema of a PageNumberPagination page of `item` rows (count, next, previous,
    results), for views that paginate by hand."""
    return inline_serializer(
        name,
        {
            "count": serializers.IntegerField(help_text="Rows over all pages."),
            "next": serializers.URLField(allow_null=True, help_text="The next page, or null."),
            "previous": serializers.URLField(allow_null=True, help_text="The previous page."),
            "results": item(many=True),
        },
    )
