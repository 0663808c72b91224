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

Reading the answer: `runs.benchmark.answers`; how far a verdict is from passing, in units of the
tolerance: `runs.benchmark.tolerance_ratios`.

No Django here: this module is imported by the agent harness, the importers and the leaderboard.
"""
from __future__ import annotations

import math
import numbers
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from runs.benchmark.answers import ParsedAnswer, describe_value, parse_answer

DEFAULT_RTOL = 0.05
# A purely relative rule cannot be met when the gold value is exactly 0: any non-zero prediction,
# even 1e-17 of float round-off, is infinitely far off in relative terms (and upstream divided by
# zero). The absolute term forgives differences at round-off level. Keep it tiny: some gold metrics
# are themselves around 1e-7, where a larger atol would swamp the relative tolerance.
DEFAULT_ATOL = 1e-8


class ScoringMode(StrEnum):
    STRICT = "strict"  # every number within its tolerance: the leaderboard's rule
    UPSTREAM = "upstream"  # the mean relative error within rtol, as upstream (with the sign and zero fixes)


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
        score.error = f"the gold result is {describe_value(gold)}, expected an object"
        return score
    gold_flat = flatten_numbers(gold)
    if not gold_flat:
        # Passing vacuously would count an experiment nobody can fail.
        score.error = "the gold result has no numbers to compare"
        return score

    pred_flat, score.error = _reported_numbers(predicted)
    score.numbers = [
        _score_gold_number(key, gold_value, pred_flat, rtol, atol, number_tolerances, scoring_mode)
        for key, gold_value in gold_flat.items()
    ]
    _decide(score)
    return score


def _reported_numbers(predicted: Mapping | None) -> tuple[dict[str, Any], str | None]:
    """The reported result flattened (see `flatten_numbers`), and the error when it is no object."""
    if predicted is None:
        return {}, "no result for this experiment"
    if not isinstance(predicted, Mapping):
        return {}, f"the result is {describe_value(predicted)}, expected an object"
    return flatten_numbers(predicted), None


def _score_gold_number(
    key: str, gold_value: Any, pred_flat: dict, rtol: float, atol: float,
    number_tolerances: Mapping[str, tuple[float, float]] | None, mode: ScoringMode,
) -> NumberScore:
    """One gold number scored with its own tolerance if it has one, else the experiment's."""
    own = number_tolerances.get(key) if number_tolerances else None
    key_rtol, key_atol = (float(own[0]), float(own[1])) if own else (rtol, atol)
    number = _score_number(key, gold_value, pred_flat.get(key, _MISSING), pred_flat, key_rtol, key_atol, mode)
    if own:
        number.rtol, number.atol = key_rtol, key_atol
    return number


def _decide(score: ExperimentScore) -> None:
    """Set the experiment's verdict from its numbers, by its mode's rule."""
    comparable = all(number.reason in (NumberReason.OK, NumberReason.OUTSIDE) for number in score.numbers)
    if score.mode == ScoringMode.STRICT:
        score.passed = score.error is None and all(number.passed for number in score.numbers)
    elif comparable and score.error is None:
        # Every number was compared (reason OK or OUTSIDE), so each has both sides.
        contributions = [
            _upstream_contribution(n.predicted, n.gold, score.atol)
            for n in score.numbers if n.predicted is not None and n.gold is not None
        ]
        # fsum of a list holding inf is inf, so one infinitely wrong zero-gold number fails the mean.
        score.mean_relative_error = math.fsum(contributions) / len(contributions)
        score.passed = score.mean_relative_error <= score.rtol


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
    specs = [_experiment_spec(spec) for spec in experiments]
    parsed = answer if isinstance(answer, ParsedAnswer) else parse_answer(answer)
    if not specs:
        return SampleScore(passed=False, error="the sample has no experiments", parse_method=parsed.method)
    if parsed.value is None:
        error = f"could not parse the answer: {parsed.error}"
        scores = [_score_spec(spec, None, mode, error=error) for spec in specs]
        return SampleScore(passed=False, experiments=scores, error=error, parse_method=parsed.method)

    answer_value = parsed.value
    keys = _answer_keys(specs, answer_value)
    scores = [_score_entry(spec, index, key, answer_value, mode) for index, (spec, key) in enumerate(zip(specs, keys))]
    passed = all(experiment.passed for experiment in scores)
    return SampleScore(passed=passed, experiments=scores, parse_method=parsed.method)


def _experiment_spec(spec: tuple) -> tuple:
    """(experiment_id, gold, rtol, atol, number_tolerances) with the default tolerances filled in."""
    experiment_id, gold, rtol, atol, *own = spec
    return (
        experiment_id, gold, DEFAULT_RTOL if rtol is None else rtol, DEFAULT_ATOL if atol is None else atol,
        own[0] if own else None,
    )


def _score_spec(spec: tuple, predicted: Any, mode: str, *, key: object = None, error: str | None = None) -> ExperimentScore:
    """`score_experiment` for one filled-in spec; `error`, when given, fails the experiment with it."""
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


def _answer_keys(specs: list[tuple], answer_value: dict) -> list[Any]:
    """For each experiment, the answer key holding its result, _MISSING, or None: the answer itself."""
    if len(specs) == 1 and isinstance(specs[0][1], Mapping) and any(key in answer_value for key in specs[0][1]):
        return [None]
    keys = _match_experiments([spec[0] for spec in specs], answer_value)
    if len(specs) == 1 and keys[0] is _MISSING:
        return [None]
    return keys


def _score_entry(spec: tuple, index: int, key: Any, answer_value: dict, mode: str) -> ExperimentScore:
    """The experiment at `index` scored against the answer's entry under `key` (see `_answer_keys`)."""
    if key is None:
        return _score_spec(spec, answer_value, mode)
    if key is _MISSING:
        error = (
            f"the answer has no entry for experiment {spec[0]!r} "
            f"(expected a key such as 'Experiment {index + 1}' or '{spec[0]}')"
        )
        return _score_spec(spec, None, mode, error=error)
    result = answer_value[key]
    if isinstance(result, str):
        nested = parse_answer(result)
        if nested.value is None:
            error = f"the entry {key!r} could not be parsed: {nested.error}"
            return _score_spec(spec, None, mode, key=key, error=error)
        result = nested.value
    return _score_spec(spec, result, mode, key=key)
