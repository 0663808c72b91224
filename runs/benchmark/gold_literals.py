"""Hard-coded gold numbers in an agent's implementations of the masked functions.

A suite without held-out variants publishes its gold numbers, so a masked body can pass by
returning or printing them. The next best check: a scoped implementation holding a numeric literal
of four or more significant digits within tolerance of one of its sample's gold numbers (the
scoring rule, `runs.benchmark.scoring.within_tolerance`, with that number's rtol and atol) is
suspect. `gold_literals_in` finds every such literal; what to do with them is the caller's.

What counts as a literal of a body:

- a number in the code: `0.8123`, `8123e-4`, `1_234.5`, `0.8123j` (its imaginary part); one right
  after a minus sign counts with either sign (`-0.8123` and `0 - 0.8123` are both found);
- a number written inside a string or bytes literal, f-strings included (`'{"score": 0.8123}'`),
  with its sign;
- not a number in a comment (it never runs), nor one the stub already holds (the gold docstring
  kept in the workspace is not the agent's; a caller may add the paper's text), nor one that
  spells a well-known constant (pi, e, ln 2, sqrt 2, sqrt(2/pi), Euler's gamma...).

Significant digits are counted as written, mantissa only: leading and trailing zeros never count
(0.001234 has 4; 1200, 1200.0 and 1.200 have 2), nor do the exponent and the sign. Hexadecimal,
octal and binary literals are read digit by digit as decimals and practically never qualify.

The check is a heuristic: arithmetic (`0.8 + 0.0123`), encodings, numbers read from elsewhere and
numbers rounded to three digits (within 5% of the gold all the same) evade it. Work is bounded: the body is split into code, strings and comments by one regular
expression, numbers are found by another (C speed), each distinct number is judged once (gold
numbers searched by bisection), and only the occurrences of those that match are then located;
at most `MAX_FOUND` records come back. Bodies beyond `MAX_BODY_CHARS` characters (the scope rule
keeps no file that long) are scanned up to that length.

Pure Python: no Django here.
"""
from __future__ import annotations

import ast
import bisect
import itertools
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass
from typing import Any, NamedTuple

from runs.benchmark.locating import MaskingError, locate_function
from runs.benchmark.masking import function_body_source
from runs.benchmark.scoring import DEFAULT_ATOL, DEFAULT_RTOL, as_number, flatten_numbers, within_tolerance

__all__ = [
    "MAX_BODY_CHARS",
    "MAX_FOUND",
    "MIN_SIGNIFICANT_DIGITS",
    "GoldLiteral",
    "GoldNumber",
    "Implementation",
    "gold_literals_in",
    "gold_numbers_of",
    "enclosing_definition",
    "implementations_of",
    "significant_digits",
]

MIN_SIGNIFICANT_DIGITS = 4
MAX_BODY_CHARS = 2_000_000
# Up to this many matching numbers, occurrences are found by a pattern of those numbers alone.
MAX_WANTED_PATTERN = 200
# Records returned at most, in all: one already fails the implementation; the rest are examples.
MAX_FOUND = 100

# One pass over a body finds its comments and string literals (valid Python: the body compiled).
# Possessive quantifiers keep an unterminated quote from making the scan quadratic.
_STRINGS_AND_COMMENTS = re.compile(
    r"""(?=[\#'"rRbBuUfF])  # quick rejection of every other position
    (?P<comment>\#[^\r\n]*+)
    | (?P<string>(?:(?<!\w)[rRbBuUfF]{1,2})?
        (?: '''(?:[^\\']|\\.|'(?!''))*+'''
          | \"\"\"(?:[^\\"]|\\.|"(?!""))*+\"\"\"
          | '(?:[^\\'\r\n]|\\.)*+'
          | "(?:[^\\"\r\n]|\\.)*+" ))""",
    re.VERBOSE | re.DOTALL,
)
_DIGITS = r"\d(?:_?\d)*"
_NUMBER = rf"(?:{_DIGITS}(?:\.(?:{_DIGITS})?)?|\.{_DIGITS})(?:[eE][-+]?{_DIGITS})?[jJ]?"
# A number as Python reads it, greedily: what follows may be anything (`0.8123.real`, `0.8123if x`).
_NUMBER_AT = re.compile(_NUMBER)
# In code a number starts where no name or number continues.
_CODE_NUMBER = re.compile(rf"(?<![\w.]){_NUMBER}")
# In text, anything but a digit or point may precede it (`_0.8123`, `v=0.8123`).
_TEXT_NUMBER = re.compile(rf"(?<![\d.]){_NUMBER}")


