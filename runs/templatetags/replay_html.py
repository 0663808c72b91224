"""The replay's diff lines and code listings as HTML, built in Python.

A page holds thousands of diff lines, each a few spans; as template loops they cost most of the
page's time (a lookup and an escape per node). This filter makes the same markup in one pass and
escapes every piece of text itself, so nothing a model or an uploader wrote reaches the page
unescaped: `escape` (quotes included, as Django's autoescape) on each line's text and each
segment's text and class.
"""
from html import escape  # what django.utils.html.escape calls, without its lazy-string wrapper

from django import template
from django.utils.safestring import mark_safe

register = template.Library()


def _line_html(line: dict, parts: list[str]) -> None:
    """A line's text, as its token segments when it has them, escaped, onto `parts`."""
    segments = line.get("segs")
    if segments:
        for segment in segments:
            if segment["c"]:
                parts.append(f'<span class="tk-{escape(segment["c"])}">{escape(segment["t"])}</span>')
            else:
                parts.append(escape(segment["t"]))
    else:
        parts.append(escape(line["text"]))


@register.filter
def diff_html(lines) -> str:
    """runs.replay.diffs.diff_lines output as <span class="dl dl-{kind}"> lines with token spans."""
    parts = []
    for line in lines:
        parts.append(f'<span class="dl dl-{escape(line["kind"])}">')
        _line_html(line, parts)
        parts.append("</span>")
    return mark_safe("".join(parts))  # every piece above is escaped


@register.filter
def code_html(lines) -> str:
    """runs.replay.calls.CodeBlock lines as <span class="cl" data-n="12"> lines with token spans.

    The number is an attribute the stylesheet shows before the line, so copying the code copies
    no numbers; a line without one (a tool's note) gets class "cl cl-note"."""
    parts = []
    for line in lines:
        number = line["n"]
        parts.append(f'<span class="cl" data-n="{escape(str(number))}">' if number != "" else '<span class="cl cl-note">')
        _line_html(line, parts)
        parts.append("</span>")
    return mark_safe("".join(parts))  # every piece above is escaped
