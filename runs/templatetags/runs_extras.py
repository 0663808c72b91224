"""Small display filters for the run pages."""
from django import template

register = template.Library()


@register.filter
def duration(seconds) -> str:
    """Seconds as H:MM:SS (or M:SS); "—" when unknown."""
    if seconds is None or seconds == "":
        return "—"
    seconds = round(float(seconds))
    hours, rest = divmod(seconds, 3600)
    minutes, seconds = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{seconds:02d}" if hours else f"{minutes}:{seconds:02d}"


@register.filter
def verdict(value) -> str:
    """A nullable boolean verdict as pass / fail / —."""
    return "—" if value is None else ("pass" if value else "fail")


@register.filter
def get_item(mapping, key):
    """mapping[key], or None: for per-row data a view passes as a dict keyed by id."""
    return mapping.get(key) if mapping else None