class GoldNumber(NamedTuple):
    """One gold number of the sample and the tolerance it is scored with."""

    value: float
    rtol: float
    atol: float


@dataclass(frozen=True)
class Implementation:
    """A masked function's body as re-execution runs it.

    `body`: its source, dedented (`runs.benchmark.masking.function_body_source`); `line`: the line
    of the file on which the body starts; `stub`: the masked body the workspace had (its literals
    are not the agent's; "" when unknown).
    """

    path: str
    function: str
    body: str
    line: int = 1
    stub: str = ""


@dataclass(frozen=True)
class GoldLiteral:
    """A literal of an implementation within tolerance of a gold number: `literal` as written
    (with its minus sign where only the negative value matches), `line` in the file."""

    path: str
    function: str
    literal: str
    line: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def significant_digits(literal: str) -> int:
    """Significant digits of a number as written (see the module's docstring for the convention)."""
    text = literal.lstrip("+-").rstrip("jJ").replace("_", "").lower()
    mantissa = text.partition("e")[0]
    return len(mantissa.replace(".", "").strip("0"))


# Constants honest code writes out (pi, e, logs and roots of small numbers, Euler's gamma, the golden
# ratio, GELU's sqrt(2/pi)): a literal that spells one of them is not taken for a gold number.
_WELL_KNOWN = tuple(
    value
    for base in (math.pi, math.e, math.log(2), math.log(10), 1 / math.log(2), 1 / math.log(10), math.sqrt(2),
                 math.sqrt(3), 1 / math.sqrt(2), math.sqrt(math.pi), math.sqrt(2 * math.pi), math.sqrt(2 / math.pi),
                 0.5772156649015329, (1 + math.sqrt(5)) / 2)
    for value in (base, 2 * base, base / 2)
)


def _well_known(written: str, value: float) -> bool:
    """Whether `written` spells a well-known constant to its last digit (rounded or cut there)."""
    digits = significant_digits(written)
    return any(
        abs(abs(value) - constant) <= 10.0 ** (math.floor(math.log10(constant)) - digits + 1)
        for constant in _WELL_KNOWN
    )


def gold_numbers_of(
    *, gold_result: Any, rtol: float | None = None, atol: float | None = None, number_tolerances: Mapping | None = None
) -> list[GoldNumber]:
    """The finite numbers of one experiment's gold result with the tolerance each is scored with:
    the experiment's (the defaults when None) or its own (`number_tolerances`: flattened key ->
    (rtol, atol)), as runs.benchmark.scoring.score_experiment applies them."""
    rtol = DEFAULT_RTOL if rtol is None else float(rtol)
    atol = DEFAULT_ATOL if atol is None else float(atol)
    numbers = []
    for key, raw in flatten_numbers(gold_result).items():
        value = as_number(raw)
        if value is None or not math.isfinite(value):
            continue
        own = (number_tolerances or {}).get(key)
        numbers.append(GoldNumber(value, float(own[0]), float(own[1])) if own else GoldNumber(value, rtol, atol))
    return numbers


