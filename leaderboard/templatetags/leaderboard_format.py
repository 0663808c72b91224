"""How the leaderboard writes numbers: a dash for "nothing measured", never a misleading 0."""
from django import template
from django.utils.html import format_html
from django.utils.safestring import mark_safe

from runs.benchmark.text import format_seconds
from runs.models import Attempt

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


# One colour per diagnosis group of a failed attempt (leaderboard.metrics.DIAGNOSIS_GROUPS), as
# the system page's stacked bars draw them; undecided in grey, so that it never reads as a verdict.
DIAGNOSIS_COLOURS = {
    Attempt.Diagnosis.INTERACTION: "#7b4fa0", Attempt.Diagnosis.ONE_WRONG: "#e08a1e",
    Attempt.Diagnosis.SEVERAL_WRONG: "#b00020", Attempt.Diagnosis.NOT_DECIDED: "#b8b8b8",
}


@register.filter
def diagnosis_colour(key):
    return DIAGNOSIS_COLOURS.get(key, "#b8b8b8")


@register.filter
def figure_script(figure, element_id):
    """`json_script` for a memoised figure (leaderboard.figures.FigurePayload), whose text is made once, not per request."""
    return format_html('<script id="{}" type="application/json">{}</script>', element_id, mark_safe(figure.script_text))
