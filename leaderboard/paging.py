"""Lists that grow with uploads (systems, their samples, their rates), shown a page at a time: one rule
for reading a page number from a URL, and one message for a page a list does not have."""
from __future__ import annotations

from django.core.paginator import Page, Paginator


class BadPage(ValueError):
    """A list was asked for a page it does not have; the message names the parameter and the pages there are."""


def page_get(items, *, number: str | None, per_page: int, parameter: str, what: str) -> Page:
    """Page `number` (from 1, ASCII digits; None or empty: the first) of `items` (a list, or a queryset:
    then a COUNT and a LIMIT/OFFSET), `per_page` to a page. Raises BadPage for anything else (0, past the
    end, a sign, a non-ASCII digit, a NUL), saying which pages of `what` there are."""
    paginator = Paginator(items, per_page)
    text = number or "1"
    if not (text.isascii() and text.isdigit() and 1 <= int(text) <= paginator.num_pages):
        raise BadPage(f"{parameter}={text[:20]!r}: the pages of {what} run from 1 to {paginator.num_pages}")
    return paginator.page(int(text))
