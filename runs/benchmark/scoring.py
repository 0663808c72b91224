"""Scoring an agent's final answer against the gold results of a sample's experiments.

The rule (strict mode, the one the leaderboard uses): every number in an experiment's gold result,
after flattening nested objects and lists, must be reported, and a reported number passes when
`abs(pred - gold) <= rtol * abs(gold) + atol`. An experiment passes when all its numbers pass; a
sample passes when all its experiments pass. Extra keys in the answer are ignored.

This deliberately differs from the upstream release, which divided by `gold` without `abs` (so any
prediction for a negative gold value passed), crashed on gold 0, averaged the errors of an
experiment's numbers (one wildly wrong number hides behind several exact ones) and filled missing
keys with 0. `mode="upstream"` reproduces the averaging, with the sign and zero fixes, so that
results can be compared with the paper's numbers.

No Django here: this module is imported by the agent harness, the importers and the leaderboard.
"""
from __future__ import annotations

import ast
import json
import math
import numbers
import re
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from runs.benchmark import python_ast

DEFAULT_RTOL = 0.05
# A purely relative rule cannot be met when the gold value is exactly 0: any non-zero prediction,
# even 1e-17 of float round-off, is infinitely far off in relative terms (and upstream divided by
# zero). The absolute term forgives differences at round-off level. Keep it tiny: some gold metrics
# are themselves around 1e-7, where a larger atol would swamp the relative tolerance.
DEFAULT_ATOL = 1e-8



class ScoringMode(StrEnum):
    STRICT = "strict"  # every number within its tolerance: the leaderboard's rule
    UPSTREAM = "upstream"  # the mean relative error within rtol, as upstream (with the sign and zero fixes)


# Answers are an agent's output; past this size they are not an answer but a dump, and scanning
# them for objects would cost more than it is worth.
MAX_ANSWER_CHARS = 1_000_000



class NumberReason(StrEnum):
    """Why a gold number passed or failed (`NumberScore.reason`); only OK and OUTSIDE were compared."""

    OK = "ok"
    MISSING = "missing"
    NOT_A_NUMBER = "not a number"
    NAN = "nan"
    INFINITE = "infinite"
    OUTSIDE = "outside tolerance"
    GOLD_NOT_A_NUMBER = "gold is not a number"
    GOLD_NAN = "gold is nan"
    GOLD_INFINITE = "gold is infinite"


# --------------------------------------------------------------------------------------------------
# Parsing


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


def _describe(value: Any) -> str:
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
        return ParsedAnswer(None, f"top-level value is {_describe(raw)}, expected an object", "none")

    text = raw.strip()
    if not text:
        return ParsedAnswer(None, "the answer is empty", "none")
    if len(text) > MAX_ANSWER_CHARS:
        return ParsedAnswer(
            None, f"the answer is {len(text)} characters long; at most {MAX_ANSWER_CHARS} are read", "none"
        )

    value, kind, _ = _load(text)
    if kind is not None:
        if isinstance(value, Mapping):
            return ParsedAnswer(dict(value), None, kind)
        # A well-formed answer of the wrong shape: digging an object out of it (say, the first
        # element of a list) would be guessing.
        return ParsedAnswer(None, f"top-level value is {_describe(value)}, expected an object", "none")

    for match in reversed(list(_FENCE.finditer(text))):
        value, kind, _ = _load(match.group("body"))
        if kind is not None and isinstance(value, Mapping):
            return ParsedAnswer(dict(value), None, f"{kind}-in-fence")

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


# --------------------------------------------------------------------------------------------------
# Numbers


_NUMBER_TEXT = re.compile(
    r"[+-]?(?:(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?|nan|inf|infinity)", re.IGNORECASE
)