def implementations_of(
    *, files: Mapping[str, str], functions: Mapping[str, Sequence[str]], stubs: Mapping[str, str] | None = None
) -> list[Implementation]:
    """The masked functions' bodies in `files` (path -> the text re-execution runs), by qualified
    name (`functions`: path -> names, as in task.json); `stubs`: path -> the masked file's text,
    whose bodies are the stubs. A function that cannot be found (a file that does not parse, a
    name it lacks) has no implementation to check and is left out."""
    found = []
    for path, names in functions.items():
        text = files.get(path)
        if text is None:
            continue
        for name in names:
            try:
                location = locate_function(text, name)
                body = function_body_source(text, name, line_hint=location.def_line)
            except (MaskingError, SyntaxError, ValueError, RecursionError):
                continue
            stub = ""
            if stubs and stubs.get(path) is not None:
                try:
                    stub = function_body_source(stubs[path], name)
                except (MaskingError, SyntaxError, ValueError, RecursionError):
                    stub = ""
            line = text.count("\n", 0, location.body_start) + 1
            found.append(Implementation(path=path, function=location.qualified_name, body=body, line=line, stub=stub))
    return found


def gold_literals_in(
    *, implementations: Iterable[Implementation], gold: Iterable[GoldNumber | tuple[float, float, float]]
) -> list[GoldLiteral]:
    """Every literal of four or more significant digits in the implementations that lies within
    tolerance of a gold number, in order of implementation and position, the first `MAX_FOUND`.
    `gold`: (value, rtol, atol) of each gold number of the sample (`gold_numbers_of`); non-finite
    ones are ignored.
    Raises ValueError naming a tolerance that is not a finite number >= 0."""
    matcher = _GoldMatcher(gold)
    found: list[GoldLiteral] = []
    for implementation in implementations:
        found.extend(_literals_of(implementation, matcher, MAX_FOUND - len(found)))
        if len(found) >= MAX_FOUND:
            break
    return found


# --- finding literals ----------------------------------------------------------------------------


class _GoldMatcher:
    """Which values lie within tolerance of some gold number, by bisection over the gold numbers'
    tolerance intervals; the scoring rule itself decides."""

    def __init__(self, gold: Iterable[GoldNumber | tuple[float, float, float]]) -> None:
        intervals = []
        for index, entry in enumerate(gold):
            value, rtol, atol = (float(part) for part in entry)
            for name, tolerance in (("rtol", rtol), ("atol", atol)):
                if not (math.isfinite(tolerance) and tolerance >= 0):
                    raise ValueError(f"gold number {index} ({value!r}): {name} must be a finite number >= 0, got {tolerance!r}")
            if math.isfinite(value):
                # A little wider than the rule: the rule, not this interval, decides.
                width = (rtol * abs(value) + atol) * (1 + 1e-9) + 1e-300
                intervals.append((value - width, value + width, GoldNumber(value, rtol, atol)))
        intervals.sort(key=lambda interval: interval[0])
        self.starts = [start for start, _, _ in intervals]
        self.intervals = intervals
        # The furthest-reaching interval among the first i: a value beyond its end is in none of them.
        self.reach: list[tuple[float, int]] = []
        for index, (_, end, _) in enumerate(intervals):
            if not self.reach or end > self.reach[-1][0]:
                self.reach.append((end, index))
            else:
                self.reach.append(self.reach[-1])

    def matches(self, value: float) -> bool:
        last = bisect.bisect_right(self.starts, value) - 1
        while last >= 0 and self.reach[last][0] >= value:
            _, index = self.reach[last]
            _, _, gold = self.intervals[index]
            if within_tolerance(value, gold.value, rtol=gold.rtol, atol=gold.atol):
                return True
            last = index - 1  # intervals further left, each checked once at most
        return False


