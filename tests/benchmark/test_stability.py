"""Gold stability arithmetic: spreads over repeated runs, the unstable rule, widened tolerances, drift."""
import math

import pytest

from runs.benchmark.scoring import score_experiment, score_sample
from runs.benchmark.stability import (
    StabilityError,
    drift_rows,
    is_unstable,
    largest_relative_spread,
    number_spreads,
    spread_in_tolerances,
    widened_tolerances,
)
from runs.benchmark.tolerance_ratios import tolerance_ratio


def test_spreads_are_the_smallest_and_largest_value_of_every_flattened_number():
    runs = [
        {"acc": 0.9, "curve": [1.0, 2.0], "name": "adam"},
        {"acc": 0.8, "curve": [1.0, 2.5], "name": "adam"},
        {"acc": 0.95, "curve": [1.0, 1.5], "name": "adam"},
    ]
    assert number_spreads(runs) == {
        "acc": {"min": 0.8, "max": 0.95},
        "curve[0]": {"min": 1.0, "max": 1.0},
        "curve[1]": {"min": 1.5, "max": 2.5},
    }


@pytest.mark.parametrize(
    "runs, message",
    [
        ([{"a": 1.0}, {"a": 1.0, "b": 2.0}], "run 1 and run 2 printed different keys: ['b']"),
        ([{"a": 1.0}, {"a": 1.0}, {"c": 1.0}], "run 1 and run 3 printed different keys: ['a', 'c']"),
        ([{"a": "x"}, {"a": "y"}], "a: not a finite number in every run, and the runs differ: ['x', 'y']"),
        ([{"a": 1.0}, {"a": "nan"}], "a: not a finite number in every run"),
        ([], "no results to compare"),
    ],
)
def test_runs_that_cannot_be_compared_are_an_error(runs, message):
    with pytest.raises(StabilityError, match=message.replace("[", r"\[").replace("]", r"\]")):
        number_spreads(runs)


def test_unstable_when_a_spread_exceeds_half_the_tolerance():
    gold = {"a": 100.0, "b": 1.0}
    # Tolerance of a: 0.05 * 100 + 0 = 5; a spread of 2.5 is exactly half of it: still stable.
    assert spread_in_tolerances(gold, {"a": {"min": 99.0, "max": 101.5}}, 0.05, 0.0) == 0.5
    assert not is_unstable(gold, {"a": {"min": 99.0, "max": 101.5}}, 0.05, 0.0)
    assert is_unstable(gold, {"a": {"min": 99.0, "max": 101.6}, "b": {"min": 1.0, "max": 1.0}}, 0.05, 0.0)
    assert spread_in_tolerances(gold, {"a": {"min": 100.0, "max": 100.0}}, 0.05, 0.0) == 0.0
    # Gold 0 with atol 0: no tolerance at all, so any spread is infinitely many of them.
    assert spread_in_tolerances({"z": 0.0}, {"z": {"min": 0.0, "max": 1e-12}}, 0.05, 0.0) == math.inf
    assert largest_relative_spread(gold, {"a": {"min": 99.0, "max": 101.0}, "b": {"min": 0.9, "max": 1.0}}) == pytest.approx(0.1)
    assert largest_relative_spread({"z": 0.0}, {"z": {"min": -0.5, "max": 0.5}}) == 1.0


@pytest.mark.parametrize(
    "gold, spreads, rtol, atol",
    [
        ({"a": 100.0}, {"a": {"min": 80.0, "max": 130.0}}, 0.05, 1e-8),
        ({"a": -2.0, "b": 3.0}, {"a": {"min": -2.5, "max": -1.9}, "b": {"min": 2.9, "max": 3.1}}, 0.05, 0.01),
        ({"a": 0.1}, {"a": {"min": 0.1, "max": 0.3000000000000001}}, 0.0, 0.0),
        ({"a": 7.123456789}, {"a": {"min": 7.0, "max": 7.123456789}}, 0.05, 1e-8),
    ],
)
def test_widened_tolerances_are_the_smallest_that_pass_every_observed_value(gold, spreads, rtol, atol):
    widened = widened_tolerances(gold, spreads, rtol, atol)
    for key, spread in spreads.items():
        for observed in (spread["min"], spread["max"]):
            assert score_experiment(gold=gold, predicted={**gold, key: observed}, rtol=rtol, atol=atol,
                                    number_tolerances=widened).passed
    for key, (key_rtol, key_atol) in widened.items():
        assert key_rtol > rtol and key_atol == atol
        smaller = {**widened, key: (math.nextafter(key_rtol, 0), atol)}  # the smallest: one step less fails a value
        assert not all(
            score_experiment(gold=gold, predicted={**gold, key: observed}, rtol=rtol, atol=atol,
                             number_tolerances=smaller).passed
            for observed in (spreads[key]["min"], spreads[key]["max"])
        )


