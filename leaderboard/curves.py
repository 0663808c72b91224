"""A system's difficulty curve: its pass rate against n summarised as the n at which it crosses 50%
(n50) and its slope, with bootstrap intervals over samples. numpy only (no Django, no pandas).

The model is a logistic curve in n, pass rate(n) = 1 / (1 + exp(-(a + b n))), so n50 = -a / b and b is
the change of the log-odds of passing per masked function added (at n50 the pass rate falls by about
b / 4 per function). It is fitted by maximum likelihood with each *sample* weighing the same: a sample
whose c of m counted attempts passed contributes the fraction c / m with weight 1 (the quasi-binomial
or "fractional logit" likelihood of Papke and Wooldridge, 1996). Why not one Bernoulli per attempt:
a system's runs are pooled, so one sample may have 10 attempts and another 1, and a per-attempt fit
would let the first count ten times; the leaderboard's Pass@1 is the mean over samples of c / m,
so the curve weighs samples as the points it is drawn over do. When every sample has the same number of
attempts (one run, k each: the usual case) it is exactly the per-attempt Bernoulli maximum likelihood.
Its sufficient statistics are, per n, the number of samples and the sum of their c / m (= samples x
Pass@1): a two-parameter Newton (IRLS) fit on a handful of points.

Intervals come from the cluster bootstrap: the samples at each n are resampled with replacement (the
attempts of one sample are not independent, so the unit is the sample, as for Pass@1's interval),
FIT_RESAMPLES times with a fixed seed, all resamples fitted at once as arrays; the 2.5% and 97.5%
quantiles of n50 and b are the 95% interval. A bound is open (None) where the resampled curves reach
beyond what the observed n can say (no fall at all, a crossing beyond the range, or a jump with no
finite slope).

The fit is not determined (`CurveFit.determined` False, `CurveFit.reason` says why) when the system has
fewer than two n; when every sample passed, or none did (no curve to fit); when the pass rates are
separated (100% up to some n and 0% beyond, so the slope is infinite); when the fitted curve does not
fall (b >= 0); or when it crosses 50% beyond RANGE_FACTOR times the observed range of n past either end
(or below n = 0), which is extrapolation, reported as "beyond" that end rather than as a number.
"""
from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum

import numpy as np

FIT_RESAMPLES = 400
FIT_SEED = 0
CONFIDENCE = 0.95
# How far past the observed n a crossing may be and still be reported, in widths of the observed range.
RANGE_FACTOR = 1.0
_ITERATIONS = 50
_TOLERANCE = 1e-10
# A curve steeper than this (log-odds per function) is a jump: the Newton steps of a separated data set
# run away towards infinity, and a converged fit of real data is far below it.
_MAX_SLOPE = 30.0



class CurveStatus(StrEnum):
    """Whether a curve's n50 is determined, and why not (CurveFit.reason says it in words)."""

    FITTED = "fitted"
    ABOVE_RANGE = "above_range"
    BELOW_RANGE = "below_range"
    TOO_FEW_N = "too_few_n"
    NO_SPREAD = "no_spread"
    SEPARATED = "separated"
    NO_FALL = "no_fall"


