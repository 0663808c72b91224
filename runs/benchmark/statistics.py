"""Pass@k and bootstrap confidence intervals for the leaderboard.

The unit of resampling is the sample (a paper with a set of masked functions): attempts on the same
sample are not independent, so intervals come from resampling samples, never attempts.

numpy only; no Django and no pandas, so the agent harness and scripts can use it too.
"""
from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

# Each bootstrap draws resamples x n indices at once; past this many they are drawn in chunks of
# resamples so that memory stays bounded (10,000 resamples of 5,000 samples would be 400 MB).
_MAX_INDICES_PER_CHUNK = 2_000_000


def _check_count(name: str, value: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise ValueError(f"{name} must be an integer, got {value!r}")
    return int(value)


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased estimate of pass@k from n attempts of which c passed: 1 - C(n-c, k) / C(n, k).

    Computed as 1 - prod_{i=n-c+1}^{n} (1 - k/i) (Chen et al. 2021, "Evaluating Large Language Models
    Trained on Code"), which never forms the huge binomial coefficients. Raises ValueError unless
    0 <= c <= n and 1 <= k <= n.
    """
    n, c, k = _check_count("n", n), _check_count("c", c), _check_count("k", k)
    if n < 1:
        raise ValueError(f"pass@k needs at least one attempt, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"the number of passing attempts must be between 0 and n={n}, got c={c}")
    if not 1 <= k <= n:
        raise ValueError(f"k must be between 1 and the number of attempts n={n}, got k={k}")
    if n - c < k:
        return 1.0  # every draw of k attempts contains a passing one
    product = 1.0
    for i in range(n - c + 1, n + 1):
        product *= 1.0 - k / i
    return 1.0 - product


@dataclass
class Interval:
    """A point estimate with a confidence interval over n samples (all nan when n is 0)."""

    estimate: float
    low: float
    high: float
    n: int
    confidence: float = 0.95


@dataclass
class PairedComparison:
    """Mean of a - b over the samples both systems have, its interval, and a two-sided p-value for
    "no difference" (see `paired_bootstrap`)."""

    difference: float
    low: float
    high: float
    p_value: float
    shared_samples: int
    confidence: float = 0.95


def _check_bootstrap_arguments(confidence: float, resamples: int) -> int:
    if not 0 < confidence < 1:
        raise ValueError(f"confidence must be strictly between 0 and 1, got {confidence!r}")
    resamples = _check_count("resamples", resamples)
    if resamples < 1:
        raise ValueError(f"resamples must be at least 1, got {resamples}")
    return resamples


def _as_scores(values: Iterable[float], what: str) -> np.ndarray:
    array = np.asarray(list(values), dtype=float)
    if array.ndim != 1:
        raise ValueError(f"{what} must be a flat sequence of numbers")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{what} contain nan or infinite values")
    if np.any((array < 0) | (array > 1)):
        # Catches percentages (0..100) passed where fractions are expected.
        raise ValueError(f"{what} must be per-sample scores between 0 and 1")
    return array


def _bootstrap_means(values: np.ndarray, resamples: int, rng: np.random.Generator) -> np.ndarray:
    """Means of `resamples` resamples (with replacement) of `values`, drawn as index matrices."""
    size = len(values)
    rows = max(1, _MAX_INDICES_PER_CHUNK // size)
    means = np.empty(resamples)
    for start in range(0, resamples, rows):  # a loop over chunks, each vectorised
        stop = min(start + rows, resamples)
        indices = rng.integers(0, size, size=(stop - start, size))
        means[start:stop] = values[indices].mean(axis=1)
    return means


def _percentiles(means: np.ndarray, confidence: float) -> tuple[float, float]:
    alpha = 1.0 - confidence
    low, high = np.quantile(means, [alpha / 2, 1 - alpha / 2])
    return float(low), float(high)


def bootstrap_ci(
    values: Sequence[float], *, confidence: float = 0.95, resamples: int = 10_000, seed: int = 0
) -> Interval:
    """Mean of per-sample scores in [0, 1] with a percentile bootstrap interval over samples.

    Deterministic for a given seed. No values gives an all-nan Interval with n=0; one value gives
    the degenerate interval [value, value]. Raises ValueError for values outside [0, 1] or nan.
    """
    resamples = _check_bootstrap_arguments(confidence, resamples)
    array = _as_scores(values, "values")
    if len(array) == 0:
        return Interval(math.nan, math.nan, math.nan, 0, confidence)
    estimate = float(array.mean())
    if len(array) == 1:
        return Interval(estimate, estimate, estimate, 1, confidence)
    means = _bootstrap_means(array, resamples, np.random.default_rng(seed))
    low, high = _percentiles(means, confidence)
    return Interval(estimate, low, high, len(array), confidence)


def _sorted_ids(ids: set) -> list:
    # Sample ids must come out in the same order in every process (set order of strings depends on
    # hash randomisation), or the same seed would give different intervals.
    try:
        return sorted(ids)
    except TypeError:
        return sorted(ids, key=repr)


def paired_bootstrap(
    a: Mapping[Hashable, float],
    b: Mapping[Hashable, float],
    *,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
) -> PairedComparison:
    """Compare two systems on the samples both have, resampling sample ids jointly.

    `difference` is mean(a - b) over shared samples, `low`/`high` its percentile bootstrap interval.
    `p_value` tests "no difference" two-sided by the shift method (Efron & Tibshirani 1993, 16.4):
    the bootstrap distribution of the mean difference, shifted to mean zero, stands in for its
    distribution under the null, and p is the share of resampled differences at least as far from
    the observed difference as the observed difference is from zero, computed as
    (1 + count) / (1 + resamples) so that it is never exactly 0. Identical systems give p = 1.

    Raises ValueError when the systems share no sample.
    """
    resamples = _check_bootstrap_arguments(confidence, resamples)
    shared = _sorted_ids(set(a) & set(b))
    if not shared:
        raise ValueError(
            f"the two systems share no sample ({len(a)} and {len(b)} samples); a paired comparison needs common ones"
        )
    scores_a = _as_scores((a[sample_id] for sample_id in shared), "scores of a")
    scores_b = _as_scores((b[sample_id] for sample_id in shared), "scores of b")
    # Resampling the per-sample differences is resampling sample ids jointly for both systems.
    differences = scores_a - scores_b
    observed = float(differences.mean())
    means = _bootstrap_means(differences, resamples, np.random.default_rng(seed))
    low, high = _percentiles(means, confidence)
    # A tiny tolerance keeps float noise in the means from deciding ties (identical systems).
    extreme = np.abs(means - observed) >= abs(observed) - 1e-12
    p_value = float((1 + np.count_nonzero(extreme)) / (1 + resamples))
    return PairedComparison(observed, low, high, p_value, len(shared), confidence)
