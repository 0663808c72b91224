"""How the leaderboard writes numbers: a dash for "nothing measured", never a misleading 0."""
from django import template

from runs.benchmark.text import format_seconds

register = template.Library()
register.filter("duration", format_seconds)
DASH = "—"


@register.filter
def pct(value, digits=1):
    """0.353 -> "35.3%"."""
    if value is None or value == "":
        return DASH
    return f"{float(value) * 100:.{int(digits)}f}%"


@register.filter
def usd(value):
    if value is None:
        return DASH
    return f"${value:.4f}" if value < 0.01 else f"${value:.2f}"


@register.filter
def get_item(mapping, key):
    return mapping.get(key) if mapping else None
