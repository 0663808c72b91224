"""A system's numbers as every page shows them: at one n (`NMetrics`, with its failed attempts by
diagnosis), over the n shown (`SystemRow`), many systems (`Leaderboard`); and how the refresh
stores them in SystemStanding's JSON and the pages load them back (`metrics_stored`,
`metrics_loaded`, `curve_fits_stored`, `curve_fit_loaded`).

leaderboard.computation makes them from attempts at a refresh; leaderboard.selectors reads them in
a request. Nothing here queries the database.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from datetime import datetime

from leaderboard.curves import CurveFit
from leaderboard.models import SystemStanding
from leaderboard.pareto import CostAccuracy
from leaderboard.rules import LeaderboardFilters, SystemLabels
from runs.models import Attempt

# What broke a counted failed attempt at n >= 2, by its transplants (runs.evaluation.transplants;
# Attempt.function_diagnosis), stored per n; NO_TRANSPLANTS stands for the blank diagnosis of an
# attempt that has none (not re-executed, its code passed and only its answer failed, or its run
# switched transplants off).
NO_TRANSPLANTS = "none"
DIAGNOSIS_KEYS = (
    Attempt.INTERACTION, Attempt.ONE_WRONG, Attempt.SEVERAL_WRONG, Attempt.NOT_DECIDED, Attempt.PENDING, NO_TRANSPLANTS,
)
# As shown: pending and no transplants are undecided too (nobody knows which function broke those).
DIAGNOSIS_GROUPS = (
    (Attempt.INTERACTION, "Interaction failure", (Attempt.INTERACTION,)),
    (Attempt.ONE_WRONG, "One function wrong", (Attempt.ONE_WRONG,)),
    (Attempt.SEVERAL_WRONG, "Several functions wrong", (Attempt.SEVERAL_WRONG,)),
    (Attempt.NOT_DECIDED, "Not decided", (Attempt.NOT_DECIDED, Attempt.PENDING, NO_TRANSPLANTS)),
)

UNDECIDED_REASONS = (
    (Attempt.NOT_DECIDED, "undecidable"), (Attempt.PENDING, "being judged"), (NO_TRANSPLANTS, "not judged"),
)


def mean_or_none(total: float, count: int) -> float | None:
    """total / count, None for no count."""
    return float(total) / count if count else None


@dataclass
class DiagnosisShare:
    """One group of DIAGNOSIS_GROUPS at one n: how many counted failed attempts, and their share of them."""

    key: str
    label: str
    count: int
    share: float | None


@dataclass
class NMetrics:
    """One system at one n. Rates are fractions in [0, 1]; None when there is nothing to measure."""

    n: int
    samples: int = 0
    attempts: int = 0
    errors: int = 0
    pass1: float | None = None
    pass1_low: float | None = None
    pass1_high: float | None = None
    k: int = 1
    passk: float | None = None
    passk_samples: int = 0
    verifier: dict[str, float] = field(default_factory=dict)
    verifier_samples: dict[str, int] = field(default_factory=dict)
    cost_mean: float | None = None
    cost_unknown: int = 0
    seconds_mean: float | None = None
    # Tolerance sensitivity: Pass@1 at each tolerance computed (leaderboard.rules.tolerance_scale), and the one the
    # view asks for (LeaderboardFilters.tolerance), which the "pass1_tol" sort key reads.
    pass1_at: dict[float, float] = field(default_factory=dict)
    tolerance: float | None = None
    # On the cost-accuracy Pareto frontier among the leaderboard's systems at this n (leaderboard.pareto);
    # None where no leaderboard was compared (a system's own page).
    pareto_frontier: bool | None = None
    # At n >= 2: the counted failed attempts by DIAGNOSIS_KEYS, every key present once computed, so
    # that {} (at n = 1, or numbers stored before this was) is told apart from "no failure".
    diagnoses: dict[str, int] = field(default_factory=dict)
    # The sums a system's totals over several n are made of (not exported: the means above say it).
    verified_attempts: int = 0
    cost_sum: float = 0.0
    cost_known: int = 0
    seconds_sum: float = 0.0
    seconds_known: int = 0

    @property
    def pass1_tol(self) -> float | None:
        return self.pass1_at.get(self.tolerance) if self.tolerance is not None else None

    @property
    def failures(self) -> int:
        """The counted failed attempts the diagnoses are over (0 where none are stored)."""
        return sum(self.diagnoses.values())

    @property
    def diagnosis_shares(self) -> list[DiagnosisShare]:
        """DIAGNOSIS_GROUPS with their counts and shares of the failed attempts (shares None without any)."""
        total = self.failures
        shares = []
        for key, label, members in DIAGNOSIS_GROUPS:
            count = sum(self.diagnoses.get(member, 0) for member in members)
            shares.append(DiagnosisShare(key, label, count, count / total if total else None))
        return shares

    @property
    def undecided_reasons(self) -> list[tuple[str, int]]:
        """Why the "not decided" were not: (what, how many), the ones there are."""
        reasons = [(self.diagnoses.get(key, 0), label) for key, label in UNDECIDED_REASONS]
        return [(label, count) for count, label in reasons if count]

    def diagnoses_dict(self) -> dict:
        """The diagnoses as exported: the groups' counts and shares, and what the undecided are."""
        shares = self.diagnosis_shares
        return {
            "failed_attempts": self.failures,
            "counts": {item.key: item.count for item in shares},
            "shares": {item.key: item.share for item in shares},
            "not_decided_by_reason": {key: self.diagnoses.get(key, 0) for key in DIAGNOSIS_GROUPS[-1][2]},
        }

    def as_dict(self) -> dict:
        tolerance = {"pass1_at_tolerance": {f"{t:g}": value for t, value in self.pass1_at.items()}} if self.pass1_at else {}
        diagnoses = {"function_diagnoses": self.diagnoses_dict()} if self.diagnoses else {}
        return {
            "n": self.n,
            "samples": self.samples,
            "attempts": self.attempts,
            "errors": self.errors,
            "pass1": self.pass1,
            "pass1_ci_low": self.pass1_low,
            "pass1_ci_high": self.pass1_high,
            "k": self.k,
            "passk": self.passk,
            "passk_samples": self.passk_samples,
            "verifier_pass1": dict(self.verifier),
            "verifier_samples": dict(self.verifier_samples),
            "cost_mean": self.cost_mean,
            "cost_unknown": self.cost_unknown,
            "seconds_mean": self.seconds_mean,
            **tolerance,
            **diagnoses,
            **({"pareto_frontier": self.pareto_frontier} if self.pareto_frontier is not None else {}),
        }


