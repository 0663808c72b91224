"""Text and JSON as the database and the model providers take them. No Django imports."""

from __future__ import annotations

import math
import re

_SURROGATE = re.compile("[\ud800-\udfff]")

def sendable_text(text: str) -> str:
    """`text` with lone surrogates replaced by U+FFFD. JSON's \\udXXX escapes let a model produce
    them, and no request can carry them back (both SDKs encode their bodies as UTF-8): kept, they
    would break the next call, a failure that is the model's doing, not the provider's."""
    return text if text.isascii() else _SURROGATE.sub("\ufffd", text)


# Deeper values are replaced by a marker: a model's tool arguments can nest a thousand levels.
JSON_SAFE_DEPTH = 100


def json_safe(value):
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


def _json_scalar(value):
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, str):
        return storable_text(value)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _MAX_INT_BITS:
        return f"[an integer of about {int(value.bit_length() * math.log10(2)):,} digits: not stored]"
    if value is None or isinstance(value, (bool, int)):
        return value
    return storable_text(repr(value))


def storable_text(value: str | None) -> str | None:
    """Text Postgres stores: no NUL, no lone surrogates (file names with undecodable bytes, or a
    model's "\\udc80", reach strings as surrogates; they become U+FFFD)."""
    if value is None:
        return None
    return sendable_text(value).replace("\x00", "")