def test_only_the_noisy_numbers_are_widened_and_a_gold_of_zero_widens_its_atol():
    assert widened_tolerances({"a": 100.0}, {"a": {"min": 99.0, "max": 101.0}}, 0.05, 1e-8) == {}
    gold = {"z": 0.0, "a": 10.0, "runtime": 10.0, "acc": 0.9}
    spreads = {"z": {"min": -0.3, "max": 0.2}, "a": {"min": 10.0, "max": 10.0}, "runtime": {"min": 5.0, "max": 15.0},
               "acc": {"min": 0.9, "max": 0.9}}
    widened = widened_tolerances(gold, spreads, 0.05, 1e-8)
    assert widened == {"z": (0.05, 0.3), "runtime": (pytest.approx(0.5), 1e-8)}
    # One noisy number loosens nothing else: a wrong accuracy still fails, a wrong a still fails.
    noisy_but_right = {"z": 0.25, "a": 10.0, "runtime": 14.0, "acc": 0.9}
    assert score_experiment(gold=gold, predicted=noisy_but_right, number_tolerances=widened).passed
    assert not score_experiment(gold=gold, predicted={**noisy_but_right, "acc": 0.5}, number_tolerances=widened).passed
    assert not score_experiment(gold=gold, predicted={**noisy_but_right, "a": 0.009}, number_tolerances=widened).passed
    score = score_experiment(gold=gold, predicted=noisy_but_right, number_tolerances=widened).to_dict()
    own = {number["key"]: (number.get("rtol"), number.get("atol")) for number in score["numbers"]}
    assert own["acc"] == (None, None) and own["z"] == (0.05, 0.3)
    # The tolerance curves read each number's own tolerance from the stored score.
    sample = score_sample(experiments=[("Experiment 1", gold, 0.05, 1e-8, widened)], answer=noisy_but_right)
    assert sample.passed and tolerance_ratio(sample.to_dict()) == pytest.approx(0.25 / 0.3)


def test_drift_rows_compare_every_number_with_the_farthest_value_of_the_runs():
    stored = {"acc": 0.9, "loss": 2.0, "zero": 0.0, "gone": 1.0, "name": "adam"}
    runs = [
        {"acc": 0.9, "loss": 2.05, "zero": 0.0, "name": "adam", "new": 3.0},
        {"acc": 0.9, "loss": 2.5, "zero": 0.0, "name": "adam", "new": 3.0},
    ]
    rows = {row.key: row for row in drift_rows(stored, runs, 0.05, 1e-8)}
    assert list(rows) == ["acc", "loss", "zero", "gone", "name", "new"]
    assert (rows["acc"].now, rows["acc"].relative_difference, rows["acc"].within_tolerance) == (0.9, 0.0, True)
    assert (rows["loss"].now, rows["loss"].relative_difference, rows["loss"].within_tolerance) == (2.5, 0.25, False)
    assert rows["zero"].within_tolerance and rows["zero"].relative_difference == 0.0
    assert (rows["gone"].stored, rows["gone"].now, rows["gone"].within_tolerance) == (1.0, None, False)
    assert rows["name"].within_tolerance and rows["name"].stored is None
    # A key only the new runs print is not scored (scoring reads the stored gold's keys): not drift.
    assert (rows["new"].stored, rows["new"].now, rows["new"].within_tolerance, rows["new"].new_key) == (None, 3.0, True, True)
    assert not any(row.new_key for key, row in rows.items() if key != "new")
    assert drift_rows({"z": 0.0}, [{"z": 1e-3}], 0.05, 1e-8)[0].relative_difference == math.inf


def test_a_number_printed_as_nan_in_every_run_is_the_same_in_every_run():
    nan = float("nan")
    runs = [{"acc": 0.9, "loss": nan}, {"acc": 0.91, "loss": nan}, {"acc": 0.9, "loss": nan}]
    assert number_spreads(runs) == {"acc": {"min": 0.9, "max": 0.91}}
    with pytest.raises(StabilityError, match=r"loss: not a finite number in every run, and the runs differ: \[nan, 1.0\]"):
        number_spreads([{"loss": nan}, {"loss": 1.0}])
    # Stored gold holds NaN as "NaN" (strict JSON has none); a run printing NaN again has not drifted.
    for stored in ({"loss": nan}, {"loss": "NaN"}):
        (row,) = drift_rows(stored, [{"loss": nan}, {"loss": nan}], 0.05, 1e-8)
        assert row.within_tolerance and not row.new_key
    assert not drift_rows({"loss": "NaN"}, [{"loss": nan}, {"loss": 1.0}], 0.05, 1e-8)[0].within_tolerance
