"""Text and JSON as the database and the model providers take them. No Django imports.

What a model, an agent's commands or an uploader produce may hold what Postgres refuses (NUL
characters, lone surrogates, NaN, integers too long to print, values nested a thousand deep) or
what no request body can carry (lone surrogates). `storable_text` and `json_safe` make anything
storable before it is saved; `sendable_text` makes text sendable before it goes to a provider.
`json_type`, `format_seconds` and `shorten_at_word` write JSON values, durations and short texts for
people, in messages and pages."""

from __future__ import annotations

import json
import math
import re
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")

def sendable_text(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD. JSON's \\udXXX escapes let a model produce
    them, and no request can carry them back (both SDKs encode their bodies as UTF-8): kept, they
    would break the next call, a failure that is the model's doing, not the provider's."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


# Deeper values are replaced by a marker: a model's tool arguments can nest a thousand levels.
JSON_SAFE_DEPTH = 100


def json_safe(value: Any) -> Any:
    """`value` as JSON Postgres accepts: non-finite floats as strings ("NaN", "Infinity",
    "-Infinity", as scoring's to_dict writes them), NUL characters and lone surrogates dropped
    from strings, values deeper than JSON_SAFE_DEPTH and integers too long to print replaced by a
    marker string, values JSON cannot hold by their repr.

    Iterative, so no value can exhaust the stack however deep it nests."""
    holder: list = [None]
    # (item, where the converted item goes, its key or index there, depth)
    stack: list[tuple] = [(value, holder, 0, 0)]
    while stack:
        item, target, slot, depth = stack.pop()
        if depth > JSON_SAFE_DEPTH:
            target[slot] = f"[nested deeper than {JSON_SAFE_DEPTH} levels: not stored]"
        elif isinstance(item, dict):
            converted: dict = {}
            target[slot] = converted
            children = []
            for key, inner in item.items():
                safe_key = storable_text(str(key))
                converted[safe_key] = None  # keeps the keys' order
                children.append((inner, converted, safe_key, depth + 1))
            stack.extend(reversed(children))  # in order, so a repeated key keeps its last value
        elif isinstance(item, (list, tuple)):
            converted_list = [None] * len(item)
            target[slot] = converted_list
            stack.extend((inner, converted_list, index, depth + 1) for index, inner in reversed(list(enumerate(item))))
        else:
            target[slot] = _json_scalar(item)
    return holder[0]


# Python refuses to print integers of more than 4,300 digits (sys.get_int_max_str_digits), and
# Postgres' JSON is text: this many bits is about 3,900 digits.
_MAX_INT_BITS = 13_000


def _json_scalar(value: object) -> str | int | float | bool | None:
    if isinstance(value, float):
        return value if math.isfinite(value) else _non_finite(value)
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _MAX_INT_BITS:
        return f"[an integer of about {int(value.bit_length() * math.log10(2)):,} digits: not stored]"
    if value is None or isinstance(value, (bool, int)):
        return value
    return storable_text(repr(value))


def _non_finite(value: float) -> str:
    """NaN or an infinity as JSON writers spell them (json.dumps, scoring's to_dict)."""
    return "NaN" if math.isnan(value) else "Infinity" if value > 0 else "-Infinity"


def storable_text(value: str | None) -> str | None:
    """Text Postgres stores: no NUL, no lone surrogates (file names with undecodable bytes, or a
    model's "\\udc80", reach strings as surrogates; they become U+FFFD)."""
    if value is None:
        return None
    return sendable_text(value).replace("\x00", "")


def json_type(value: object) -> str:
    """A JSON value as an error message names it to whoever wrote it: its type, with the value when
    that is short (`a string ("partial")`, `an integer (5)`, `a boolean (true)`, `NaN`, `a list`,
    `an object`, `null`)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return f"a boolean ({'true' if value else 'false'})"
    if isinstance(value, int):
        return f"an integer ({value})"
    if isinstance(value, float):
        return f"a number ({value!r})" if math.isfinite(value) else _non_finite(value)
    if isinstance(value, str):
        shown = value if len(value) <= 40 else value[:37] + "..."
        return f"a string ({json.dumps(shown)})"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def format_seconds(value: Any) -> str:
    """A duration for people: "2.5 s", "2 min 05 s", "1 h 02 min"; "—" when unknown (None, blank,
    not a finite number)."""
    try:
        seconds = float(value)
    except (TypeError, ValueError):
        return "—"
    if isinstance(value, bool) or not math.isfinite(seconds):
        return "—"
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {rest:02d} s"
    hours, minutes = divmod(minutes, 60)
    return f"{hours} h {minutes:02d} min"


def shorten_at_word(text: str, limit: int) -> str:
    """`text` with its whitespace runs made single spaces and, when longer than `limit` characters,
    cut at the last word that fits, an ellipsis saying so ("Return the full…", never "the full-da").
    A first word longer than `limit` is itself cut: there is no word boundary to keep."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    head = text[: limit - 1]
    if text[limit - 1] != " " and " " in head:
        head = head.rsplit(" ", 1)[0]
    return head.rstrip(" ,;:.-") + "…"
