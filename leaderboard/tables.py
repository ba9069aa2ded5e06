"""Tables as data: named columns with their definition and direction, rows as dicts.

The page renders a table, the export writes the same rows as CSV or JSON, and the
API answers them: one selector feeds all three.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from django.http import HttpResponse, JsonResponse
from rest_framework.renderers import BaseRenderer

EXPORT_FORMATS = ("csv", "json")


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    definition: str = ""
    direction: str = ""  # "higher" or "lower" is better; "" for a label column
    numeric: bool = False

    @property
    def tooltip(self) -> str:
        better = {"higher": "Higher is better.", "lower": "Lower is better."}.get(self.direction)
        return " ".join(part for part in (self.definition, better) if part)


@dataclass(frozen=True)
class Table:
    name: str
    columns: Sequence[Column]
    rows: Sequence[Mapping[str, Any]]

    def records(self) -> list[dict[str, Any]]:
        return [{c.key: row.get(c.key) for c in self.columns} for row in self.rows]


# A spreadsheet reads a cell starting with one of these as a formula (`=HYPERLINK(…)`).
_FORMULA_STARTS = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value: Any) -> Any:
    """A value as a spreadsheet may open it: text that would start a formula gets a
    leading `'`, which spreadsheets show as text; numbers stay numbers."""
    if value is None:
        return ""
    if isinstance(value, str) and value.startswith(_FORMULA_STARTS):
        return f"'{value}"
    return value


def table_csv(*, columns: Sequence[Column], rows: Iterable[Mapping[str, Any]]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([c.key for c in columns])
    for row in rows:
        writer.writerow([csv_cell(row.get(c.key)) for c in columns])
    return out.getvalue()


def table_response(*, table: Table, export: str) -> HttpResponse:
    """The table as a CSV download (`text/csv`) or a JSON list of records."""
    if export == "csv":
        response = HttpResponse(
            table_csv(columns=table.columns, rows=table.rows), content_type="text/csv"
        )
        response["Content-Disposition"] = f'attachment; filename="{table.name}.csv"'
        return response
    return JsonResponse(table.records(), safe=False)


class CSVRenderer(BaseRenderer):
    """`?format=csv` on a table API: the list of records as CSV, columns in their order."""

    media_type = "text/csv"
    format = "csv"
    charset = "utf-8"

    def render(self, data, accepted_media_type=None, renderer_context=None):
        if isinstance(data, Mapping):  # an error: {"detail": ...}
            data = [data]
        rows = list(data or [])
        keys = list(rows[0]) if rows else []
        return table_csv(columns=[Column(key=k, label=k) for k in keys], rows=rows)


def table_headers(*, columns: Sequence[Column], filters: Any, default: str = "") -> list[dict]:
    """Each column with the link that sorts by it (descending first, then ascending) and
    whether it is the current sort, for sortable table headers."""
    current = filters.sort or default
    headers = []
    for column in columns:
        active = ""
        if current.removeprefix("-") == column.key:
            active = "desc" if current.startswith("-") else "asc"
        target = column.key if active == "desc" else f"-{column.key}"
        headers.append(
            {"column": column, "url": f"?{filters.query(sort=target, page=1)}", "active": active}
        )
    return headers