@dataclass
class SystemRow(SystemLabels):
    """One system: its key, its numbers by n and its totals over the n shown."""

    slug: str
    suite: str
    agent: str
    model: str
    config: dict
    config_json: str
    context: str
    run_ids: list[int]
    k: int
    by_n: dict[int, NMetrics]
    attempts: int = 0
    verified_attempts: int = 0
    errors: int = 0
    samples: int = 0
    cost_mean: float | None = None
    cost_unknown: int = 0
    seconds_mean: float | None = None
    date: datetime | None = None
    unfinished_runs: int = 0
    stale: bool = False  # changed since its numbers were computed: they are being updated
    refreshed_at: datetime | None = None  # when its numbers were computed: which computation they are
    url: str | None = None  # its page, and its suite's (set where many rows are shown: one reverse() each)
    suite_url: str | None = None
    # Its difficulty curve under the view's counting rule, over every n it has (whatever n range the
    # view shows: leaderboard.curves); None when its numbers were stored before curves were fitted.
    fit: CurveFit | None = None

    @property
    def n50(self) -> float | None:
        """Where its fitted pass rate crosses 50% (None: not determined; such rows sort last)."""
        return self.fit.n50 if self.fit is not None else None

    @property
    def verified(self) -> bool:
        return self.attempts > 0 and self.verified_attempts == self.attempts

    @property
    def unverified_attempts(self) -> int:
        """Counted attempts judged by their reported numbers, not re-executed (none by default)."""
        return self.attempts - self.verified_attempts

    @property
    def verification_note(self) -> str:
        """What marks a row counting unverified attempts, in the exports ("" for a verified row)."""
        if not self.unverified_attempts:
            return ""
        return f"unverified: reported numbers, not re-executed ({self.unverified_attempts} of {self.attempts} attempts)"

    def set_totals(self) -> None:
        """Its totals over the n it shows: sums of the per-n sums, then the means."""
        shown = self.by_n.values()
        self.attempts = sum(metrics.attempts for metrics in shown)
        self.verified_attempts = sum(metrics.verified_attempts for metrics in shown)
        self.errors = sum(metrics.errors for metrics in shown)
        self.samples = sum(metrics.samples for metrics in shown)
        cost_known = sum(metrics.cost_known for metrics in shown)
        seconds_known = sum(metrics.seconds_known for metrics in shown)
        self.cost_mean = mean_or_none(sum(metrics.cost_sum for metrics in shown), cost_known)
        self.cost_unknown = self.attempts - cost_known
        self.seconds_mean = mean_or_none(sum(metrics.seconds_sum for metrics in shown), seconds_known)

    def cells(self, n_values: list[int]) -> list[NMetrics | None]:
        return [self.by_n.get(n) for n in n_values]

    def as_dict(self) -> dict:
        return {
            "reference": False,
            "slug": self.slug,
            "name": self.name,
            "suite": self.suite,
            "agent": self.agent,
            "model": self.model,
            "agent_config": self.config,
            "context": self.context,
            "runs": self.run_ids,
            "k": self.k,
            "verified": self.verified,
            "attempts": self.attempts,
            "verified_attempts": self.verified_attempts,
            "unverified_attempts": self.unverified_attempts,
            "note": self.verification_note,
            "errors": self.errors,
            "samples": self.samples,
            "cost_mean": self.cost_mean,
            "cost_unknown": self.cost_unknown,
            "seconds_mean": self.seconds_mean,
            "date": self.date.isoformat() if self.date else None,
            "unfinished_runs": self.unfinished_runs,
            "stale": self.stale,
            "difficulty_curve": self.fit.as_dict() if self.fit is not None else None,
            "by_n": {str(n): metrics.as_dict() for n, metrics in sorted(self.by_n.items())},
        }


