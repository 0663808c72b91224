"""Reading an uploaded line of JSON so that nothing after it can be crashed by its shape.

`json.loads` itself is safe: its C scanner stops at the interpreter's recursion limit with a
RecursionError. What it returns is not: a value nested hundreds deep goes on to code that recurses
(json.dumps, Postgres' JSON adapter, templates), and an integer of more than 4,300 digits cannot
even be read (Python's int-string limit, sys.get_int_max_str_digits, raises ValueError). `loads`
refuses both with a `JSONLimitError` that names the field, before anything else sees the value.
"""
from __future__ import annotations

import json
import re
from typing import Any

# Deeper than any answer or trajectory needs (scoring reads answers at most 64 deep), and far
# below the recursion limit of whatever walks the value later.
MAX_DEPTH = 64
# A number with more digits is not a measurement; 1,000 digits already exceed any float.
MAX_INT_DIGITS = 1000

_LONG_DIGITS = re.compile(r"\d{%d}" % (MAX_INT_DIGITS + 1))
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = re.compile(r"[^\[\]{}]+")
_INNERMOST = re.compile(r"\[\]|\{\}")
# How much of a path a message shows: enough to find the place, not a 64-level chain.
_SHOWN_PATH = 4


class JSONLimitError(ValueError):
    """The value is nested too deep or holds too long an integer. `path` leads to it: keys of
    objects and indexes of lists, from the top; `field` is its first key (the record's field)."""

    def __init__(self, problem: str, path: tuple) -> None:
        self.problem, self.path = problem, path
        super().__init__(self.message)

    @property
    def field(self) -> str | None:
        return str(self.path[0]) if self.path else None

    @property
    def message(self) -> str:
        """The problem, with where it is below `field` ("at Experiment 1 > a > a > ...")."""
        inner = self.path[1:]
        if not inner:
            return self.problem
        shown = " > ".join(str(step) if isinstance(step, str) else f"[{step}]" for step in inner[:_SHOWN_PATH])
        return f"{self.problem} (at {shown}{' > ...' if len(inner) > _SHOWN_PATH else ''})"


class _LongInteger:
    """Stands in for an integer too long to convert, so the walk can say where it was."""

    __slots__ = ("digits",)

    def __init__(self, digits: int) -> None:
        self.digits = digits


def loads(text: str, **kwargs) -> Any:
    """`json.loads(text, **kwargs)`, raising JSONLimitError for a value nested more than MAX_DEPTH
    deep (the top level is depth 1) or holding an integer of more than MAX_INT_DIGITS digits.

    Both are first looked for in the text, at the speed of the regular expression engine; the value
    is walked (to say where the problem is) only when one is there.
    """
    long_integers = []

    def parse_int(number: str) -> int | _LongInteger:
        digits = len(number) - number.startswith("-")
        if digits > MAX_INT_DIGITS:
            long_integers.append(digits)
            return _LongInteger(digits)
        return int(number)

    value = json.loads(text, parse_int=parse_int if _LONG_DIGITS.search(text) else None, **kwargs)
    if long_integers or _deeper_than(text, MAX_DEPTH):
        problem = first_problem(value)
        if problem is not None:
            raise problem
    return value


def _deeper_than(text: str, limit: int) -> bool:
    """Whether valid JSON `text` nests containers more than `limit` deep: with strings blanked out
    and only brackets left, each pass removes the innermost pairs, so passes count the depth."""
    if text.count("{") + text.count("[") <= limit:
        return False
    brackets = _NOT_BRACKETS.sub("", _STRING.sub("", text))
    for _ in range(limit):
        brackets = _INNERMOST.sub("", brackets)
        if not brackets:
            return False
    return True


def first_problem(value: Any) -> JSONLimitError | None:
    """The first place (in document order) where `value` breaks a limit, or None. Iterative."""
    # Each entry: (item, depth, trail); a trail is (parent trail, key), rebuilt into a path only
    # for the problem, so the walk allocates one small tuple per value.
    stack: list[tuple[Any, int, tuple | None]] = [(value, 1, None)]
    while stack:
        item, depth, trail = stack.pop()
        if isinstance(item, _LongInteger):
            return JSONLimitError(
                f"an integer of {item.digits:,} digits; integers of at most {MAX_INT_DIGITS:,} digits are accepted",
                _path(trail),
            )
        if isinstance(item, dict):
            children = list(item.items())
        elif isinstance(item, list):
            children = list(enumerate(item))
        else:
            continue
        if depth > MAX_DEPTH:
            return JSONLimitError(
                f"nested more than {MAX_DEPTH} levels deep; at most {MAX_DEPTH} levels are accepted", _path(trail)
            )
        stack.extend((inner, depth + 1, (trail, key)) for key, inner in reversed(children))
    return None


def _path(trail: tuple | None) -> tuple:
    steps = []
    while trail is not None:
        trail, key = trail
        steps.append(key)
    return tuple(reversed(steps))
