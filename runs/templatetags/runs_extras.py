"""Small display filters for the run pages."""
from django import template

from runs.benchmark.text import format_seconds

register = template.Library()
register.filter("duration", format_seconds)


@register.filter
def verdict(value) -> str:
    """A nullable boolean verdict as pass / fail / —."""
    return "—" if value is None else ("pass" if value else "fail")


@register.filter
def get_item(mapping, key):
    """mapping[key], or None: for per-row data a view passes as a dict keyed by id."""
    return mapping.get(key) if mapping else None
