import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from runs.benchmark.statistics import Interval, bootstrap_ci, paired_bootstrap, pass_at_k

# --- pass@k ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, c, k, expected",
    [
        (5, 1, 1, 0.2),
        (5, 1, 5, 1.0),
        (10, 3, 2, 1 - 21 / 45),  # 1 - C(7,2)/C(10,2)
        (10, 0, 3, 0.0),
        (10, 10, 3, 1.0),
        (1, 1, 1, 1.0),
        (1, 0, 1, 0.0),
        (4, 2, 2, 1 - 1 / 6),  # 1 - C(2,2)/C(4,2)
    ],
)
def test_pass_at_k_hand_checked(n, c, k, expected):
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_1_is_the_pass_rate():
    assert pass_at_k(8, 3, 1) == pytest.approx(3 / 8)


@given(st.integers(1, 200).flatmap(lambda n: st.tuples(st.just(n), st.integers(0, n), st.integers(1, n))))
def test_pass_at_k_matches_the_closed_form(args):
    n, c, k = args
    expected = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-9)
    assert 0.0 <= pass_at_k(n, c, k) <= 1.0


def test_pass_at_k_large_n_is_stable():
    # C(1000, 500) overflows a float; the product form does not need it.
    assert pass_at_k(1000, 1, 500) == pytest.approx(0.5)


@pytest.mark.parametrize(
    "n, c, k, message",
    [
        (5, 1, 6, "k must be between 1 and"),
        (5, 1, 0, "k must be between 1 and"),
        (5, 6, 1, "passing attempts"),
        (5, -1, 1, "passing attempts"),
        (0, 0, 1, "at least one attempt"),
        (5.0, 1, 1, "integer"),
    ],
)
def test_pass_at_k_rejects_bad_arguments(n, c, k, message):
    with pytest.raises(ValueError, match=message):
        pass_at_k(n, c, k)


# --- bootstrap_ci -------------------------------------------------------------------------------------


def test_bootstrap_is_deterministic_for_a_seed():
    values = [0.13, 0.71, 0.42, 0.97, 0.05, 0.66, 0.31, 0.88]
    assert bootstrap_ci(values, seed=3) == bootstrap_ci(values, seed=3)
    # With pass/fail scores the quantiles fall on a coarse grid and may coincide across seeds.
    assert bootstrap_ci(values, seed=3) != bootstrap_ci(values, seed=4)


def test_bootstrap_contains_the_mean():
    values = [1, 0, 0, 1, 0, 0, 0, 1, 0, 0]
    interval = bootstrap_ci(values)
    assert interval.estimate == pytest.approx(0.3)
    assert interval.low < 0.3 < interval.high
    assert interval.n == 10
    assert 0.0 <= interval.low and interval.high <= 1.0


def test_bootstrap_interval_is_close_to_the_normal_approximation():
    # 200 samples, 30% passing: the standard error is sqrt(.3 * .7 / 200) = 0.0324, so the 95%
    # interval is about 0.3 +- 0.0635.
    values = [1.0] * 60 + [0.0] * 140
    interval = bootstrap_ci(values)
    assert interval.low == pytest.approx(0.3 - 0.0635, abs=0.01)
    assert interval.high == pytest.approx(0.3 + 0.0635, abs=0.01)


def test_bootstrap_narrows_with_more_samples():
    small = bootstrap_ci([1, 0, 0, 1, 0] * 4)
    large = bootstrap_ci([1, 0, 0, 1, 0] * 80)
    assert small.estimate == large.estimate == pytest.approx(0.4)
    assert large.high - large.low < (small.high - small.low) / 2


def test_bootstrap_higher_confidence_is_wider():
    values = [1, 0, 0, 1, 0, 1, 1, 0, 0, 0] * 3
    narrow = bootstrap_ci(values, confidence=0.5)
    wide = bootstrap_ci(values, confidence=0.99)
    assert wide.low < narrow.low < narrow.high < wide.high