def as_number(value: Any) -> float | None:
    """A reported leaf as a float, or None when it is not a number.

    Strings that are plain decimal numbers ("0.93", " -1e-3 ", "nan") count, because agents often
    quote numbers. Anything else does not: "93%" is not read as 0.93 or 93 (guessing the scale would
    make a wrong answer pass), bools are not 1/0, and a one-element list is not its element.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, numbers.Real):  # also numpy scalars, which register with numbers
        try:
            return float(value)
        except OverflowError:  # an int beyond float range
            return -math.inf if value < 0 else math.inf
    if isinstance(value, str):
        text = value.strip()
        if _NUMBER_TEXT.fullmatch(text):
            return float(text)
    return None


def flatten_numbers(value: Any) -> dict[str, Any]:
    """Nested objects and lists as `{key path: leaf}`: `{"metrics": {"acc": 1}, "losses": [3]}` gives
    `{"metrics.acc": 1, "losses[0]": 3}`. Leaves are kept raw (see `as_number`); empty objects and
    lists contribute no keys; a bare leaf at the top has the path "".
    """
    flat: dict[str, Any] = {}
    # Iterative (a stack in document order): an answer's depth must not reach the recursion limit.
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, Mapping):
            stack.extend((inner, f"{path}.{key}" if path else str(key)) for key, inner in reversed(list(item.items())))
        elif isinstance(item, (list, tuple)):
            stack.extend((inner, f"{path}[{index}]") for index, inner in reversed(list(enumerate(item))))
        else:
            flat[path] = item
    return flat


def _json_float(value: float | None) -> float | str | None:
    # Strict JSON (and Postgres jsonb) has no NaN or Infinity. Store them as the strings Python's json
    # module and JavaScript use for them, so nothing is lost and a reader can tell them apart.
    if value is None or math.isfinite(value):
        return value
    if math.isnan(value):
        return "NaN"
    return "Infinity" if value > 0 else "-Infinity"


# --------------------------------------------------------------------------------------------------
# Scores


@dataclass
class NumberScore:
    """One gold number compared with the reported one.

    `relative_error` is `|pred - gold| / |gold|`, `inf` when gold is 0 and pred is not, 0 when both
    are 0, and None when the two cannot be compared (missing, not a number, nan, infinite, bad gold).
    `predicted_text` keeps a short repr of a reported leaf that was not a number, for the report.
    """

    key: str
    gold: float | None
    predicted: float | None
    relative_error: float | None
    passed: bool
    reason: NumberReason
    predicted_text: str | None = None
    # Set only when this number was judged with its own tolerance (a noisy gold number widened by
    # the suite's policy), not its experiment's.
    rtol: float | None = None
    atol: float | None = None

    def to_dict(self) -> dict:
        data = {
            "key": self.key,
            "gold": _json_float(self.gold),
            "predicted": _json_float(self.predicted),
            "relative_error": _json_float(self.relative_error),
            "passed": self.passed,
            "reason": self.reason,
            "predicted_text": self.predicted_text,
        }
        if self.rtol is not None:
            data.update(rtol=self.rtol, atol=self.atol)
        return data


@dataclass
class ExperimentScore:
    """The verdict for one experiment. `error` explains a failure that is not about one number (no
    result for the experiment, unparseable answer, unusable gold). `mean_relative_error` is only
    set in upstream mode, where it decides the verdict. `answer_key` is the key of the answer the
    result was taken from (None when the answer itself was the result)."""

    experiment_id: Any
    passed: bool
    numbers: list[NumberScore] = field(default_factory=list)
    error: str | None = None
    mode: ScoringMode = ScoringMode.STRICT
    rtol: float = DEFAULT_RTOL
    atol: float = DEFAULT_ATOL
    mean_relative_error: float | None = None
    answer_key: str | None = None

    def to_dict(self) -> dict:
        """JSON-serialisable (strict JSON: non-finite floats become "NaN"/"Infinity"/"-Infinity")."""
        return {
            "experiment_id": self.experiment_id,
            "passed": self.passed,
            "error": self.error,
            "mode": self.mode,
            "rtol": self.rtol,
            "atol": self.atol,
            "mean_relative_error": _json_float(self.mean_relative_error),
            "answer_key": self.answer_key,
            "numbers": [number.to_dict() for number in self.numbers],
        }


@dataclass
class SampleScore:
    """The verdict for one sample: passed when it has experiments and all of them pass. `error` is
    set when the answer could not be parsed (then every experiment fails with it) or the sample has
    no experiments; `parse_method` says how the answer was read."""

    passed: bool
    experiments: list[ExperimentScore] = field(default_factory=list)
    error: str | None = None
    parse_method: str | None = None

    def to_dict(self) -> dict:
        """JSON-serialisable, see `ExperimentScore.to_dict`."""
        return {
            "passed": self.passed,
            "error": self.error,
            "parse_method": self.parse_method,
            "experiments": [experiment.to_dict() for experiment in self.experiments],
        }


_MISSING = object()


def _check_tolerances(rtol: float, atol: float) -> None:
    for name, value in (("rtol", rtol), ("atol", atol)):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not value >= 0 or math.isinf(value):
            raise ValueError(f"{name} must be a finite number >= 0, got {value!r}")


def _scoring_mode(mode: str) -> ScoringMode:
    try:
        return ScoringMode(mode)
    except ValueError:
        raise ValueError(f"mode must be one of {', '.join(ScoringMode)}; got {mode!r}") from None


def _relative_error(pred: float, gold: float) -> float:
    if gold == 0:
        return 0.0 if pred == 0 else math.inf
    return abs(pred - gold) / abs(gold)


def _short_repr(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _score_number(
    key: str, gold_raw: Any, pred_raw: Any, pred_flat: dict, rtol: float, atol: float, mode: ScoringMode
) -> NumberScore:
    gold = as_number(gold_raw)
    predicted = None if pred_raw is _MISSING else as_number(pred_raw)
    predicted_text = None
    if pred_raw is not _MISSING and predicted is None:
        predicted_text = _short_repr(pred_raw)

    def fail(reason: NumberReason) -> NumberScore:
        return NumberScore(key, gold, predicted, None, False, reason, predicted_text)

    # Bad gold first: it is a suite bug, and no prediction could be right against it.
    if gold is None:
        return fail(NumberReason.GOLD_NOT_A_NUMBER)
    if math.isnan(gold):
        return fail(NumberReason.GOLD_NAN)
    if math.isinf(gold):
        return fail(NumberReason.GOLD_INFINITE)
    if pred_raw is _MISSING:
        # A list or object where gold has a number is a wrong answer, not a forgotten key.
        prefix_dot, prefix_bracket = f"{key}.", f"{key}["
        if any(other.startswith((prefix_dot, prefix_bracket)) for other in pred_flat):
            predicted_text = "a list or object"
            return fail(NumberReason.NOT_A_NUMBER)
        return fail(NumberReason.MISSING)
    if predicted is None:
        return fail(NumberReason.NOT_A_NUMBER)
    if math.isnan(predicted):
        return fail(NumberReason.NAN)
    if math.isinf(predicted):
        return fail(NumberReason.INFINITE)

    relative = _relative_error(predicted, gold)
    if mode == ScoringMode.STRICT:
        passed = within_tolerance(predicted, gold, rtol=rtol, atol=atol)
    else:
        passed = _upstream_contribution(predicted, gold, atol) <= rtol
    return NumberScore(key, gold, predicted, relative, passed, NumberReason.OK if passed else NumberReason.OUTSIDE)


def within_tolerance(predicted: float, gold: float, *, rtol: float, atol: float) -> bool:
    """Whether one reported number passes against its gold number (the strict rule)."""
    return abs(predicted - gold) <= rtol * abs(gold) + atol


def _upstream_contribution(predicted: float, gold: float, atol: float) -> float:
    # Upstream divided by gold and crashed on 0; a zero gold value instead counts as exact when the
    # prediction is within atol of it and as infinitely wrong otherwise.
    if gold == 0:
        return 0.0 if abs(predicted) <= atol else math.inf
    return abs(predicted - gold) / abs(gold)


def score_experiment(
    *,
    gold: Mapping,
    predicted: Mapping | None,
    rtol: float = DEFAULT_RTOL,
    atol: float = DEFAULT_ATOL,
    experiment_id: Any = None,
    mode: str = ScoringMode.STRICT,
    number_tolerances: Mapping[str, tuple[float, float]] | None = None,
) -> ExperimentScore:
    """Compare one experiment's reported result with its gold result.

    Every key of the flattened gold result is checked; extra reported keys are ignored; a list
    shorter than gold's leaves its missing entries failing. `mode="strict"`: each number must
    satisfy `abs(pred - gold) <= rtol * abs(gold) + atol`, and the experiment passes when all do.
    `mode="upstream"`: the experiment passes when the mean relative error over its numbers is at
    most rtol (upstream's aggregation, with `abs(gold)` as the denominator and the atol rule for a
    zero gold value); each number's `passed` then says whether its own error is within rtol, for the
    report, but only the mean decides. Unlike upstream, which filled a missing key with 0, a missing, non-numeric,
    nan or infinite number fails the experiment in both modes: 0 can be within tolerance of a
    small gold value, which would reward not answering.

    `number_tolerances` gives some numbers (flattened keys) their own (rtol, atol) instead of the
    experiment's: a noisy gold number widened by the suite's policy (runs.benchmark.stability). Those
    numbers record it in their score. In upstream mode they only change the per-number report.

    Raises ValueError for a negative or non-finite tolerance or an unknown mode; never for a bad
    answer or bad gold, which fail with a reason instead.
    """
    _check_tolerances(rtol, atol)
    scoring_mode = _scoring_mode(mode)
    for own_rtol, own_atol in (number_tolerances or {}).values():
        _check_tolerances(own_rtol, own_atol)
    rtol, atol = float(rtol), float(atol)
    score = ExperimentScore(experiment_id=experiment_id, passed=False, mode=scoring_mode, rtol=rtol, atol=atol)
    if not isinstance(gold, Mapping):
        score.error = f"the gold result is {_describe(gold)}, expected an object"
        return score
    gold_flat = flatten_numbers(gold)
    if not gold_flat:
        # Passing vacuously would count an experiment nobody can fail.
        score.error = "the gold result has no numbers to compare"
        return score

    if predicted is None:
        score.error = "no result for this experiment"
        pred_flat: dict[str, Any] = {}
    elif not isinstance(predicted, Mapping):
        score.error = f"the result is {_describe(predicted)}, expected an object"
        pred_flat = {}
    else:
        pred_flat = flatten_numbers(predicted)

    score.numbers = []
    for key, gold_value in gold_flat.items():
        own = number_tolerances.get(key) if number_tolerances else None
        key_rtol, key_atol = (float(own[0]), float(own[1])) if own else (rtol, atol)
        number = _score_number(key, gold_value, pred_flat.get(key, _MISSING), pred_flat, key_rtol, key_atol, scoring_mode)
        if own:
            number.rtol, number.atol = key_rtol, key_atol
        score.numbers.append(number)
    comparable = all(number.reason in (NumberReason.OK, NumberReason.OUTSIDE) for number in score.numbers)
    if scoring_mode == ScoringMode.STRICT:
        score.passed = score.error is None and all(number.passed for number in score.numbers)
    elif comparable and score.error is None:
        # Every number was compared (reason OK or OUTSIDE), so each has both sides.
        contributions = [
            _upstream_contribution(n.predicted, n.gold, atol) for n in score.numbers if n.predicted is not None and n.gold is not None
        ]
        # fsum of a list holding inf is inf, so one infinitely wrong zero-gold number fails the mean.
        score.mean_relative_error = math.fsum(contributions) / len(contributions)
        score.passed = score.mean_relative_error <= rtol
    return score


# --------------------------------------------------------------------------------------------------
# Samples


# At most 9 digits: a key of thousands of digits is no experiment number (and int() would refuse it).
_LABELLED_KEY = re.compile(r"\s*(?:experiment|exp)[\s_#:.-]*(\d{1,9})\s*", re.IGNORECASE)
_BARE_NUMBER = re.compile(r"\s*(\d{1,9})\s*")


def _key_number(key: Any) -> tuple[int | None, bool]:
    """(number, labelled) for an answer key such as 2, "2", "Experiment 2", "experiment_2"."""
    if isinstance(key, int) and not isinstance(key, bool):
        return key, False
    if isinstance(key, str):
        if match := _LABELLED_KEY.fullmatch(key):
            return int(match.group(1)), True
        if match := _BARE_NUMBER.fullmatch(key):
            return int(match.group(1)), False
    return None, False


def _match_experiments(experiment_ids: Sequence[Any], answer: Mapping) -> list[Any]:
    """For each experiment, the answer key holding its result, or _MISSING. See `score_sample`."""
    count = len(experiment_ids)
    id_text = [str(experiment_id).strip() for experiment_id in experiment_ids]
    by_position: list[Any] = [_MISSING] * count
    by_id: list[Any] = [_MISSING] * count
    labelled = False
    for key in answer:
        number, is_labelled = _key_number(key)
        labelled = labelled or is_labelled
        if number is not None and 1 <= number <= count and by_position[number - 1] is _MISSING:
            by_position[number - 1] = key
        # An id can be given verbatim ("2303.11932#0") or as a number, labelled or not.
        candidates = {str(key).strip()} | ({str(number)} if number is not None else set())
        for index, text in enumerate(id_text):
            if text in candidates and by_id[index] is _MISSING:
                by_id[index] = key
    found_by_position = sum(key is not _MISSING for key in by_position)
    found_by_id = sum(key is not _MISSING for key in by_id)
    if found_by_position > found_by_id or (found_by_position == found_by_id and labelled):
        return by_position
    return by_id


def score_sample(
    *,
    experiments: Sequence[tuple],
    answer: Any,
    mode: str = ScoringMode.STRICT,
) -> SampleScore:
    """Score an agent's final answer for a sample.

    `experiments` lists `(experiment_id, gold_result, rtol or None, atol or None)` in the order the
    sample presents them (None means the default tolerance), optionally with a fifth item, the
    numbers judged with their own tolerance (`score_experiment`'s `number_tolerances`). `answer` is a mapping, a
    `ParsedAnswer`, or text for `parse_answer`.

    How the answer is keyed:
    - One experiment: the answer itself is the result when it has any of the gold result's
      top-level keys; otherwise a key naming the experiment as below is looked for; failing that
      the answer itself is scored (and its numbers fail as missing).
    - Several experiments: each answer key names an experiment by its id verbatim, or by a number,
      bare ("1", 1) or labelled ("Experiment 1", "experiment_1", "exp-1"; case, spaces, "_", "-",
      "#" ignored). A number can be read as the experiment's 1-based position in the sample
      (upstream's prompt renumbers experiments "Experiment 1..k") or as its id; the reading that
      finds more of the sample's experiments wins, and on a tie positions win if any key is
      labelled "Experiment ..." (upstream's convention) and ids win otherwise. A result given as
      a JSON string is parsed.

    The sample passes when it has experiments and every one passes. If the answer cannot be
    parsed, every experiment fails with the parse error recorded.
    """
    _scoring_mode(mode)
    specs = []
    for spec in experiments:
        experiment_id, gold, rtol, atol, *own = spec
        specs.append((
            experiment_id, gold, DEFAULT_RTOL if rtol is None else rtol, DEFAULT_ATOL if atol is None else atol,
            own[0] if own else None,
        ))
    parsed = answer if isinstance(answer, ParsedAnswer) else parse_answer(answer)
    if not specs:
        return SampleScore(passed=False, error="the sample has no experiments", parse_method=parsed.method)

    def score(spec: tuple, predicted: Any, *, key: object = None, error: str | None = None) -> ExperimentScore:
        experiment_id, gold, rtol, atol, number_tolerances = spec
        result = score_experiment(
            gold=gold, predicted=predicted, rtol=rtol, atol=atol, experiment_id=experiment_id, mode=mode,
            number_tolerances=number_tolerances,
        )
        result.answer_key = None if key is None else str(key)
        if error is not None:
            result.error = error
            result.passed = False
        return result

    if parsed.value is None:
        error = f"could not parse the answer: {parsed.error}"
        scores = [score(spec, None, error=error) for spec in specs]
        return SampleScore(passed=False, experiments=scores, error=error, parse_method=parsed.method)

    answer_value = parsed.value
    if len(specs) == 1 and isinstance(specs[0][1], Mapping) and any(key in answer_value for key in specs[0][1]):
        keys = [None]
    else:
        keys = _match_experiments([spec[0] for spec in specs], answer_value)
        if len(specs) == 1 and keys[0] is _MISSING:
            keys = [None]

    scores = []
    for index, (spec, key) in enumerate(zip(specs, keys)):
        if key is None:
            scores.append(score(spec, answer_value))
            continue
        if key is _MISSING:
            error = (
                f"the answer has no entry for experiment {spec[0]!r} "
                f"(expected a key such as 'Experiment {index + 1}' or '{spec[0]}')"
            )
            scores.append(score(spec, None, error=error))
            continue
        result = answer_value[key]
        if isinstance(result, str):
            nested = parse_answer(result)
            if nested.value is None:
                error = f"the entry {key!r} could not be parsed: {nested.error}"
                scores.append(score(spec, None, key=key, error=error))
                continue
            result = nested.value
        scores.append(score(spec, result, key=key))
    passed = all(experiment.passed for experiment in scores)
    return SampleScore(passed=passed, experiments=scores, parse_method=parsed.method)


# --------------------------------------------------------------------------------------------------
# Tolerance sensitivity: how far a verdict is from passing, in units of the tolerance


_COMPARABLE = (NumberReason.OK, NumberReason.OUTSIDE)
_ABOVE_ONE = math.nextafter(1.0, math.inf)


def _field(item: Any, name: str, default: Any = None) -> Any:
    """A field of a score given as its dataclass or as its stored dict (`to_dict`)."""
    return item.get(name, default) if isinstance(item, Mapping) else getattr(item, name, default)


def _number_ratio(number: Any, rtol: float, atol: float) -> float | None:
    """|pred - gold| / (rtol * |gold| + atol) for one compared number; None when it was not compared."""
    if _field(number, "reason") not in _COMPARABLE:
        return None
    gold, predicted = as_number(_field(number, "gold")), as_number(_field(number, "predicted"))
    if gold is None or predicted is None:
        return None
    difference = abs(predicted - gold)
    allowed = rtol * abs(gold) + atol
    if allowed == 0:
        ratio = 0.0 if difference == 0 else math.inf
    else:
        ratio = difference / allowed
    # The quotient is rounded (and inf / inf is nan): pin it to the side of 1 the rule itself chose,
    # so that ratio <= 1 exactly when the number passed, whatever the arithmetic did at the edge.
    if _field(number, "passed"):
        return ratio if ratio <= 1 else 1.0
    return ratio if ratio > 1 else _ABOVE_ONE


def tolerance_ratio(score: SampleScore | Mapping | None) -> float | None:
    """A strict-mode sample score's largest number error in units of that number's tolerance.

    For each number: `|pred - gold| / (rtol * |gold| + atol)` with the rtol and atol the score
    recorded for it (its own when it has them, else its experiment's); 0 when the two are equal, inf when they differ and the
    tolerance is 0 (gold 0 with atol 0, or both tolerances 0). The result is the largest over every
    number of every experiment, so it is <= 1 exactly when the score passes, and scaling every
    tolerance (relative and absolute) by a factor f would make the sample pass exactly when it is
    <= f.

    None when no tolerance would make the sample pass: no score, an error for the sample or one of
    its experiments (unparseable answer, no result, unusable gold), a number that was not compared
    (missing, not a number, nan, infinite), no experiments, or an upstream-mode score (its verdict
    is a mean, not a per-number rule). Accepts a SampleScore or its stored dict.
    """
    if score is None or _field(score, "error") is not None:
        return None
    experiments = _field(score, "experiments") or []
    if not experiments:
        return None
    largest = 0.0
    for experiment in experiments:
        experiment_numbers = _field(experiment, "numbers") or []
        if _field(experiment, "error") is not None or _field(experiment, "mode", ScoringMode.STRICT) != ScoringMode.STRICT or not experiment_numbers:
            return None
        rtol = as_number(_field(experiment, "rtol", DEFAULT_RTOL))
        atol = as_number(_field(experiment, "atol", DEFAULT_ATOL))
        if rtol is None or atol is None:
            return None
        for number in experiment_numbers:
            own_rtol, own_atol = as_number(_field(number, "rtol")), as_number(_field(number, "atol"))
            if own_rtol is not None and own_atol is not None:
                ratio = _number_ratio(number, own_rtol, own_atol)
            else:
                ratio = _number_ratio(number, rtol, atol)
            if ratio is None:
                return None
            largest = max(largest, ratio)
    return largest


def attempt_tolerance_ratio(
    *,
    done: bool,
    reported_score: SampleScore | Mapping | None,
    reported_passed: bool | None,
    reexecution_score: SampleScore | Mapping | None,
    reexecution_passed: bool | None,
    passed: bool | None,
) -> float | None:
    """The tolerance ratio of an attempt's leaderboard verdict (see `tolerance_ratio`), from the
    attempt's stored verdict fields.

    The verdict is the leaderboard's: once re-executed (`reexecution_passed` set), `passed`, which
    needs the reported answer and the re-run to pass, so the ratio is the larger of the two scores'
    ratios (None if either is); until then the reported verdict and the reported score's ratio.
    None for an attempt that is not done (its verdict does not count), and for a verdict that
    failed for a reason that is not about numbers (the scores pass but the attempt does not), so
    that the ratio is <= 1 exactly when the verdict passes.
    """
    if not done:
        return None
    reexecuted = reexecution_passed is not None
    verdict = bool(passed) if reexecuted else bool(reported_passed)
    ratios = [tolerance_ratio(reported_score)]
    if reexecuted:
        ratios.append(tolerance_ratio(reexecution_score))
    known = [ratio for ratio in ratios if ratio is not None]
    if len(known) < len(ratios):
        return None
    ratio = max(known)
    if not verdict and ratio <= 1:
        return None
    return ratio
