"""Tolerance sensitivity: how far a verdict is from passing, in units of the tolerance.

An attempt's tolerance ratio is <= 1 exactly when its verdict passes, and scaling every tolerance
by a factor f would make it pass exactly when the ratio is <= f; the leaderboard's tolerance curves
and near misses read it. Computed from scores as `runs.benchmark.scoring` makes them, or as stored.

No Django here.
"""
from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from runs.benchmark.scoring import DEFAULT_ATOL, DEFAULT_RTOL, NumberReason, SampleScore, ScoringMode, as_number

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
