"""Reading an agent's final answer as an object of results: `parse_answer`.

Agents answer in text: JSON, a Python literal, an object in a markdown fence or somewhere in prose.
The answer is read the same way wherever it comes from (the agent harness, the tools, uploads), and
what cannot be read, or stored as JSON, is refused with a reason. Scoring the object against gold:
`runs.benchmark.scoring`.

No Django here.
"""
from __future__ import annotations

import ast
import json
import math
import numbers
import re
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runs.benchmark import python_ast

# Answers are an agent's output; past this size they are not an answer but a dump, and scanning
# them for objects would cost more than it is worth.
MAX_ANSWER_CHARS = 1_000_000


@dataclass(frozen=True)
class ParsedAnswer:
    """An agent's answer as an object, or why it could not be read as one.

    `method` says where the object was found: "dict" (given as a mapping), "json", "python-literal",
    "json-in-fence", "python-literal-in-fence", "json-in-prose", "python-literal-in-prose", or
    "none" when nothing was found.
    """

    value: dict | None
    error: str | None
    method: str

    @property
    def ok(self) -> bool:
        return self.value is not None


# Names that agents (and Python's repr of floats) write for non-finite numbers and JSON constants.
# They are accepted so that a NaN answer is scored as "nan" rather than rejected as unparseable.
_FLOAT_NAMES = {"nan": math.nan, "inf": math.inf, "infinity": math.inf}
_JSON_NAMES = {"true": True, "false": False, "null": None}

# What may follow the "{" of a dict literal: a string, a number, a name, a tuple key, or "}".
_OBJECT_START = re.compile(r"\{\s*[\"'}(\w.+-]")
# How many characters of prose candidates may be handed to the parsers for one answer. Ordinary
# answers stop at the first try; the budget only bounds pathological ones (thousands of nested,
# almost-valid objects), which would otherwise cost quadratic time.
_PARSE_BUDGET = 4 * MAX_ANSWER_CHARS

_FENCE = re.compile(r"```(?P<lang>[\w+-]*)[^\S\n]*\n?(?P<body>.*?)```", re.DOTALL)


class _LiteralNames(ast.NodeTransformer):
    def visit_Name(self, node: ast.Name) -> ast.AST:
        if node.id.lower() in _FLOAT_NAMES:
            return ast.copy_location(ast.Constant(_FLOAT_NAMES[node.id.lower()]), node)
        if node.id in _JSON_NAMES:
            return ast.copy_location(ast.Constant(_JSON_NAMES[node.id]), node)
        return node  # literal_eval rejects it, which is what we want for arbitrary names


def _python_literal(text: str) -> Any:
    # ast.literal_eval never executes code; the transformer only swaps a few names for constants
    # (literal_eval accepts Constant nodes of any value, including nan, and unary minus on them).
    with warnings.catch_warnings():
        # "invalid escape sequence" warnings about an agent's text would only be noise in the logs.
        warnings.simplefilter("ignore")
        tree = python_ast.parse(text.strip(), mode="eval")
    return ast.literal_eval(_LiteralNames().visit(tree))


def _load(text: str) -> tuple[Any, str | None, str | None]:
    """(value, kind, None) with kind "json" or "python-literal", or (None, None, error)."""
    try:
        return json.loads(text), "json", None
    except json.JSONDecodeError as exc:
        json_error = f"{exc.msg} at line {exc.lineno} column {exc.colno}"
    except (RecursionError, ValueError) as exc:
        json_error = str(exc) or type(exc).__name__
    try:
        return _python_literal(text), "python-literal", None
    except (SyntaxError, ValueError, TypeError, MemoryError, RecursionError):
        return None, None, json_error