@dataclass
class Leaderboard:
    rows: list[SystemRow]
    n_values: list[int]
    sort: str
    filters: LeaderboardFilters
    cost_accuracy: list[CostAccuracy] = field(default_factory=list)  # by n, in n_values' order
    computing: int = 0  # systems whose numbers are being computed for the first time: not shown yet


class PassRates:
    """Pass rates over all counted attempts and over those at n = 1, for rows counting
    `attempts`, `passes`, `attempts_n1` and `passes_n1`."""

    attempts: int
    passes: int
    attempts_n1: int
    passes_n1: int

    @property
    def pass_rate(self) -> float | None:
        return self.passes / self.attempts if self.attempts else None

    @property
    def pass_rate_n1(self) -> float | None:
        return self.passes_n1 / self.attempts_n1 if self.attempts_n1 else None


# --- as stored (SystemStanding.curve_fits, SystemStandingByN.metrics) -----------------------------------


# The keys of SystemStanding.curve_fits, by counting rule (LeaderboardFilters.verified_only).
CURVE_FIT_KEYS = {True: "verified", False: "all"}


def curve_fits_stored(fits: dict[bool, CurveFit]) -> dict:
    return {CURVE_FIT_KEYS[verified_only]: fit.as_dict() for verified_only, fit in fits.items()}


def curve_fit_loaded(standing: SystemStanding, verified_only: bool) -> CurveFit | None:
    """The difficulty curve `standing` stored for a counting rule (None: stored before curves were fitted)."""
    stored = (standing.curve_fits or {}).get(CURVE_FIT_KEYS[verified_only])
    return CurveFit.from_dict(stored) if stored else None


def metrics_stored(metrics: NMetrics) -> dict:
    """NMetrics as stored (JSON: tolerances as text keys); the fields that depend on the view are left out."""
    stored = dataclasses.asdict(metrics)
    for name in ("tolerance", "pareto_frontier"):
        stored.pop(name)
    stored["pass1_at"] = {repr(tolerance): value for tolerance, value in metrics.pass1_at.items()}
    return stored


def metrics_loaded(stored: dict, *, tolerances: tuple[float, ...], tolerance: float | None) -> NMetrics:
    """`metrics_stored`'s dict back as NMetrics, with Pass@1 at `tolerances` only and `tolerance` the
    one the view shows."""
    pass1_at = {float(key): value for key, value in stored["pass1_at"].items()}
    return NMetrics(**{**stored, "pass1_at": {t: pass1_at[t] for t in tolerances if t in pass1_at}}, tolerance=tolerance)