@dataclass(frozen=True)
class CurveFit:
    """A system's fitted difficulty curve under one counting rule (see the module's docstring)."""

    status: CurveStatus
    n_values: tuple[int, ...] = ()
    samples: int = 0
    intercept: float | None = None  # a: log-odds of passing at n = 0
    slope: float | None = None  # b: log-odds per masked function
    slope_low: float | None = None
    slope_high: float | None = None
    n50: float | None = None
    n50_low: float | None = None
    n50_high: float | None = None
    beyond: float | None = None  # ABOVE_RANGE / BELOW_RANGE: the edge of the reportable range it crosses past
    resamples: int = 0

    @property
    def determined(self) -> bool:
        return self.status == CurveStatus.FITTED

    @property
    def has_curve(self) -> bool:
        """Whether there is a finite curve to draw (a fit that converged, determined or not)."""
        return self.intercept is not None and self.slope is not None

    @property
    def reason(self) -> str:
        """Why n50 is what it is, in a few words (shown where the number would be)."""
        n_text = ", ".join(str(n) for n in self.n_values)
        return {
            CurveStatus.FITTED: f"logistic fit over n = {n_text}",
            CurveStatus.ABOVE_RANGE: f"stays above 50% well past the largest n observed: crosses beyond n = {self.beyond:g}"
            if self.beyond is not None else "stays above 50% well past the largest n observed",
            CurveStatus.BELOW_RANGE: "already below 50% well before the smallest n observed",
            CurveStatus.TOO_FEW_N: "needs results at two or more n" + (f" (has n = {n_text} only)" if self.n_values else ""),
            CurveStatus.NO_SPREAD: "every sample passed, or none did: no curve to fit",
            CurveStatus.SEPARATED: "pass rate jumps from 100% to 0%: no finite slope",
            CurveStatus.NO_FALL: "the fitted pass rate does not fall as n grows",
        }.get(self.status, self.status)

    @property
    def label(self) -> str:
        """n50 as a cell shows it: the number, "> 9" / "< 0" beyond the range, or "—"."""
        if self.n50 is not None:
            return f"{self.n50:.1f}"
        if self.status == CurveStatus.ABOVE_RANGE and self.beyond is not None:
            return f"> {self.beyond:g}"
        if self.status == CurveStatus.BELOW_RANGE and self.beyond is not None:
            return f"< {self.beyond:g}"
        return "—"

    @property
    def fall_at_n50(self) -> float | None:
        """How much the pass rate falls per masked function where it crosses 50% (-b / 4), a fraction."""
        return -self.slope / 4 if self.slope is not None else None

    def pass_rate(self, n: float) -> float:
        return float(1 / (1 + np.exp(-(self.intercept + self.slope * n))))

    def curve_points(self, points: int = 41) -> tuple[list[float], list[float]]:
        """The fitted pass rate over the observed range of n, for drawing."""
        if not self.has_curve or not self.n_values:
            return [], []
        xs = np.linspace(min(self.n_values), max(self.n_values), points)
        ys = 1 / (1 + np.exp(-(self.intercept + self.slope * xs)))
        return [round(float(x), 4) for x in xs], [round(float(y), 6) for y in ys]

    def as_dict(self) -> dict:
        """As stored and exported (JSON), with its reason in words."""
        return {**asdict(self), "n_values": list(self.n_values), "determined": self.determined, "reason": self.reason}

    @classmethod
    def from_dict(cls, stored: dict) -> CurveFit:
        fields = {name: stored[name] for name in cls.__dataclass_fields__ if name in stored}
        return cls(**{**fields, "status": CurveStatus(fields["status"]), "n_values": tuple(fields.get("n_values", ()))})


