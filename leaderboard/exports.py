"""CSV exports, with every cell safe to open in a spreadsheet.

Names, models, sample ids and descriptions come from uploaders. A cell that starts with = + - @
(or a tab or carriage return, which some spreadsheets skip before looking) is read by Excel,
LibreOffice and Google Sheets as a formula: `=HYPERLINK(...)` makes a link that leaks data,
`+cmd|...` asked old Excel to run a program. OWASP's rule ("CSV Injection") is to prefix such a
cell with a single quote, which spreadsheets take as "this is text". The csv module does the
quoting of commas, quotes and newlines (RFC 4180).
"""
from __future__ import annotations

import csv
import numbers
from collections.abc import Iterable

from django.http import HttpResponse, StreamingHttpResponse

FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r")


def csv_cell(value) -> object:
    """`value` as written to a CSV cell: None as empty, booleans as true/false, numbers as they
    are (a negative number is a number, not a formula), any other text neutralised by OWASP's rule."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, numbers.Number):
        return value
    text = str(value)
    return "'" + text if text.startswith(FORMULA_PREFIXES) else text


def csv_response(filename: str, rows: Iterable[dict], columns: list[str]) -> HttpResponse:
    """An attachment holding `rows` under `columns` (other keys ignored), every cell through csv_cell."""
    response = HttpResponse(content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    writer = csv.writer(response)
    writer.writerow([csv_cell(column) for column in columns])
    for row in rows:
        writer.writerow([csv_cell(row.get(column)) for column in columns])
    return response


class _Echo:
    """A file that hands back what is written to it: csv.writer writes one row, the response sends it."""

    def write(self, value: str) -> str:
        return value


def csv_streaming_response(filename: str, rows: Iterable[dict], columns: list[str]) -> StreamingHttpResponse:
    """`csv_response` for exports that grow with the attempts: each row is written as it is sent, so
    `rows` (an iterator that reads the database in chunks) is never held in memory as a whole."""
    writer = csv.writer(_Echo())

    def lines():
        yield writer.writerow([csv_cell(column) for column in columns])
        for row in rows:
            yield writer.writerow([csv_cell(row.get(column)) for column in columns])

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response