def describe_value(value: Any) -> str:
    """What kind of JSON value this is, for messages: "null", "a number", "an object", ..."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, numbers.Number):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, (list, tuple)):
        return "a list"
    if isinstance(value, Mapping):
        return "an object"
    return f"a {type(value).__name__}"


def _brace_spans(text: str) -> tuple[list[tuple[int, int]], list[int]]:
    """Balanced `{...}` spans (start, end) and the starts of braces never closed.

    Quotes are only tracked inside braces, so apostrophes in the surrounding prose do no harm; a
    string ends at a newline because neither JSON nor a one-line Python string can contain one,
    which limits the damage of a stray apostrophe inside prose braces to one line.
    """
    spans: list[tuple[int, int]] = []
    stack: list[int] = []
    quote = None
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        if quote is not None:
            if char == "\\":
                index += 2
                continue
            if char == quote or char == "\n":
                quote = None
        elif char == "{":
            stack.append(index)
        elif char == "}":
            if stack:
                spans.append((stack.pop(), index + 1))
        elif char in "\"'" and stack:
            quote = char
        index += 1
    spans.sort()
    return spans, stack


def _last_object_in_prose(text: str, spans: list[tuple[int, int]]) -> tuple[dict | None, str | None, str | None]:
    """The last outermost span that parses as an object: (value, kind, None) or (None, None, error).

    Spans nest, so they form a forest. Visiting it in reverse pre-order (last top-level span first,
    and a span's children, last first, only when the span itself fails) meets the wanted span first,
    so the usual answer, an object at the end, costs one parse.
    """
    children: dict[tuple[int, int], list[tuple[int, int]]] = {}
    roots: list[tuple[int, int]] = []
    open_spans: list[tuple[int, int]] = []
    for span in spans:  # sorted by start; a parent comes before its children
        while open_spans and open_spans[-1][1] <= span[0]:
            open_spans.pop()
        (children.setdefault(open_spans[-1], []) if open_spans else roots).append(span)
        open_spans.append(span)

    budget = _PARSE_BUDGET
    last_error = None
    to_visit = list(roots)
    while to_visit:
        start, end = span = to_visit.pop()
        if _OBJECT_START.match(text, start):  # "{{" or "{[" cannot start a dict: skip the parse
            if end - start > budget:
                return None, None, "gave up: the answer holds too many nested '{...}' candidates"
            budget -= end - start
            value, kind, error = _load(text[start:end])
            if kind is not None and isinstance(value, Mapping):
                return dict(value), kind, None
            last_error = last_error or error
        to_visit.extend(children.get(span, ()))
    return None, None, last_error


# An answer deeper than this, or holding what JSON cannot carry (bytes, sets, complex numbers from a
# Python literal; integers too long to print), is not read: it could not be stored or shown.
MAX_ANSWER_DEPTH = 64
_MAX_INT_BITS = 13_000  # about 3,900 digits; Python refuses to print integers of more than 4,300


def parse_answer(raw: Any) -> ParsedAnswer:
    """`_parse_answer`, refusing values that cannot be stored as JSON (see MAX_ANSWER_DEPTH).
    Never raises."""
    parsed = _parse_answer(raw)
    if parsed.ok:
        problem = _not_storable(parsed.value)
        if problem:
            return ParsedAnswer(None, problem, "none")
    return parsed


def _not_storable(value: Any) -> str | None:
    """Why a parsed answer cannot be stored as JSON, or None. Iterative: depth is what it checks."""
    stack = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if depth > MAX_ANSWER_DEPTH:
            return f"the answer is nested deeper than {MAX_ANSWER_DEPTH} levels"
        if isinstance(item, Mapping):
            for key, inner in item.items():
                if not (key is None or isinstance(key, (str, int, float))):
                    return f"the answer has a key of type {type(key).__name__}, which JSON cannot hold"
                stack.append((key, depth))
                stack.append((inner, depth + 1))
        elif isinstance(item, (list, tuple)):
            stack.extend((inner, depth + 1) for inner in item)
        elif isinstance(item, int) and not isinstance(item, bool):
            if item.bit_length() > _MAX_INT_BITS:
                return "the answer holds an integer of thousands of digits"
        elif not (item is None or isinstance(item, (str, float, bool))):
            return f"the answer holds a {type(item).__name__} value, which JSON cannot hold"
    return None


def _parse_answer(raw: Any) -> ParsedAnswer:
    """Read an agent's final answer as an object mapping keys to results. Never raises.

    A mapping is returned as is. Text is tried, in order, as: the whole text (JSON, then a Python
    literal, which accepts single quotes, True/None and tuples); the last markdown ``` fence whose
    content is an object; the last complete, outermost `{...}` in the prose that parses. The *last*
    one wins because agents usually restate the requested format ("in the format {"IoU": 0.0}")
    before giving the answer, not after. `nan`, `NaN`, `inf`, `Infinity` (any case, with a sign) are
    read as floats so that such an answer fails as "nan"/"infinite" rather than as unparseable.

    On failure `value` is None and `error` says what was wrong, e.g. "no JSON object found in the
    answer" or "top-level value is a list, expected an object".
    """
    if raw is None:
        return ParsedAnswer(None, "no answer was given", "none")
    if isinstance(raw, Mapping):
        return ParsedAnswer(raw if isinstance(raw, dict) else dict(raw), None, "dict")
    if isinstance(raw, (bytes, bytearray)):
        raw = bytes(raw).decode("utf-8", errors="replace")
    if not isinstance(raw, str):
        return ParsedAnswer(None, f"top-level value is {describe_value(raw)}, expected an object", "none")

    text = raw.strip()
    if not text:
        return ParsedAnswer(None, "the answer is empty", "none")
    if len(text) > MAX_ANSWER_CHARS:
        return ParsedAnswer(
            None, f"the answer is {len(text)} characters long; at most {MAX_ANSWER_CHARS} are read", "none"
        )
    return _whole_text(text) or _last_fenced_object(text) or _last_object_in_text(text)


def _whole_text(text: str) -> ParsedAnswer | None:
    """The whole answer as JSON or a Python literal; None when it is neither."""
    value, kind, _ = _load(text)
    if kind is None:
        return None
    if isinstance(value, Mapping):
        return ParsedAnswer(dict(value), None, kind)
    # A well-formed answer of the wrong shape: digging an object out of it (say, the first
    # element of a list) would be guessing.
    return ParsedAnswer(None, f"top-level value is {describe_value(value)}, expected an object", "none")


def _last_fenced_object(text: str) -> ParsedAnswer | None:
    """The last markdown ``` fence whose content is an object; None when there is none."""
    for match in reversed(list(_FENCE.finditer(text))):
        value, kind, _ = _load(match.group("body"))
        if kind is not None and isinstance(value, Mapping):
            return ParsedAnswer(dict(value), None, f"{kind}-in-fence")
    return None


def _last_object_in_text(text: str) -> ParsedAnswer:
    """The last outermost `{...}` in the prose that parses, or why none does."""
    spans, unclosed = _brace_spans(text)
    value, kind, last_error = _last_object_in_prose(text, spans)
    if value is not None:
        return ParsedAnswer(value, None, f"{kind}-in-prose")
    if spans:
        detail = f" (last error: {last_error})" if last_error else ""
        if unclosed:
            detail += f"; an object opened at character {unclosed[-1]} is never closed (is the answer truncated?)"
        return ParsedAnswer(
            None,
            f"found {len(spans)} '{{...}}' candidate(s) in the answer but none is a JSON object "
            f"or Python dict literal{detail}",
            "none",
        )
    if unclosed:
        return ParsedAnswer(
            None, f"an object opened at character {unclosed[0]} is never closed (is the answer truncated?)", "none"
        )
    return ParsedAnswer(None, "no JSON object found in the answer", "none")