def test_bootstrap_empty_input():
    interval = bootstrap_ci([])
    assert interval.n == 0
    assert math.isnan(interval.estimate) and math.isnan(interval.low) and math.isnan(interval.high)


def test_bootstrap_single_value_is_degenerate():
    assert bootstrap_ci([0.4]) == Interval(0.4, 0.4, 0.4, 1)


def test_bootstrap_constant_values_are_degenerate():
    interval = bootstrap_ci([1.0] * 7)
    assert (interval.estimate, interval.low, interval.high) == (1.0, 1.0, 1.0)


def test_bootstrap_accepts_numpy_arrays_and_generators():
    values = np.array([0.0, 1.0, 1.0, 0.0])
    assert bootstrap_ci(values) == bootstrap_ci(v for v in values.tolist())


def test_bootstrap_large_input_is_chunked_and_fast():
    values = np.random.default_rng(1).integers(0, 2, size=5_000).astype(float)
    interval = bootstrap_ci(values, resamples=2_000)
    assert interval.low < interval.estimate < interval.high


@pytest.mark.parametrize("values", [[0.5, 1.5], [50.0, 100.0], [0.5, math.nan], [-0.1]])
def test_bootstrap_rejects_values_outside_unit_interval(values):
    with pytest.raises(ValueError):
        bootstrap_ci(values)


@pytest.mark.parametrize("kwargs", [{"confidence": 1.0}, {"confidence": 0}, {"resamples": 0}])
def test_bootstrap_rejects_bad_settings(kwargs):
    with pytest.raises(ValueError):
        bootstrap_ci([0.0, 1.0], **kwargs)


# --- paired_bootstrap ---------------------------------------------------------------------------------


def test_paired_identical_systems():
    scores = {f"s{i}": float(i % 3 == 0) for i in range(30)}
    result = paired_bootstrap(scores, dict(scores))
    assert result.difference == 0.0
    assert result.low == result.high == 0.0
    assert result.p_value == pytest.approx(1.0)
    assert result.shared_samples == 30


def test_paired_clearly_different_systems():
    a = {f"s{i}": 1.0 if i % 10 else 0.0 for i in range(50)}  # 90%
    b = {f"s{i}": 1.0 if i % 10 == 0 else 0.0 for i in range(50)}  # 10%
    result = paired_bootstrap(a, b)
    assert result.difference == pytest.approx(0.8)
    assert 0.6 < result.low < 0.8 < result.high <= 1.0
    assert result.p_value < 0.001
    reverse = paired_bootstrap(b, a)
    assert reverse.difference == pytest.approx(-0.8)
    assert reverse.p_value < 0.001


def test_paired_small_noisy_difference_is_not_significant():
    a = {i: float(i % 2) for i in range(20)}
    b = dict(a)
    b[1] = 0.0  # one sample differs
    result = paired_bootstrap(a, b)
    assert result.difference == pytest.approx(0.05)
    assert result.low <= 0.0 <= result.high
    assert result.p_value > 0.2


def test_paired_uses_only_shared_samples():
    a = {"x": 1.0, "y": 0.0, "only_a": 1.0}
    b = {"x": 0.0, "y": 0.0, "only_b": 1.0}
    result = paired_bootstrap(a, b)
    assert result.shared_samples == 2
    assert result.difference == pytest.approx(0.5)  # (1 - 0 + 0 - 0) / 2; only_a / only_b ignored


def test_paired_is_deterministic_regardless_of_key_order():
    a = {f"s{i}": float(i % 2) for i in range(25)}
    b = {f"s{i}": float(i % 3 == 0) for i in range(25)}
    reordered_a = dict(reversed(list(a.items())))
    assert paired_bootstrap(a, b, seed=7) == paired_bootstrap(reordered_a, b, seed=7)


def test_paired_without_shared_samples_raises():
    with pytest.raises(ValueError, match="share no sample"):
        paired_bootstrap({"a": 1.0}, {"b": 1.0})
