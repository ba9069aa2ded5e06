"""The leaderboard's filters: one form parses the query string for the page, the API and
the export, so a permalink means the same thing everywhere."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import date
from typing import Any
from urllib.parse import urlencode

from django import forms
from django.http import QueryDict

FILTER_FIELDS = ("hardware", "condition", "model", "agent", "catalog_version", "since", "until")


@dataclass(frozen=True)
class Filters:
    """A validated filter set; empty strings and None mean "any"."""

    hardware: str = ""
    condition: str = ""
    model: str = ""
    agent: str = ""
    catalog_version: str = ""
    since: date | None = None
    until: date | None = None
    sort: str = ""
    page: int = 1

    def query(self, **override: Any) -> str:
        """The query string of these filters (with `override` applied), for links."""
        values = {name: getattr(self, name) for name in (*FILTER_FIELDS, "sort", "page")}
        values.update(override)
        pairs = [
            (k, v.isoformat() if isinstance(v, date) else v)
            for k, v in values.items()
            if v not in ("", None) and not (k == "page" and v == 1)
        ]
        return urlencode(pairs)


class FilterForm(forms.Form):
    hardware = forms.CharField(required=False, max_length=200)
    condition = forms.CharField(required=False, max_length=16)
    model = forms.CharField(required=False, max_length=200)
    agent = forms.CharField(required=False, max_length=200)
    catalog_version = forms.CharField(required=False, max_length=16, label="Catalog version")
    since = forms.DateField(required=False, label="Finished on or after")
    until = forms.DateField(required=False, label="Finished on or before")
    sort = forms.CharField(required=False, max_length=40)
    page = forms.IntegerField(required=False, min_value=1, max_value=100_000)

    def __init__(self, data: QueryDict, *, sort_keys: frozenset[str] = frozenset()):
        super().__init__(data)
        self.sort_keys = sort_keys

    def clean_sort(self) -> str:
        sort = self.cleaned_data["sort"]
        if sort and sort.removeprefix("-") not in self.sort_keys:
            raise forms.ValidationError(f"Unknown sort column {sort!r}.")
        return sort

    def clean(self) -> dict[str, Any]:
        data = super().clean() or {}
        since, until = data.get("since"), data.get("until")
        if since and until and since > until:
            raise forms.ValidationError("The start date is after the end date.")
        return data

    def filters(self) -> Filters:
        """The filters; call only once the form is valid."""
        data = self.cleaned_data
        return Filters(
            hardware=data.get("hardware") or "",
            condition=data.get("condition") or "",
            model=data.get("model") or "",
            agent=data.get("agent") or "",
            catalog_version=data.get("catalog_version") or "",
            since=data.get("since"),
            until=data.get("until"),
            sort=data.get("sort") or "",
            page=data.get("page") or 1,
        )


def filters_parse(
    data: QueryDict, *, sort_keys: frozenset[str] = frozenset()
) -> tuple[Filters, FilterForm]:
    """The filters of a query string and the bound form. An invalid query string gives
    empty filters and a form carrying the errors (the caller answers 400)."""
    form = FilterForm(data, sort_keys=sort_keys)
    return (form.filters() if form.is_valid() else Filters()), form


def form_errors(form: FilterForm) -> str:
    """The form's errors as one line, for a JSON `detail`."""
    parts = []
    for name, errors in form.errors.items():
        text = " ".join(str(e) for e in errors)
        parts.append(text if name == "__all__" else f"{name}: {text}")
    return " ".join(parts)
