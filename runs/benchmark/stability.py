"""How stable an experiment's gold numbers are over repeated runs, and how far they drift later.

`make_gold --repeats N` runs each experiment's gold code N times (a fresh sandbox each) and keeps,
for every number (flattened key, as scoring sees it), the smallest and largest value printed: its
*spread*. An experiment is *unstable* when some number's spread is more than half its tolerance
(`rtol * |gold| + atol`, the scoring rule): then a correct implementation could fail by noise
alone, and the suite's policy either widens its noisy numbers' tolerances (`widened_tolerances`) or leaves it out
of scoring. `make_gold --check` compares a new run with the stored gold (`drift_rows`).

No Django here: runs.suites and runs.evaluation call these with an experiment's stored values.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from runs.benchmark.scoring import as_number, flatten_numbers

# An experiment is unstable when a number's gold runs differ by more than this share of its tolerance.
UNSTABLE_FRACTION = 0.5

Spreads = dict[str, dict[str, float]]  # flattened key -> {"min": ..., "max": ...}
NumberTolerances = dict[str, tuple[float, float]]  # flattened key -> (rtol, atol) replacing the experiment's


class StabilityError(ValueError):
    """Repeated gold runs that cannot be compared: different keys, or different non-numeric values."""


def _finite_number(value: Any) -> float | None:
    number = as_number(value)
    return number if number is not None and math.isfinite(number) else None


def _same_leaf(first: Any, second: Any) -> bool:
    """Whether two printed leaves are the same; NaN is the same as NaN (also spelled "NaN", as
    stored gold holds it), though `nan != nan`: a number that is NaN in every run has not changed."""
    if first == second:
        return True
    first_number, second_number = as_number(first), as_number(second)
    return first_number is not None and second_number is not None and math.isnan(first_number) and math.isnan(second_number)


def number_spreads(results: Sequence[Mapping]) -> Spreads:
    """The smallest and largest value of every number over repeated runs' results.

    Every run must print the same keys (StabilityError otherwise). Leaves that are not finite
    numbers (a string, a bool, NaN) have no spread: they must be identical in every run, and are
    left out of the spreads.
    """
    if not results:
        raise StabilityError("no results to compare")
    flat = [flatten_numbers(result) for result in results]
    keys = set(flat[0])
    for index, other in enumerate(flat[1:], start=2):
        if set(other) != keys:
            raise StabilityError(
                f"run 1 and run {index} printed different keys: {sorted(keys ^ set(other))}"
            )
    spreads: Spreads = {}
    for key in flat[0]:
        values = [_finite_number(run[key]) for run in flat]
        finite = [value for value in values if value is not None]
        if len(finite) < len(values):
            raw = [run[key] for run in flat]
            if not all(_same_leaf(item, raw[0]) for item in raw[1:]):
                raise StabilityError(f"{key or 'the result'}: not a finite number in every run, and the runs differ: {raw!r}")
            continue
        spreads[key] = {"min": min(finite), "max": max(finite)}
    return spreads


def number_tolerance(gold: float, rtol: float, atol: float) -> float:
    """How far a reported number may be from `gold` and pass (runs.benchmark.scoring's rule)."""
    return rtol * abs(gold) + atol


def _gold_numbers(gold: Mapping, spreads: Mapping) -> list[tuple[str, float, float, float]]:
    """(key, gold value, min, max) for each key of `spreads` whose gold value is a finite number."""
    flat = flatten_numbers(gold)
    rows = []
    for key, spread in spreads.items():
        value = _finite_number(flat.get(key))
        if value is not None:
            rows.append((key, value, float(spread["min"]), float(spread["max"])))
    return rows


def spread_in_tolerances(gold: Mapping, spreads: Mapping, rtol: float, atol: float) -> float:
    """The largest number spread (max - min) in units of that number's tolerance; 0 for no spread.
    A spread where the tolerance is 0 (gold 0 and atol 0) is infinitely many tolerances."""
    largest = 0.0
    for _, value, low, high in _gold_numbers(gold, spreads):
        width = high - low
        if width <= 0:
            continue
        tolerance = number_tolerance(value, rtol, atol)
        largest = max(largest, width / tolerance if tolerance > 0 else math.inf)
    return largest


def is_unstable(gold: Mapping, spreads: Mapping, rtol: float, atol: float) -> bool:
    return spread_in_tolerances(gold, spreads, rtol, atol) > UNSTABLE_FRACTION


def largest_relative_spread(gold: Mapping, spreads: Mapping) -> float:
    """The summary kept as Experiment.gold_spread: the largest (max - min) / |gold| over the numbers
    (the absolute width where gold is 0)."""
    largest = 0.0
    for _, value, low, high in _gold_numbers(gold, spreads):
        width = high - low
        largest = max(largest, width / abs(value) if value else width)
    return largest


def _covers(value: float, gold: float, rtol: float, atol: float) -> bool:
    return abs(value - gold) <= rtol * abs(gold) + atol


def widened_tolerances(gold: Mapping, spreads: Mapping, rtol: float, atol: float) -> NumberTolerances:
    """Per number that needs it, the smallest (rtol', atol') >= (rtol, atol) under which every value
    its gold runs printed passes; numbers already covered are left out (they keep (rtol, atol)).

    Per number, not per experiment: one noisy number (a timing, a near-zero loss) must not loosen
    the experiment's other numbers. rtol' is the smallest relative tolerance with
    `|v - gold| <= rtol' * |gold| + atol` for the number's minimum and maximum. No relative tolerance
    covers a gold of 0, so there the absolute tolerance is widened to the largest |v| instead.
    """
    widened: NumberTolerances = {}
    for key, value, low, high in _gold_numbers(gold, spreads):
        key_rtol, key_atol = rtol, atol
        for observed in (low, high):
            if _covers(observed, value, key_rtol, key_atol):
                continue
            if value == 0:
                key_atol = abs(observed)
                continue
            candidate = (abs(observed - value) - atol) / abs(value)
            # Division rounds: step up until the scoring rule itself accepts the value.
            while not _covers(observed, value, candidate, atol):
                candidate = math.nextafter(candidate, math.inf)
            key_rtol = max(key_rtol, candidate)
        if (key_rtol, key_atol) != (rtol, atol):
            widened[key] = (key_rtol, key_atol)
    return widened


@dataclass(frozen=True)
class DriftRow:
    """One number of a stored gold result against what the gold code prints now.

    `now` is the run's value farthest from the stored one (over the repeats of the check); None
    when a run did not print the key (and `stored` None when the stored gold lacks it).
    `relative_difference` is |now - stored| / |stored| (inf when stored is 0 and now is not).
    """

    key: str
    stored: float | None
    now: float | None
    relative_difference: float | None
    within_tolerance: bool
    # A key the gold code prints now but the stored gold lacks: scoring only reads the stored gold's
    # keys, so it is not drift (within_tolerance is True), only reported.
    new_key: bool = False


def drift_rows(
    stored: Mapping, runs: Sequence[Mapping], rtol: float, atol: float, number_tolerances: NumberTolerances | None = None
) -> list[DriftRow]:
    """Per number, the stored gold against `runs` (each a printed result), in the stored order, each
    judged with the tolerance it is scored with (`number_tolerances` for the widened ones)."""
    stored_flat = flatten_numbers(stored)
    run_flats = [flatten_numbers(run) for run in runs]
    keys = list(stored_flat) + sorted({key for flat in run_flats for key in flat} - set(stored_flat))
    rows = []
    for key in keys:
        gold = _finite_number(stored_flat.get(key))
        values = [_finite_number(flat.get(key)) for flat in run_flats]
        finite = [value for value in values if value is not None]
        if gold is None or not values or len(finite) < len(values):
            # Missing on one side, or not a number: only an identical leaf in every run is no drift,
            # and a key only the new runs print is not scored (so not drift either).
            new_key = key not in stored_flat
            same = key in stored_flat and bool(run_flats) and all(
                key in flat and _same_leaf(flat[key], stored_flat[key]) for flat in run_flats
            )
            now = finite[0] if values and len(finite) == len(values) else None
            rows.append(DriftRow(key=key, stored=gold, now=now, relative_difference=None,
                                 within_tolerance=same or new_key, new_key=new_key))
            continue
        now = max(finite, key=lambda value: abs(value - gold))
        difference = abs(now - gold)
        relative = difference / abs(gold) if gold else (0.0 if difference == 0 else math.inf)
        rows.append(DriftRow(
            key=key, stored=gold, now=now, relative_difference=relative,
            within_tolerance=difference <= number_tolerance(gold, *(number_tolerances or {}).get(key, (rtol, atol))),
        ))
    return rows
