"""Text of whatever a trajectory or an attempt stored, as the replay shows it: any value as text,
cut to the page's bounds, JSON formatted, a cost in dollars. Uploaded trajectories may hold any
JSON where text is expected, so every presenter goes through these."""
from __future__ import annotations

import json
import math
from typing import Any

from runs.limits import ReplayBounds, cut_text


def as_text(value: Any) -> str:
    """`value` as text: "" for None, a string as it is, anything else as str() makes it."""
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def cut_to_page(value: str, bounds: ReplayBounds) -> str:
    """`value` within the page's bytes of text (`bounds.text_bytes`), a marker saying what was left out."""
    # Only trajectories stored before the limits hold longer text; the marker says what was left out.
    return cut_text(value, bounds.text_bytes)[0] if len(value) > bounds.text_bytes // 4 else value


def pretty_json(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def format_cost(cost: Any, unknown: bool) -> str:
    known = isinstance(cost, (int, float)) and not isinstance(cost, bool) and math.isfinite(cost)
    if not known or (unknown and not cost):
        return "unknown"
    text = f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"
    return f"{text} + unknown" if unknown else text