def _newton(x: np.ndarray, successes: np.ndarray, trials: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Maximum likelihood logistic fits of successes / trials against x, one per row of `successes`
    (shape (B, K); x and trials: shape (K,)), by Newton's method on all rows at once. x is centred by
    the caller. Returns a, b and whether each converged to a finite slope. A row leaves the iteration
    once it converged, or once its slope passed _MAX_SLOPE (separated data, whose steps run away)."""
    rows = successes.shape[0]
    a, b = np.zeros(rows), np.zeros(rows)
    converged = np.zeros(rows, dtype=bool)
    active = np.arange(rows)
    for _ in range(_ITERATIONS):
        if not active.size:
            break
        eta = a[active, None] + b[active, None] * x[None, :]
        p = 1 / (1 + np.exp(-eta))
        residual = successes[active] - trials[None, :] * p
        weight = trials[None, :] * p * (1 - p)
        grad_a, grad_b = residual.sum(axis=1), (residual * x).sum(axis=1)
        h_aa, h_ab, h_bb = weight.sum(axis=1), (weight * x).sum(axis=1), (weight * x * x).sum(axis=1)
        det = h_aa * h_bb - h_ab * h_ab
        ok = det > 1e-300
        safe = np.where(ok, det, 1.0)
        step_a = np.where(ok, (h_bb * grad_a - h_ab * grad_b) / safe, 0.0)
        step_b = np.where(ok, (h_aa * grad_b - h_ab * grad_a) / safe, 0.0)
        a[active] += step_a
        b[active] += step_b
        done = ok & (np.abs(step_a) + np.abs(step_b) < _TOLERANCE * (1 + np.abs(a[active]) + np.abs(b[active])))
        converged[active[done]] = True
        active = active[~done & ok & (np.abs(b[active]) < _MAX_SLOPE)]
    finite = converged & (np.abs(b) < _MAX_SLOPE) & np.isfinite(a) & np.isfinite(b)
    return a, b, finite


def _separated(rates: np.ndarray) -> bool:
    """Whether pass rates by increasing n are 100% up to some n and 0% beyond it (or the reverse),
    with at most one n in between at any rate: then no finite slope maximises the likelihood."""
    ones, zeros = rates >= 1 - 1e-12, rates <= 1e-12
    count = len(rates)
    for boundary in range(count):
        before, after = slice(0, boundary), slice(boundary + 1, count)
        if (ones[before].all() and zeros[after].all()) or (zeros[before].all() and ones[after].all()):
            return True
    return False


def _quantiles(values: np.ndarray, low_edge: float, high_edge: float) -> tuple[float | None, float | None]:
    """The CONFIDENCE interval of `values` (±inf allowed: taken as order statistics, never interpolated);
    a bound that is infinite or past the edges of the reportable range is None (open)."""
    tail = (1 - CONFIDENCE) / 2
    low, high = np.quantile(values, [tail, 1 - tail], method="inverted_cdf")

    def bound(value) -> float | None:
        value = float(value)
        return value if np.isfinite(value) and low_edge <= value <= high_edge else None

    return bound(low), bound(high)


def curve_fit(
    shares: Mapping[int, Sequence[tuple[int, int, int]]], *, resamples: int = FIT_RESAMPLES, seed: int = FIT_SEED
) -> CurveFit:
    """The difficulty curve of one system from, per n, its samples as (c passes, m counted attempts,
    how many samples) triples (m >= 1), as leaderboard.selectors gathers them for Pass@1.

    Memoised on the triples in canonical order: the same samples always give the same fit (the seed is
    fixed), and a system whose attempts are all re-executed has the same data under both counting rules."""
    by_n = {int(n): [(int(c), int(m), int(times)) for c, m, times in triples if m > 0 and times > 0]
            for n, triples in shares.items()}
    canonical = tuple((n, tuple(sorted(triples))) for n, triples in sorted(by_n.items()) if triples)
    return _curve_fit(canonical, resamples, seed)


@functools.lru_cache(maxsize=4096)
def _curve_fit(canonical: tuple, resamples: int, seed: int) -> CurveFit:
    by_n = {n: list(triples) for n, triples in canonical}
    n_values = tuple(by_n)
    samples = sum(times for triples in by_n.values() for _, _, times in triples)
    if len(n_values) < 2:
        return CurveFit(CurveStatus.TOO_FEW_N, n_values=n_values, samples=samples)
    x_raw = np.array(n_values, dtype=float)
    centre = float(x_raw.mean())
    x = x_raw - centre
    trials = np.array([sum(times for _, _, times in by_n[n]) for n in n_values], dtype=float)
    successes = np.array([sum(c / m * times for c, m, times in by_n[n]) for n in n_values], dtype=float)
    rates = successes / trials
    if (rates >= 1 - 1e-12).all() or (rates <= 1e-12).all():
        return CurveFit(CurveStatus.NO_SPREAD, n_values=n_values, samples=samples)
    if _separated(rates):
        return CurveFit(CurveStatus.SEPARATED, n_values=n_values, samples=samples)
    a_c, b, finite = _newton(x, successes[None, :], trials)
    if not finite[0]:
        return CurveFit(CurveStatus.SEPARATED, n_values=n_values, samples=samples)
    a_c, b = float(a_c[0]), float(b[0])
    intercept = a_c - b * centre
    low_edge = max(0.0, n_values[0] - RANGE_FACTOR * (n_values[-1] - n_values[0]))
    high_edge = n_values[-1] + RANGE_FACTOR * (n_values[-1] - n_values[0])
    common = {"n_values": n_values, "samples": samples, "intercept": intercept, "slope": b}
    if b >= 0:
        return CurveFit(CurveStatus.NO_FALL, **common)

    boot_a, boot_b, boot_finite = _newton(x, _resampled_successes(by_n, resamples, seed), trials)
    # A resample with no finite fit jumps (separated) or never moves: its slope is unbounded
    # (falling, the usual case: -inf) and its n50 where the centre of the range says.
    falling_jump = ~boot_finite & (boot_b < 0)
    slopes = np.where(boot_finite, boot_b, np.where(falling_jump, -np.inf, np.inf))
    with np.errstate(divide="ignore", invalid="ignore"):
        crossings = np.where(boot_b < 0, centre - boot_a / boot_b, np.where(boot_a > 0, np.inf, -np.inf))
    crossings = np.where(np.isnan(crossings), np.inf, crossings)
    slope_low, slope_high = _quantiles(slopes, -np.inf, np.inf)
    common.update(slope_low=slope_low, slope_high=slope_high, resamples=resamples)

    n50 = -intercept / b
    if n50 > high_edge:
        return CurveFit(CurveStatus.ABOVE_RANGE, beyond=round(high_edge, 6), **common)
    if n50 < low_edge:
        return CurveFit(CurveStatus.BELOW_RANGE, beyond=round(low_edge, 6), **common)
    n50_low, n50_high = _quantiles(crossings, low_edge, high_edge)
    return CurveFit(CurveStatus.FITTED, n50=n50, n50_low=n50_low, n50_high=n50_high, **common)


def _resampled_successes(by_n: dict[int, list[tuple[int, int, int]]], resamples: int, seed: int) -> np.ndarray:
    """(resamples, K): per resample and n, the sum of c / m over the samples drawn with replacement
    among that n's samples (as many as there are). Drawing how many times each distinct (c, m) is drawn
    (a multinomial) is the same as drawing the samples, at a cost that does not grow with them."""
    rng = np.random.default_rng(seed)
    columns = []
    for triples in by_n.values():
        values = np.array([c / m for c, m, _ in triples])
        counts = np.array([times for _, _, times in triples], dtype=float)
        drawn = rng.multinomial(int(counts.sum()), counts / counts.sum(), size=resamples)
        columns.append(drawn @ values)
    return np.stack(columns, axis=1)