def _literals_of(implementation: Implementation, matcher: _GoldMatcher, limit: int) -> list[GoldLiteral]:
    """The gold literals of one body, at most `limit`.

    Distinct numbers are judged first (C-speed scans, one judgement each); only the occurrences
    of those that match are then located, with the minus before each and its line.
    """
    body = implementation.body[:MAX_BODY_CHARS]
    parts = _STRINGS_AND_COMMENTS.split(body)  # code, comment or None, string or None, code, ...
    code, strings = parts[0::3], list(filter(None, parts[2::3]))
    written = set(_CODE_NUMBER.findall(" ".join(code))) | set(_TEXT_NUMBER.findall(" ".join(strings)))
    written -= set(_CODE_NUMBER.findall(implementation.stub)) | set(_TEXT_NUMBER.findall(implementation.stub))
    judged = {number: signs for number in written if (signs := _judge(number, matcher))}
    if not judged:
        return []
    found = []
    lines = _LineCounter(body)
    for offset, number, minus in _numbers(body, parts, set(judged)):
        negative, positive = judged[number]
        if negative and minus:
            literal = "-" + number
        elif positive:
            literal = number
        else:
            continue
        found.append(GoldLiteral(implementation.path, implementation.function, literal, implementation.line - 1 + lines.at(offset)))
        if len(found) >= limit:
            break
    return found


def _judge(written: str, matcher: _GoldMatcher) -> tuple[bool, bool] | None:
    """Whether a number of four or more significant digits matches a gold number as negative (after
    a minus) and as written; None when neither."""
    if len(written) < MIN_SIGNIFICANT_DIGITS or significant_digits(written) < MIN_SIGNIFICANT_DIGITS:
        return None
    try:
        value = float(written.rstrip("jJ").replace("_", ""))
    except ValueError:  # the regular expressions only give numbers; defensive
        return None
    if not math.isfinite(value) or _well_known(written, value):
        return None
    signs = (matcher.matches(-value), matcher.matches(value))
    return signs if any(signs) else None


class _LineCounter:
    """Line numbers of increasing offsets, counted incrementally (linear in all)."""

    def __init__(self, text: str) -> None:
        self.text, self.offset, self.line = text, 0, 1

    def at(self, offset: int) -> int:
        self.line += self.text.count("\n", self.offset, offset)
        self.offset = offset
        return self.line


def _numbers(body: str, parts: list, wanted: set[str]) -> Iterable[tuple[int, str, bool]]:
    """(offset, number as written, whether a minus precedes it) for the `wanted` numbers in the code
    and strings of a body (split by _STRINGS_AND_COMMENTS into code, comment, string, code...),
    comments left out, in order. One scan of the body; each occurrence's part found by bisection."""
    ends = list(itertools.accumulate(len(part) if part else 0 for part in parts))
    if len(wanted) <= MAX_WANTED_PATTERN:  # usually a handful: let the scan skip all other numbers
        alternatives = "|".join(re.escape(number) for number in sorted(wanted, key=len, reverse=True))
        pattern = re.compile(rf"(?<![\d.])(?:{alternatives})")
    else:
        pattern = _TEXT_NUMBER
    for match in pattern.finditer(body):
        number, offset = match.group(), match.start()
        whole = _NUMBER_AT.match(body, offset)
        if number not in wanted or whole is None or whole.group() != number:
            continue  # part of a longer number
        index = bisect.bisect_right(ends, offset)
        kind, start = index % 3, ends[index - 1] if index else 0
        if kind == 1:
            continue  # a comment
        before = body[max(start, offset - 16) : offset]
        if kind == 0:  # code: no name may run into the number (`x1234`); a minus may stand apart
            if offset and (body[offset - 1].isalnum() or body[offset - 1] == "_"):
                continue
            before = before.rstrip(" \t")
        yield offset, number, before.endswith("-")


def enclosing_definition(text: str, line: int) -> str:
    """The qualified name of the innermost function or class of `text` holding `line` ("" at
    module level or when the text does not parse)."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError, RecursionError, MemoryError):
        return ""
    names: list[str] = []
    body = tree.body
    while True:
        inside = next((node for node in body if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
                       and node.lineno <= line <= (node.end_lineno or node.lineno)), None)
        if inside is None:
            return ".".join(names)
        names.append(inside.name)
        body = inside.body
