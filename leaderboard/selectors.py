"""Read side of the leaderboard: attempts aggregated into systems, per-function difficulty, a system's
runs and samples. pandas lives here and nowhere else.

Systems' numbers by n are computed here (`standing_numbers_computed`) but never in a request:
leaderboard.standings stores them after each change, and the leaderboard, the system pages and
their exports read what it stored (`leaderboard_get`, `system_detail`: a fixed number of queries).
Who may see a run is never stored: each read keeps a stored system only with its runs that are
public now (`standings_shown_runs`, one query), so a run hidden or deleted leaves every page in the request
that hid it; only the numbers of what stays wait for the refresh (marked as being updated).
Computing one is a handful of queries whatever the number of rows: the database groups attempts per
(system, sample) with `.values(...).annotate(...)` and those per (system, n, c of m), and pandas
turns the few rows that come back into systems by n.

The rules (also shown on the page, "How to read this"):

- A *system* is (suite, agent, model, agent configuration as canonical JSON, context condition).
  Its runs are pooled: attempts of two runs of the same system at the same sample are attempts of
  one sample.
- Only attempts with status `done` count. Status `error` (sandbox, worker or model provider
  failure) never counts for or against the model; its count is shown.
- An attempt is *verified* when the harness re-executed its code (`reexecution_passed` is set,
  for a run's attempts and an upload's alike); its verdict is then `passed` (reported answer AND
  re-execution pass). By default (`LeaderboardFilters.verified_only`) only verified attempts
  count: an upload never re-executed is not on the leaderboard, whatever numbers it reports. A
  visitor who asks for them (`?unverified=1`) sees unverified attempts counted too, judged by
  their reported verdict (`reported_passed`), and every system with one marked as unverified
  ("reported numbers, not re-executed"). Both views are computed and stored by
  leaderboard.standings, so neither is computed in a request.
- Per sample, c of m counted attempts pass. Pass@1 is the mean over samples of c/m (the unbiased
  pass@1 estimator) with a seeded percentile bootstrap interval over samples. Pass@k (k: the
  largest attempts-per-sample among the system's runs) is the mean of the unbiased per-sample
  pass@k over samples with at least k counted attempts.
- Verifier-selected Pass@1 is the share of samples whose chosen attempt passes (per verifier).
- Pass@1 at tolerance t (the tolerance sensitivity) is the same estimator with every number's
  tolerance scaled by t / 5% (the rule): an attempt passes at t when its stored `tolerance_ratio`
  (its verdict's largest error in units of the tolerance) is at most t / 5%, so at 5% it is Pass@1.
- At n >= 2 a failed attempt's masked functions are judged one by one, each run alone with the
  others gold (runs.evaluation.transplants). Per n, the counted failed attempts are split by what
  that found (`NMetrics.diagnoses`: interaction failure, one or several functions wrong, not
  decided), and the per-function difficulty counts an attempt right, wrong or undecided about each
  function it masks (`_function_counts`): exact at every n, the undecided apart from the rate.
"""
from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple
from urllib.parse import urlencode

import pandas as pd
from django.core.paginator import Page
from django.db import connections
from django.db.models import (
    Avg,
    Case,
    CharField,
    Count,
    F,
    FloatField,
    IntegerField,
    Q,
    Sum,
    Value,
    When,
)
from django.db.models.functions import Lower
from django.urls import NoReverseMatch, get_script_prefix, reverse

from leaderboard.curves import CurveFit, curve_fit
from leaderboard.models import (
    SystemFunctionStanding,
    SystemNearMiss,
    SystemRunStanding,
    SystemSampleStanding,
    SystemStanding,
    SystemStandingByN,
    VerifierSelection,
)
from leaderboard.paging import page_get
from leaderboard.pareto import CostAccuracy, cost_accuracy
from runs.benchmark.scoring import DEFAULT_RTOL
from runs.benchmark.statistics import bootstrap_ci, pass_at_k
from runs.models import Attempt, Function, Paper, Run, Sample, Suite, Transplant
from runs.visibility import public_run_ids, public_runs_q

BOOTSTRAP_SEED = 0
BOOTSTRAP_RESAMPLES = 10_000
CONFIDENCE = 0.95
CONTEXT_LABELS = dict(Run.CONTEXT_CHOICES)

# Sort keys: "<field>_n<n>" for a number at one n, "<field>" for a system total; "-" for descending.
SORT_FIELDS_BY_N = {
    "pass1": "pass1", "passk": "passk", "verifier": "verifier", "samples": "samples", "pass1_tol": "pass1_tol",
}
SORT_FIELDS = {
    "name": "name", "cost": "cost_mean", "seconds": "seconds_mean", "attempts": "attempts", "errors": "errors", "date": "date",
    "n50": "n50",
}


# Relative tolerances of the tolerance sensitivity (fractions); DEFAULT_RTOL, the rule, is among them.
TOLERANCES = (0.005, 0.01, 0.02, 0.05, 0.10, 0.20)
# Failed attempts whose every number is within this many tolerances are near misses.
NEAR_MISS_FACTOR = 2.0
NEAR_MISS_LIMIT = 50
# A system's page lists its samples (summarised) and its runs this many at a time / at most, so
# that its size does not grow with the system's attempts or uploads; the exports hold them all.
SYSTEM_SAMPLES_PER_PAGE = 100
# The leaderboard lists its systems this many at a time (HTML and JSON; the CSV holds them all): one
# account can add systems without end by varying a model's name.
LEADERBOARD_PER_PAGE = 100
SYSTEM_RUNS_SHOWN = 50
# Attempts that ended, as the attempts explorer lists them (its LISTED_STATUSES).
ENDED_STATUSES = (Attempt.DONE, Attempt.ERROR)


def tolerance_scale(tolerance: float) -> float:
    """How many of an attempt's own tolerances `tolerance` is worth: t / DEFAULT_RTOL, rounded so
    that 0.01 / 0.05 is 0.2 and not 0.19999999999999998 (which would fail a ratio of exactly 0.2)."""
    return round(tolerance / DEFAULT_RTOL, 9)


def tolerance_label(tolerance: float) -> str:
    """0.005 -> "0.5%", 0.1 -> "10%"."""
    return f"{tolerance * 100:g}%"


# --- filters and system keys -------------------------------------------------------------------------


@dataclass(frozen=True)
class LeaderboardFilters:
    """What the URL asks for (validated by leaderboard.forms.LeaderboardFilterForm)."""

    suite: str | None = None
    agent: str | None = None
    context: str | None = None
    # True (the default view): re-executed attempts alone count. False: `?unverified=1`, uploads'
    # reported numbers, not re-executed, count too (leaderboard.forms).
    verified_only: bool = True
    n_min: int | None = None
    n_max: int | None = None
    sort: str = ""
    tolerance: float | None = None  # one of TOLERANCES: show (and allow sorting by) Pass@1 at it


def canonical_config(config) -> str:
    """The agent configuration as canonical JSON: same settings, same text, whatever the key order."""
    return json.dumps(config or {}, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def system_slug(*, suite: str, agent: str, model: str, config_json: str, context: str) -> str:
    """A short stable id of a system key, for its page's URL."""
    key = json.dumps([suite, agent, model, config_json, context], ensure_ascii=False)
    return hashlib.sha256(key.encode("utf-8")).hexdigest()[:12]


def system_name(*, model: str, agent: str) -> str:
    """A system as named on every page: "model · agent", "baseline · agent" for the model-free baselines."""
    return f"{model or 'baseline'} · {agent}"


class SystemLabels:
    """How a system key (fields `model`, `agent`, `context`, `config_json`) is shown."""

    model: str
    agent: str
    context: str
    config_json: str

    @property
    def name(self) -> str:
        return system_name(model=self.model, agent=self.agent)

    @property
    def context_label(self) -> str:
        return CONTEXT_LABELS.get(self.context, self.context)

    @property
    def config_label(self) -> str:
        return "" if self.config_json == "{}" else self.config_json


def system_name_order():
    """A stored system's model as its name sorts, in SQL (then its agent): `system_name`'s "model · agent",
    "baseline" for a blank model, in lower case."""
    return Lower(Case(When(model="", then=Value("baseline")), default=F("model"), output_field=CharField()))


def verifier_label(verifier: str) -> str:
    """A verifier as shown: a model spec without its endpoint (which may carry credentials)."""
    return verifier.split("@http", 1)[0]


def _n_filter(filters: LeaderboardFilters, prefix: str) -> Q:
    q = Q()
    if filters.n_min is not None:
        q &= Q(**{f"{prefix}n__gte": filters.n_min})
    if filters.n_max is not None:
        q &= Q(**{f"{prefix}n__lte": filters.n_max})
    return q


def counted_q(filters: LeaderboardFilters, prefix: str = "") -> Q:
    """The attempts that count: done, and re-executed when only verified ones are wanted."""
    q = Q(**{f"{prefix}status": Attempt.DONE})
    if filters.verified_only:
        q &= Q(**{f"{prefix}reexecution_passed__isnull": False})
    return q


def passes_q(prefix: str = "", *, reported: bool = False) -> Q:
    """An attempt's verdict: `passed`, which only a re-executed attempt can be. With `reported`
    (the view that counts unverified attempts, `not filters.verified_only`), an attempt not
    re-executed passes by its reported verdict."""
    q = Q(**{f"{prefix}reexecution_passed__isnull": False, f"{prefix}passed": True})
    if reported:
        q |= Q(**{f"{prefix}reexecution_passed__isnull": True, f"{prefix}reported_passed": True})
    return q


def filters_passes_q(filters: LeaderboardFilters, prefix: str = "") -> Q:
    """`passes_q` under the counting rule `filters` asks for."""
    return passes_q(prefix, reported=not filters.verified_only)


def attempt_verdict(attempt: Attempt) -> bool:
    """One attempt's verdict as the view with unverified attempts judges it (`passes_q(reported=True)`):
    what the oracle verifier picks by. A re-executed pass is what the default view counts."""
    return bool(attempt.passed) if attempt.reexecution_passed is not None else bool(attempt.reported_passed)


# --- loading: a few grouped queries, whatever the number of attempts ------------------------------
#
# A system's runs are pooled per sample, so the unit is (system, sample). The database groups
# attempts per (system, sample) and then groups those per (system, n, c, m): what comes back is a
# few rows per system and n (one per distinct c-of-m), not one per attempt or sample. The system a
# run belongs to is decided here, in Python, by canonical JSON, and handed to SQL as a CASE over
# run ids, so key order in agent_config never splits a system on any database.

_RUN_COLUMNS = ["run_id", "suite", "agent", "model", "agent_config", "context", "k", "n_values", "finished_at", "created_at"]
_SUMMARY_COLUMNS = [
    "system_no", "n", "c", "m", "samples", "verified_m", "errors", "cost_sum", "cost_known", "seconds_sum", "seconds_known",
]


def runs_frame(run_q: Q) -> pd.DataFrame:
    """Public runs matching `run_q` with their system's slug and a small integer id per system (one
    query). Hidden runs never count, whoever looks: the leaderboard is the public view."""
    rows = Run.objects.filter(run_q & public_runs_q()).order_by("id").values_list(
        "id", "suite__name", "agent", "model", "agent_config", "context", "attempts_per_sample", "n_values",
        "finished_at", "created_at",
    )
    runs = pd.DataFrame.from_records(list(rows), columns=_RUN_COLUMNS)
    runs["config_json"] = [canonical_config(config) for config in runs["agent_config"]]
    runs["slug"] = [
        system_slug(suite=s, agent=a, model=m, config_json=c, context=x)
        for s, a, m, c, x in zip(runs["suite"], runs["agent"], runs["model"], runs["config_json"], runs["context"])
    ]
    numbers = {slug: number for number, slug in enumerate(dict.fromkeys(runs["slug"]))}
    runs["system_no"] = [numbers[slug] for slug in runs["slug"]]
    return runs


def system_case(runs: pd.DataFrame, run_field: str = "run_id") -> Case:
    """SQL mapping each run id to its system's number."""
    whens = [
        When(**{f"{run_field}__in": [int(pk) for pk in block["run_id"]]}, then=Value(int(number)))
        for number, block in runs.groupby("system_no", sort=True)
    ]
    return Case(*whens, default=Value(-1), output_field=IntegerField())


def _grouped(queryset, select: str, group_by: str, *, join: str = "", where: str = "") -> list[tuple]:
    """Group the rows of an already grouped ORM queryset once more (SQL cannot aggregate an
    aggregate in one level, and the ORM has no way to say it): its SQL becomes a subquery."""
    sql, params = queryset.query.sql_with_params()
    statement = f"SELECT {select} FROM ({sql}) inner_rows {join} {where} GROUP BY {group_by}"
    with connections[queryset.db].cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.fetchall()


def _tolerance_column(index: int) -> str:
    return f"c_tol_{index}"


def _per_sample(
    runs: pd.DataFrame, filters: LeaderboardFilters, *, counted_only: bool = False, tolerances: tuple[float, ...] = (),
):
    """Per (system, sample) of `runs`' attempts: counted attempts m, passes c, verified ones, errors,
    cost and time sums, and for each of `tolerances` the passes at it (`c_tol_<index>`, see
    `tolerance_scale`)."""
    counted = counted_q(filters)
    attempts = Attempt.objects.filter(_n_filter(filters, "sample__"), run_id__in=[int(pk) for pk in runs["run_id"]])
    attempts = attempts.filter(counted) if counted_only else attempts.filter(status__in=[Attempt.DONE, Attempt.ERROR])
    return (
        attempts.annotate(system_no=system_case(runs), n=F("sample__n"))
        .order_by()
        .values("system_no", "sample_id", "n")
        .annotate(
            m=Count("id", filter=counted),
            c=Count("id", filter=counted & filters_passes_q(filters)),
            verified_m=Count("id", filter=counted & Q(reexecution_passed__isnull=False)),
            errors=Count("id", filter=Q(status=Attempt.ERROR)),
            cost_sum=Sum("cost", filter=counted),
            cost_known=Count("cost", filter=counted),
            seconds_sum=Sum("agent_seconds", filter=counted),
            seconds_known=Count("agent_seconds", filter=counted),
            **{
                _tolerance_column(index): Count(
                    "id", filter=counted & Q(tolerance_ratio__lte=tolerance_scale(tolerance))
                )
                for index, tolerance in enumerate(tolerances)
            },
        )
    )


def _summary_frame(
    runs: pd.DataFrame, filters: LeaderboardFilters, *, tolerances: tuple[float, ...] = ()
) -> pd.DataFrame:
    """Per (system, n, c, m): how many samples had c of m counted attempts pass, with the sums
    of the other counts, the passes at each of `tolerances` included (one query). m is in the
    group, so the sum over samples of c_t / m is the sum over rows of SUM(c_t) / m: the tolerance
    sensitivity costs no query of its own."""
    tolerance_columns = [_tolerance_column(index) for index in range(len(tolerances))]
    columns = _SUMMARY_COLUMNS + tolerance_columns
    if runs.empty:
        return pd.DataFrame(columns=columns)
    rows = _grouped(
        _per_sample(runs, filters, tolerances=tolerances),
        "system_no, n, c, m, COUNT(*), SUM(verified_m), SUM(errors), SUM(cost_sum), SUM(cost_known), "
        "SUM(seconds_sum), SUM(seconds_known)" + "".join(f", SUM({column})" for column in tolerance_columns),
        "system_no, n, c, m",
        where="WHERE system_no >= 0",
    )
    frame = pd.DataFrame.from_records(rows, columns=columns)
    for column in ("cost_sum", "seconds_sum"):
        frame[column] = pd.to_numeric(frame[column], errors="coerce").astype(float).fillna(0.0)
    for column in ("system_no", "n", "c", "m", "samples", "verified_m", "errors", "cost_known", "seconds_known",
                   *tolerance_columns):
        frame[column] = frame[column].astype("int64")
    return frame


def _verifier_frame(runs: pd.DataFrame, filters: LeaderboardFilters) -> pd.DataFrame:
    """Per (system, n, verifier): mean over samples of whether the chosen attempt passes (one query)."""
    columns = ["system_no", "n", "verifier", "score", "samples"]
    if runs.empty:
        return pd.DataFrame(columns=columns)
    ok = Case(When(filters_passes_q(filters, "attempt__"), then=Value(1.0)), default=Value(0.0), output_field=FloatField())
    per_sample = (
        VerifierSelection.objects.filter(
            Q(run_id__in=[int(pk) for pk in runs["run_id"]]) & counted_q(filters, "attempt__") & _n_filter(filters, "sample__")
        )
        .annotate(system_no=system_case(runs), n=F("sample__n"), ok=ok)
        .order_by()
        .values("system_no", "sample_id", "n", "verifier")
        .annotate(score=Avg("ok"))
    )
    rows = _grouped(per_sample, "system_no, n, verifier, AVG(score), COUNT(*)", "system_no, n, verifier")
    return pd.DataFrame.from_records(rows, columns=columns)


def _diagnosis_counts(runs: pd.DataFrame, filters: LeaderboardFilters) -> dict[tuple[int, int], dict[str, int]]:
    """Per (system, n >= 2): `runs`' counted failed attempts by DIAGNOSIS_KEYS (one query for every n)."""
    if runs.empty:
        return {}
    rows = (
        Attempt.objects.filter(
            counted_q(filters) & ~filters_passes_q(filters) & Q(sample__n__gte=2) & _n_filter(filters, "sample__"),
            run_id__in=[int(pk) for pk in runs["run_id"]],
        )
        .annotate(system_no=system_case(runs), n=F("sample__n"))
        .order_by()
        .values("system_no", "n", "function_diagnosis")
        .annotate(count=Count("id"))
        .values_list("system_no", "n", "function_diagnosis", "count")
    )
    counts: dict[tuple[int, int], dict[str, int]] = {}
    for number, n, diagnosis, count in rows:
        key = diagnosis or NO_TRANSPLANTS
        if key not in DIAGNOSIS_KEYS:  # a diagnosis this page does not know yet says no more than "not decided"
            key = Attempt.NOT_DECIDED
        own = counts.setdefault((int(number), int(n)), dict.fromkeys(DIAGNOSIS_KEYS, 0))
        own[key] += int(count)
    return counts


# --- statistics, memoised: a pure function of its arguments can never go stale ----------------------


@functools.lru_cache(maxsize=8192)
def _interval(counts: tuple[tuple[int, int, int], ...]) -> tuple[float, float, float]:
    """Pass@1 and its bootstrap interval from (c, m, how many samples) triples in canonical order.

    The same multiset of per-sample values always gives the same interval (the seed is fixed and
    the values are put in a canonical order), so it is computed once per process.
    """
    values = [c / m for c, m, times in counts for _ in range(times)]
    interval = bootstrap_ci(values, confidence=CONFIDENCE, resamples=BOOTSTRAP_RESAMPLES, seed=BOOTSTRAP_SEED)
    return interval.estimate, interval.low, interval.high


@functools.lru_cache(maxsize=4096)
def _pass_at_k(m: int, c: int, k: int) -> float:
    return pass_at_k(m, c, k)


# --- the leaderboard ---------------------------------------------------------------------------------


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
    # Tolerance sensitivity: Pass@1 at each tolerance computed (see tolerance_scale), and the one the
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

    def metric(self, key: str, n: int | None = None):
        """The value a sort key names (see SORT_FIELDS and SORT_FIELDS_BY_N); None when absent."""
        if n is None:
            return getattr(self, SORT_FIELDS[key])
        metrics = self.by_n.get(n)
        if metrics is None:
            return None
        if key == "verifier":
            # Sorting by verifier Pass@1 uses the best verifier a system has.
            return max(metrics.verifier.values()) if metrics.verifier else None
        return getattr(metrics, SORT_FIELDS_BY_N[key])

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


def _run_facts(runs: pd.DataFrame) -> dict:
    """A system's run ids, k (the largest attempts per sample), date (its last finished run's end) and
    how many of its runs are unfinished, from its rows of `runs_frame`."""
    finished = runs["finished_at"].dropna()
    return {
        "run_ids": [int(pk) for pk in runs["run_id"]],
        "k": int(runs["k"].max()) if not runs.empty else 1,
        "date": pd.Timestamp(finished.max()).to_pydatetime() if not finished.empty else None,
        "unfinished_runs": int(runs["finished_at"].isna().sum()),
    }


def _none_if_nan(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


def _mean(total: float, count: int) -> float | None:
    return float(total) / count if count else None


def _build_systems(
    runs: pd.DataFrame, summary: pd.DataFrame, verifiers: pd.DataFrame, *, tolerances: tuple[float, ...] = (),
    tolerance: float | None = None, diagnoses: dict[tuple[int, int], dict[str, int]] | None = None,
) -> list[SystemRow]:
    """Systems with their metrics by n, from the per-(system, n, c, m) summary; Pass@1 at each of
    `tolerances` when the summary has their counts, `tolerance` the one the view shows; the failed
    attempts' diagnoses at n >= 2 when `diagnoses` are given (`_diagnosis_counts`)."""
    # A system shows when it has counted attempts, or errors to own up to.
    summary = summary[(summary["m"] > 0) | (summary["errors"] > 0)]
    if summary.empty:
        return []
    systems: dict[int, SystemRow] = {}
    measured = set(summary["system_no"])
    for number, own in runs.groupby("system_no", sort=True):
        if number not in measured:
            continue
        first = own.iloc[0]
        systems[int(number)] = SystemRow(
            slug=first["slug"],
            suite=first["suite"],
            agent=first["agent"],
            model=first["model"],
            config=first["agent_config"] or {},
            config_json=first["config_json"],
            context=first["context"],
            by_n={},
            **_run_facts(own),
        )

    scores: dict[tuple[int, int], tuple[dict, dict]] = {}
    for row in verifiers.itertuples(index=False):
        chosen, counts = scores.setdefault((int(row.system_no), int(row.n)), ({}, {}))
        label = verifier_label(row.verifier)
        chosen[label], counts[label] = float(row.score), int(row.samples)

    sums = ["verified_m", "errors", "cost_sum", "cost_known", "seconds_sum", "seconds_known", "attempts"]
    summary = summary.assign(attempts=summary["m"] * summary["samples"])
    per_n = summary.groupby(["system_no", "n"], sort=True)[sums].sum()
    # (c, m, how many samples) per system and n, in canonical order: the bootstrap's input, compactly.
    triples: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    evaluated = summary[summary["m"] > 0].sort_values(["system_no", "n", "c", "m"])
    for number, n, c, m, times in zip(evaluated["system_no"], evaluated["n"], evaluated["c"], evaluated["m"], evaluated["samples"]):
        triples.setdefault((int(number), int(n)), []).append((int(c), int(m), int(times)))
    # Sum over samples of c_t / m, per system and n and tolerance (divided by the samples below).
    tolerance_sums: dict[tuple[int, int], dict[float, float]] = {}
    for index, tol in enumerate(tolerances):
        shares = evaluated[_tolerance_column(index)] / evaluated["m"]
        for (number, n), total in shares.groupby([evaluated["system_no"], evaluated["n"]]).sum().items():
            tolerance_sums.setdefault((int(number), int(n)), {})[tol] = float(total)

    for (number, n), totals in zip(per_n.index, per_n.itertuples(index=False)):
        system = systems[int(number)]
        n = int(n)
        counts_cm = tuple(triples.get((int(number), n), ()))
        estimate = low = high = None
        if counts_cm:
            estimate, low, high = _interval(counts_cm)
        passk, eligible = None, 0
        if system.k > 1:
            usable = [(c, m, times) for c, m, times in counts_cm if m >= system.k]
            eligible = sum(times for _, _, times in usable)
            if eligible:
                passk = sum(_pass_at_k(m, c, system.k) * times for c, m, times in usable) / eligible
        attempts = int(totals.attempts)
        chosen, counts = scores.get((int(number), n), ({}, {}))
        samples = sum(times for _, _, times in counts_cm)
        system.by_n[n] = NMetrics(
            n=n,
            samples=samples,
            attempts=attempts,
            errors=int(totals.errors),
            pass1=_none_if_nan(estimate),
            pass1_low=_none_if_nan(low),
            pass1_high=_none_if_nan(high),
            k=system.k,
            passk=passk,
            passk_samples=eligible,
            verifier=chosen,
            verifier_samples=counts,
            cost_mean=_mean(totals.cost_sum, int(totals.cost_known)),
            cost_unknown=attempts - int(totals.cost_known),
            seconds_mean=_mean(totals.seconds_sum, int(totals.seconds_known)),
            pass1_at={tol: total / samples for tol, total in tolerance_sums.get((int(number), n), {}).items()},
            tolerance=tolerance,
            diagnoses=(
                dict(diagnoses.get((int(number), n), dict.fromkeys(DIAGNOSIS_KEYS, 0)))
                if diagnoses is not None and n >= 2 else {}
            ),
            verified_attempts=int(totals.verified_m),
            cost_sum=float(totals.cost_sum),
            cost_known=int(totals.cost_known),
            seconds_sum=float(totals.seconds_sum),
            seconds_known=int(totals.seconds_known),
        )
    for system in systems.values():
        _add_totals(system)
    return list(systems.values())


def _add_totals(system: SystemRow) -> None:
    """A system's totals over the n it shows: sums of the per-n sums, then the means."""
    shown = system.by_n.values()
    system.attempts = sum(metrics.attempts for metrics in shown)
    system.verified_attempts = sum(metrics.verified_attempts for metrics in shown)
    system.errors = sum(metrics.errors for metrics in shown)
    system.samples = sum(metrics.samples for metrics in shown)
    cost_known = sum(metrics.cost_known for metrics in shown)
    seconds_known = sum(metrics.seconds_known for metrics in shown)
    system.cost_mean = _mean(sum(metrics.cost_sum for metrics in shown), cost_known)
    system.cost_unknown = system.attempts - cost_known
    system.seconds_mean = _mean(sum(metrics.seconds_sum for metrics in shown), seconds_known)


# --- the maintained numbers (leaderboard.standings writes them) ------------------------------------


@dataclass
class StandingNumbers:
    """What leaderboard.standings stores of one system: its numbers by n over all counted attempts
    (`by_n[False]`) and over re-executed ones only (`by_n[True]`), and facts about its public runs."""

    by_n: dict[bool, dict[int, NMetrics]]
    functions: dict[bool, list[FunctionCounts]]  # by counting rule
    run_ids: list[int]
    page: SystemPageRows  # what its page lists
    fits: dict[bool, CurveFit] = field(default_factory=dict)  # its difficulty curve, by counting rule
    k: int = 1
    date: datetime | None = None
    unfinished_runs: int = 0


def public_system_keys() -> dict[str, dict]:
    """Every system with a public run: its slug, and the fields of its key (one query)."""
    runs = runs_frame(Q()).drop_duplicates("slug")
    return {
        row.slug: {"suite": row.suite, "agent": row.agent, "model": row.model, "config_json": row.config_json,
                   "context": row.context}
        for row in runs.itertuples(index=False)
    }


def standing_numbers_computed(slugs: list[str]) -> Iterator[tuple[str, StandingNumbers]]:
    """Each of `slugs` with its numbers computed from its public runs' attempts (a few queries per
    system, its bootstrap intervals included: seconds for a large one). A slug without public runs
    has none."""
    runs = runs_frame(Q())
    for slug in slugs:
        own = runs[runs["slug"] == slug]
        by_n, functions, fits = {}, {}, {}
        for verified_only in (False, True):
            filters = LeaderboardFilters(verified_only=verified_only)
            summary = _summary_frame(own, filters, tolerances=TOLERANCES)
            verifiers = _verifier_frame(own, filters) if not summary.empty else pd.DataFrame(columns=["system_no"])
            diagnoses = _diagnosis_counts(own, filters) if not summary.empty else {}
            built = _build_systems(own, summary, verifiers, tolerances=TOLERANCES, diagnoses=diagnoses)
            by_n[verified_only] = built[0].by_n if built else {}
            functions[verified_only] = _function_counts(own, filters) if not own.empty else []
            fits[verified_only] = curve_fit(_sample_shares(summary))
        page = system_page_rows_computed([int(pk) for pk in own["run_id"]])
        yield slug, StandingNumbers(by_n=by_n, functions=functions, page=page, fits=fits, **_run_facts(own))


def _sample_shares(summary: pd.DataFrame) -> dict[int, list[tuple[int, int, int]]]:
    """Per n, one system's samples with counted attempts as (c, m, how many samples): Pass@1's input,
    and its difficulty curve's."""
    shares: dict[int, list[tuple[int, int, int]]] = {}
    evaluated = summary[summary["m"] > 0]
    for n, c, m, times in zip(evaluated["n"], evaluated["c"], evaluated["m"], evaluated["samples"]):
        shares.setdefault(int(n), []).append((int(c), int(m), int(times)))
    return shares


# The keys of SystemStanding.curve_fits, by counting rule (LeaderboardFilters.verified_only).
CURVE_FIT_KEYS = {True: "verified", False: "all"}


def curve_fits_stored(fits: dict[bool, CurveFit]) -> dict:
    return {CURVE_FIT_KEYS[verified_only]: fit.as_dict() for verified_only, fit in fits.items()}


def _curve_fit_loaded(standing: SystemStanding, verified_only: bool) -> CurveFit | None:
    stored = (standing.curve_fits or {}).get(CURVE_FIT_KEYS[verified_only])
    return CurveFit.from_dict(stored) if stored else None


def metrics_stored(metrics: NMetrics) -> dict:
    """NMetrics as stored (JSON: tolerances as text keys); the fields that depend on the view are left out."""
    stored = dataclasses.asdict(metrics)
    for name in ("tolerance", "pareto_frontier"):
        stored.pop(name)
    stored["pass1_at"] = {repr(tolerance): value for tolerance, value in metrics.pass1_at.items()}
    return stored


def _metrics_loaded(stored: dict, *, tolerances: tuple[float, ...], tolerance: float | None) -> NMetrics:
    pass1_at = {float(key): value for key, value in stored["pass1_at"].items()}
    return NMetrics(**{**stored, "pass1_at": {t: pass1_at[t] for t in tolerances if t in pass1_at}}, tolerance=tolerance)


def _standing_filter(filters: LeaderboardFilters) -> Q:
    """The standings of the systems `filters` asks for (suite, agent, context: part of a system's key)."""
    q = Q()
    for name in ("suite", "agent", "context"):
        if getattr(filters, name):
            q &= Q(**{name: getattr(filters, name)})
    return q


def standings_shown_runs(standings: list[SystemStanding]) -> dict[int, tuple[int, ...]]:
    """Per computed standing (by pk): the runs of its last refresh that are public now (one query).
    A standing none of whose runs is public now (all hidden or deleted since) is left out: its
    system leaves every page at once, before any refresh. A run made public since the refresh joins
    with the numbers, at the refresh (the change marked the system as being updated)."""
    return _shown_runs([(standing.pk, standing.run_ids) for standing in standings if standing.refreshed_at is not None])


def _shown_runs(computed: list[tuple[int, list[int]]]) -> dict[int, tuple[int, ...]]:
    """`standings_shown_runs` of computed standings given as (pk, run ids of its last refresh)."""
    public = public_run_ids(among=[pk for _, run_ids in computed for pk in run_ids])
    shown = {standing: tuple(pk for pk in run_ids if pk in public) for standing, run_ids in computed}
    return {pk: run_ids for pk, run_ids in shown.items() if run_ids}


def _standing_rows(
    standings: list[SystemStanding], filters: LeaderboardFilters, *, shown_runs: dict[int, tuple[int, ...]],
    tolerances: tuple[float, ...] = (),
) -> list[SystemRow]:
    """The systems of `standings` that are shown (`shown_runs`, by `standings_shown_runs`: the runs each is
    listed with) and have numbers in `filters`' n range (one query), with Pass@1 at each of
    `tolerances` and `filters.tolerance` the one shown."""
    standings = [standing for standing in standings if standing.pk in shown_runs]
    by_standing: dict[int, dict[int, NMetrics]] = {}
    stored = SystemStandingByN.objects.filter(
        Q(standing_id__in=[standing.pk for standing in standings], verified_only=filters.verified_only)
        & _n_filter(filters, "")
    ).values_list("standing_id", "n", "metrics")
    for standing_id, n, metrics in stored:
        by_standing.setdefault(standing_id, {})[n] = _metrics_loaded(metrics, tolerances=tolerances, tolerance=filters.tolerance)
    rows = []
    system_url, suite_url = _url_maker("leaderboard:system", "slugmarker"), _url_maker("leaderboard:benchmark_suite", "slugmarker")
    for standing in standings:
        by_n = by_standing.get(standing.pk)
        if not by_n:
            continue
        row = SystemRow(
            slug=standing.slug, suite=standing.suite, agent=standing.agent, model=standing.model,
            config=json.loads(standing.config_json), config_json=standing.config_json, context=standing.context,
            run_ids=list(shown_runs[standing.pk]), k=standing.k, by_n=dict(sorted(by_n.items())), date=standing.date,
            unfinished_runs=standing.unfinished_runs, stale=standing.stale, refreshed_at=standing.refreshed_at,
            url=system_url(standing.slug), suite_url=suite_url(standing.suite),
            fit=_curve_fit_loaded(standing, filters.verified_only),
        )
        _add_totals(row)
        rows.append(row)
    return rows


def parse_sort(sort: str) -> tuple[str, int | None, bool]:
    """("pass1", 1, True) for "-pass1_n1": field, n (None for totals), descending. Assumes a valid key."""
    descending = sort.startswith("-")
    key = sort.lstrip("-")
    name, _, n = key.partition("_n")
    return name, (int(n) if n else None), descending


def sort_systems(rows: list[SystemRow], sort: str) -> list[SystemRow]:
    """Rows in the order `sort` asks; rows without a value always last, ties by name."""
    field_name, n, descending = parse_sort(sort)
    if field_name == "name":
        return sorted(rows, key=lambda row: (row.name.lower(), row.slug), reverse=descending)

    def value(row):
        result = row.metric(field_name, n)
        if isinstance(result, datetime):
            return result.timestamp()
        return result

    present = [row for row in rows if value(row) is not None]
    missing = [row for row in rows if value(row) is None]
    present.sort(key=lambda row: (row.name.lower(), row.slug))
    present.sort(key=value, reverse=descending)  # stable: ties stay in name order
    missing.sort(key=lambda row: (row.name.lower(), row.slug))
    return present + missing


def default_sort(n_values: list[int]) -> str:
    return f"-pass1_n{n_values[0]}" if n_values else "name"


def leaderboard_get(*, filters: LeaderboardFilters) -> Leaderboard:
    """The measured systems for `filters`, sorted, as last computed by leaderboard.standings, each
    with its runs that are public now (a system with none is not shown: `standings_shown_runs`).

    Two queries while the standings and their public runs are as this process last saw them (the
    standings' marks, read as plain tuples: a few milliseconds at thousands of systems, and whether
    their runs are all still public), a few more when they changed: the board built from them is
    kept (`_leaderboard_built`), shared between requests, and must not be modified."""
    marks = list(SystemStanding.objects.filter(_standing_filter(filters)).values_list(
        "pk", "changes", "refreshed_changes", "run_ids"
    ))
    shown = _shown_runs([(pk, run_ids) for pk, _, refreshed, run_ids in marks if refreshed])
    return _leaderboard_built(_Standings(filters, marks, shown))


class _Standings:
    """The standings a board is built from (their marks: pk, changes, refreshed_changes, run ids), equal
    to another when they would build the same board: a standing's numbers are only ever rewritten with a
    new refreshed_changes (leaderboard.standings._store: 0 until the first), and only its stale mark and
    which of its runs are public change in between."""

    def __init__(self, filters: LeaderboardFilters, marks: list[tuple], shown_runs: dict[int, tuple[int, ...]]):
        self.filters, self.shown_runs = filters, shown_runs
        self.computing = sum(not refreshed for _, _, refreshed, _ in marks)
        # The rows' links are built under the request's address prefix (a site mounted under a path).
        self.version = (filters, get_script_prefix(),
                        tuple((pk, refreshed, changes > refreshed, shown_runs.get(pk)) for pk, changes, refreshed, _ in marks))

    def __eq__(self, other) -> bool:
        return isinstance(other, _Standings) and self.version == other.version

    def __hash__(self) -> int:
        return hash(self.version)


# Building a board of 200 systems (decoding their stored numbers, sorting, the Pareto frontier) takes
# about 30 ms: the boards of a few views (the first one, a few sorts and filters) are kept.
@functools.lru_cache(maxsize=16)
def _leaderboard_built(source: _Standings) -> Leaderboard:
    filters = source.filters
    standings = [standing for standing in SystemStanding.objects.filter(_standing_filter(filters), refreshed_at__isnull=False)
                 if standing.pk in source.shown_runs]
    tolerances = (filters.tolerance,) if filters.tolerance is not None else ()
    rows = _standing_rows(standings, filters, shown_runs=source.shown_runs, tolerances=tolerances)
    n_values = sorted({n for row in rows for n in row.by_n})
    sort = filters.sort or default_sort(n_values)
    rows = sort_systems(rows, sort)
    charts = cost_accuracy(rows, n_values)
    frontier = {chart.n: chart.frontier_keys for chart in charts}
    for row in rows:
        for n, metrics in row.by_n.items():
            metrics.pareto_frontier = row.slug in frontier.get(n, ())
    return Leaderboard(rows=rows, n_values=n_values, sort=sort, filters=filters, cost_accuracy=charts,
                       computing=source.computing)


def leaderboard_page(board: Leaderboard, rows: list[SystemRow]) -> Leaderboard:
    """`board` as one page of it shows it: its `rows` (a page of `board.rows`), and the cost charts
    placing only those (the frontier, and so each row's badge, stays that of every system)."""
    keys = {row.slug for row in rows}
    charts = [
        dataclasses.replace(chart, placed=tuple(point for point in chart.placed if point.key in keys),
                            unknown=tuple(row for row in chart.unknown if row.slug in keys))
        for chart in board.cost_accuracy
    ]
    return dataclasses.replace(board, rows=rows, cost_accuracy=[chart for chart in charts if chart.placed or chart.unknown])


FLAT_COLUMNS = (
    "reference", "system", "slug", "suite", "agent", "model", "agent_config", "context", "verified", "n", "samples",
    "attempts", "errors", "pass1", "pass1_ci_low", "pass1_ci_high", "k", "passk", "passk_samples", "verifier_pass1",
    "cost_mean", "cost_unknown", "seconds_mean", "date", "note",
    # The system's difficulty curve (leaderboard.curves), repeated on each of its rows; blank for the paper's.
    "n50", "n50_ci_low", "n50_ci_high", "curve_slope", "curve_slope_ci_low", "curve_slope_ci_high", "curve_status",
)


def leaderboard_flat_rows(board: Leaderboard, reference: list) -> list[dict]:
    """One row per (system, n), measured first then the paper's: the CSV export's rows."""
    columns = list(FLAT_COLUMNS)
    flat = []
    for row in board.rows:
        for n in sorted(row.by_n):
            metrics = row.by_n[n]
            flat.append({
                "reference": False,
                "system": row.name,
                "slug": row.slug,
                "suite": row.suite,
                "agent": row.agent,
                "model": row.model,
                "agent_config": row.config_json,
                "context": row.context,
                "verified": row.verified,
                "n": n,
                "samples": metrics.samples,
                "attempts": metrics.attempts,
                "errors": metrics.errors,
                "pass1": metrics.pass1,
                "pass1_ci_low": metrics.pass1_low,
                "pass1_ci_high": metrics.pass1_high,
                "k": metrics.k,
                "passk": metrics.passk,
                "passk_samples": metrics.passk_samples,
                "verifier_pass1": json.dumps(metrics.verifier, sort_keys=True) if metrics.verifier else "",
                "cost_mean": metrics.cost_mean,
                "cost_unknown": metrics.cost_unknown,
                "seconds_mean": metrics.seconds_mean,
                "date": row.date.isoformat() if row.date else "",
                "note": row.verification_note,
                **_curve_cells(row.fit),
            })
    for ref in reference:
        data = ref.as_dict()
        for values in data["by_n"].values():
            flat.append({
                **dict.fromkeys(columns),
                "reference": True,
                "system": data["name"],
                "slug": "",
                "suite": data["suite"],
                "agent": data["agent"],
                "model": data["model"],
                "verified": False,
                "n": values["n"],
                "pass1": values["pass1"],
                "k": values["k"],
                "passk": values["passk"],
                "note": data["note"],
            })
    return flat


def _curve_cells(fit: CurveFit | None) -> dict:
    if fit is None:
        return {}
    return {"n50": fit.n50, "n50_ci_low": fit.n50_low, "n50_ci_high": fit.n50_high, "curve_slope": fit.slope,
            "curve_slope_ci_low": fit.slope_low, "curve_slope_ci_high": fit.slope_high, "curve_status": fit.status}


# --- per-function difficulty -------------------------------------------------------------------------


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


@dataclass
class FunctionDifficulty(PassRates):
    """One function over the counted attempts whose sample masks it: how many were right or wrong
    about it (exact at every n: see SystemFunctionStanding) and how many could not say; and, as
    before, how many of those attempts passed (the whole sample: a share that blames a function for
    its neighbours at n >= 2)."""

    suite: str
    paper: str
    func_id: int
    file: str
    name: str
    attempts: int = 0
    passes: int = 0
    attempts_n1: int = 0
    passes_n1: int = 0
    right: int = 0
    wrong: int = 0
    undecided: int = 0
    systems: int = 0

    @property
    def decided(self) -> int:
        return self.right + self.wrong

    @property
    def right_rate(self) -> float | None:
        """Right over right + wrong: the undecided say nothing either way, so they are left out (and shown)."""
        return self.right / self.decided if self.decided else None

    def as_dict(self) -> dict:
        return {
            "suite": self.suite,
            "paper": self.paper,
            "func_id": self.func_id,
            "file": self.file,
            "name": self.name,
            "attempts": self.attempts,
            "right": self.right,
            "wrong": self.wrong,
            "undecided": self.undecided,
            "right_rate": self.right_rate,
            "passes": self.passes,
            "pass_rate": self.pass_rate,
            "attempts_n1": self.attempts_n1,
            "passes_n1": self.passes_n1,
            "pass_rate_n1": self.pass_rate_n1,
            "systems": self.systems,
        }


def function_difficulty(*, filters: LeaderboardFilters) -> list[FunctionDifficulty]:
    """Every function of the suites in view, with how often the attempts masking it got it right, from
    the stored per-function counts of the systems in view that have a public run now
    (leaderboard.standings, `standings_shown_runs`; four queries).

    Hardest first (lowest right rate), functions never decided last.
    """
    computed = list(SystemStanding.objects.filter(_standing_filter(filters), refreshed_at__isnull=False)
                    .exclude(run_ids=[]).only("pk", "suite", "run_ids", "refreshed_at"))
    shown = standings_shown_runs(computed)
    standings = [standing.pk for standing in computed if standing.pk in shown]
    suites = sorted({standing.suite for standing in computed if standing.pk in shown})
    functions = Function.objects.filter(paper__suite__name__in=suites).order_by().values_list(
        "id", "paper__suite__name", "paper__paper_id", "func_id", "file", "name"
    )
    table = {
        pk: FunctionDifficulty(suite=suite, paper=paper, func_id=func_id, file=file, name=name)
        for pk, suite, paper, func_id, file, name in functions
    }
    if table:
        at_n1 = Q(n=1)
        counts = (
            SystemFunctionStanding.objects.filter(
                Q(standing_id__in=standings, verified_only=filters.verified_only) & _n_filter(filters, "")
            )
            .order_by()
            .values("function_id")
            .annotate(
                total=Sum("attempts"), passed=Sum("passes"), total_n1=Sum("attempts", filter=at_n1),
                passed_n1=Sum("passes", filter=at_n1), right=Sum("right"), wrong=Sum("wrong"),
                undecided=Sum("undecided"), systems=Count("standing_id", distinct=True),
            )
            .values_list("function_id", "total", "passed", "total_n1", "passed_n1", "right", "wrong", "undecided",
                         "systems")
        )
        for pk, attempts, passes, attempts_n1, passes_n1, right, wrong, undecided, systems in counts:
            entry = table.get(pk)
            if entry is not None:
                entry.attempts, entry.passes, entry.systems = int(attempts), int(passes), int(systems)
                entry.attempts_n1, entry.passes_n1 = int(attempts_n1 or 0), int(passes_n1 or 0)
                entry.right, entry.wrong, entry.undecided = int(right), int(wrong), int(undecided)
    rows = list(table.values())
    rows.sort(key=lambda row: (row.suite, row.paper, row.func_id))
    rows.sort(key=lambda row: (row.right_rate is None, row.right_rate if row.right_rate is not None else 0.0))
    return rows


class FunctionCounts(NamedTuple):
    """A system's counted attempts at the samples masking one function at one n (SystemFunctionStanding's fields)."""

    function_id: int
    n: int
    attempts: int
    passes: int
    right: int
    wrong: int
    undecided: int


def _function_counts(runs: pd.DataFrame, filters: LeaderboardFilters) -> list[FunctionCounts]:
    """Per (function, n): `runs`' counted attempts at the samples masking the function, how many
    passed, and what they say of the function (two queries, whatever the number of attempts):

    - right: the attempt passed, or it failed at n >= 2 and the function's transplant was right
      (it passes alone, the other masked functions gold);
    - wrong: the attempt failed at n = 1 (the function was all there was to get wrong), or the
      function's transplant was wrong;
    - undecided: it failed at n >= 2 and no transplant of it said right or wrong (not decidable,
      given up, being judged, or none: not re-executed, or its run switched them off).
    """
    through = Sample.functions.through._meta
    name = connections[Attempt.objects.db].ops.quote_name
    masks = name(through.db_table)
    sample_column = name(through.get_field("sample").column)
    function_column = name(through.get_field("function").column)
    rows = _grouped(
        _per_sample(runs, filters, counted_only=True),
        f"masks.{function_column}, n, SUM(m), SUM(c)",
        f"masks.{function_column}, n",
        join=f"JOIN {masks} masks ON masks.{sample_column} = inner_rows.sample_id",
        where="WHERE system_no >= 0 AND m > 0",
    )
    alone = _transplant_verdicts(runs, filters)
    counts = []
    for pk, n, attempts, passes in rows:
        pk, n, attempts, passes = int(pk), int(n), int(attempts), int(passes)
        if n == 1:
            right, wrong = passes, attempts - passes
        else:
            right_alone, wrong_alone = alone.get((pk, n), (0, 0))
            right, wrong = passes + right_alone, wrong_alone
        counts.append(FunctionCounts(pk, n, attempts, passes, right, wrong, attempts - right - wrong))
    return counts


def _transplant_verdicts(runs: pd.DataFrame, filters: LeaderboardFilters) -> dict[tuple[int, int], tuple[int, int]]:
    """Per (function, n >= 2): how many of `runs`' counted failed attempts found the function right
    alone, and wrong alone, by its transplant (one query). Only failed attempts' transplants count:
    a pass already says right, whatever a transplant of an earlier verdict said."""
    rows = (
        Transplant.objects.filter(
            counted_q(filters, "attempt__") & ~filters_passes_q(filters, "attempt__") & Q(attempt__sample__n__gte=2)
            & _n_filter(filters, "attempt__sample__"),
            attempt__run_id__in=[int(pk) for pk in runs["run_id"]],
            verdict__in=[Transplant.RIGHT, Transplant.WRONG],
        )
        .order_by()
        .values("function_id", n=F("attempt__sample__n"))
        .annotate(right=Count("id", filter=Q(verdict=Transplant.RIGHT)), wrong=Count("id", filter=Q(verdict=Transplant.WRONG)))
        .values_list("function_id", "n", "right", "wrong")
    )
    return {(int(pk), int(n)): (int(right), int(wrong)) for pk, n, right, wrong in rows}


# --- one system ---------------------------------------------------------------------------------------


@dataclass
class SampleSummary:
    """One sample of a system: how many of its attempts there are, count, pass and failed on the
    infrastructure, and which each verifier chose; the attempts themselves are in the explorer
    (`attempts_url`), so that the page does not grow with them."""

    sample_pk: int
    sample_id: str
    paper: str
    n: int
    total: int  # the system's attempts at this sample that ended (done or error): what the explorer lists
    counted: int
    passes: int
    errors: int
    out_of_scope: int  # attempts whose out-of-scope edits re-execution dropped
    attempts_url: str | None  # the attempts explorer: this system's attempts at this sample
    choices: dict[str, int] = field(default_factory=dict)  # verifier -> chosen attempt pk (the newest run's)
    choice_links: list[tuple[str, int, str | None]] = field(default_factory=list)  # (verifier, attempt pk, its replay)

    @property
    def pass_rate(self) -> float | None:
        return self.passes / self.counted if self.counted else None

    def as_dict(self) -> dict:
        return {
            "sample_id": self.sample_id, "paper": self.paper, "n": self.n, "attempts": self.counted,
            "passes": self.passes, "pass_rate": self.pass_rate, "errors": self.errors, "ended_attempts": self.total,
            "out_of_scope_attempts": self.out_of_scope, "verifier_choices": dict(self.choices),
            "attempts_url": self.attempts_url,
        }


@dataclass
class RunSummary:
    pk: int
    created_at: datetime
    finished_at: datetime | None
    n_values: list
    k: int
    counts: dict[str, int]
    verified: bool
    url: str | None
    refreshed: bool = True  # counted at the system's last refresh (a run added since: its counts are being updated)


@dataclass
class NearMiss:
    """A failed counted attempt whose every number is within NEAR_MISS_FACTOR of its tolerance."""

    pk: int
    run_id: int
    index: int
    sample_id: str
    n: int
    tolerance_ratio: float  # in (1, NEAR_MISS_FACTOR]: its largest error in units of the tolerance
    verified: bool
    url: str | None

    def as_dict(self) -> dict:
        return {"attempt_id": self.pk, "run_id": self.run_id, "index": self.index, "sample_id": self.sample_id,
                "n": self.n, "tolerance_ratio": self.tolerance_ratio, "verified": self.verified}


@dataclass
class ToleranceRow:
    """The tolerance sensitivity at one n: Pass@1 at each of TOLERANCES, in that order."""

    n: int
    samples: int
    pass1: list[float | None]


@dataclass
class SystemDetail:
    system: SystemRow
    runs: list[RunSummary]  # the newest SYSTEM_RUNS_SHOWN (the runs CSV holds them all)
    n_values: list[int]
    run_ids: list[int] = field(default_factory=list)  # its public runs now (the stored numbers may be older)
    runs_total: int = 0
    out_of_scope_attempts: int = 0  # attempts whose final patch edited outside the task (dropped)
    near_misses: list[NearMiss] = field(default_factory=list)  # nearest first, at most NEAR_MISS_LIMIT
    near_miss_total: int = 0
    not_reexecuted: int = 0  # done attempts the harness has not re-executed (counted only with ?unverified=1)
    all_runs: list[RunSummary] = field(default_factory=list)  # every run, newest first (the runs CSV)
    standing_pk: int | None = None  # its stored numbers (None: not computed yet), which its samples page reads

    @property
    def tolerance_rows(self) -> list[ToleranceRow]:
        return [
            ToleranceRow(n=n, samples=self.system.by_n[n].samples,
                         pass1=[self.system.by_n[n].pass1_at.get(tolerance) for tolerance in TOLERANCES])
            for n in self.n_values
        ]


def _url(name: str, pk: int) -> str | None:
    try:
        return reverse(name, args=[pk])
    except NoReverseMatch:  # the page is not wired up (yet): no link rather than an error
        return None


def _near_miss_q(filters: LeaderboardFilters) -> Q:
    """A counted attempt that failed with every number within NEAR_MISS_FACTOR of its tolerance."""
    return (
        counted_q(filters) & ~filters_passes_q(filters)
        & Q(tolerance_ratio__gt=1, tolerance_ratio__lte=NEAR_MISS_FACTOR)
    )


def system_key_q(standing: SystemStanding | None, prefix: str = "") -> Q:
    """The runs that share the plain columns of `standing`'s system key (a slug is a hash, so the
    runs of one system are found by computing theirs): a superset of its runs, instead of every run
    of the site, which grows with uploads. No standing (a system never seen public): every run."""
    if standing is None:
        return Q()
    return Q(**{f"{prefix}suite__name": standing.suite, f"{prefix}agent": standing.agent,
                f"{prefix}model": standing.model, f"{prefix}context": standing.context})


def system_detail(*, slug: str, filters: LeaderboardFilters) -> SystemDetail | None:
    """A system's metrics (with its tolerance sensitivity), runs and near misses (None: no such
    system); its samples are `system_samples_page`'s. Read from what its last refresh stored
    (leaderboard.standings: SystemStandingByN, SystemRunStanding, SystemNearMiss) for its runs that
    are public now: five queries, none of which reads an attempt, whatever their number."""
    standing = SystemStanding.objects.filter(slug=slug).first()
    runs = runs_frame(system_key_q(standing))
    runs = runs[runs["slug"] == slug]
    if runs.empty:
        return None
    run_ids = [int(pk) for pk in runs["run_id"]]
    if standing is not None and standing.refreshed_at is None:
        standing = None  # being computed for the first time: no numbers yet
    # Its runs are those public now (`runs`), whatever the stored numbers were last computed from.
    shown = {standing.pk: tuple(run_ids)} if standing is not None else {}
    built = _standing_rows([standing], filters, shown_runs=shown, tolerances=TOLERANCES) if standing is not None else []
    first = runs.iloc[0]
    system = built[0] if built else SystemRow(
        slug=slug, suite=first["suite"], agent=first["agent"], model=first["model"], config=first["agent_config"] or {},
        config_json=first["config_json"], context=first["context"], run_ids=run_ids, k=int(runs["k"].max()), by_n={},
        stale=standing is None or standing.stale,
    )

    counts: dict[int, dict[str, int]] = {pk: {} for pk in run_ids}
    unverified_runs: set[int] = set()
    out_of_scope_attempts = not_reexecuted = near_miss_total = 0
    near_misses: list[NearMiss] = []
    if standing is not None:
        stored = SystemRunStanding.objects.filter(
            Q(standing=standing, run_id__in=run_ids) & _n_filter(filters, "")
        ).values_list("run_id", "by_status", "not_reexecuted", "out_of_scope", "near_misses", "near_misses_verified")
        for run_id, by_status, run_not_reexecuted, out_of_scope, near, near_verified in stored:
            for status, count in by_status.items():
                counts[run_id][status] = counts[run_id].get(status, 0) + count
            if run_not_reexecuted:
                unverified_runs.add(run_id)
            not_reexecuted += run_not_reexecuted
            out_of_scope_attempts += out_of_scope
            near_miss_total += near_verified if filters.verified_only else near
        attempt_url = attempt_url_maker()
        nearest = (
            SystemNearMiss.objects.filter(
                Q(standing=standing, verified_only=filters.verified_only, run_id__in=run_ids) & _n_filter(filters, "")
            )
            .order_by("tolerance_ratio", "n", "sample_name", "attempt_id")
            .values_list("attempt_id", "run_id", "index", "sample_name", "n", "tolerance_ratio", "verified")
        )[:NEAR_MISS_LIMIT] if near_miss_total else []
        near_misses = [NearMiss(pk, run_id, index, sample_id, n, ratio, verified, attempt_url(pk))
                       for pk, run_id, index, sample_id, n, ratio, verified in nearest]
    refreshed_runs = set(standing.run_ids) if standing is not None else set()
    run_url = _url_maker("runs:run_detail", 987654321)

    run_summaries = [
        RunSummary(
            pk=int(run.run_id), created_at=run.created_at, finished_at=None if pd.isna(run.finished_at) else run.finished_at,
            n_values=run.n_values, k=int(run.k), counts=counts[run.run_id],
            verified=run.run_id not in unverified_runs and counts[run.run_id].get(Attempt.DONE, 0) > 0,
            url=run_url(int(run.run_id)), refreshed=run.run_id in refreshed_runs,
        )
        for run in runs.sort_values("run_id", ascending=False).itertuples(index=False)
    ]
    return SystemDetail(system=system, runs=run_summaries[:SYSTEM_RUNS_SHOWN], run_ids=run_ids, runs_total=len(run_summaries),
                        all_runs=run_summaries, n_values=sorted(system.by_n),
                        out_of_scope_attempts=out_of_scope_attempts, near_misses=near_misses,
                        near_miss_total=near_miss_total, not_reexecuted=not_reexecuted,
                        standing_pk=standing.pk if standing is not None else None)


# A system's samples in the order its page and exports list them.
_SAMPLE_ORDER = ("sample__n", "sample__paper__paper_id", "sample__sample_id", "sample_id")


def _explore_url_maker(slug: str):
    """A function from (paper, sample id) to the attempts explorer showing the system's attempts at
    that sample (None while the explorer is not wired up)."""
    try:
        base = reverse("leaderboard:explore")
    except NoReverseMatch:
        return lambda paper, sample_id: None
    return lambda paper, sample_id: f"{base}?{urlencode({'system': slug, 'paper': paper, 'sample': sample_id})}"


def _verifier_choices(run_ids: list[int]) -> Iterator[tuple[int, str, int, int]]:
    """(sample pk, verifier label, chosen attempt pk, run pk) of the runs' verifier selections,
    streamed, oldest run first, so that a dict built from them keeps the newest run's choice."""
    rows = VerifierSelection.objects.filter(run_id__in=run_ids).order_by("run_id").values_list(
        "sample_id", "verifier", "attempt_id", "run_id"
    )
    for sample_pk, verifier, attempt_id, run_id in rows.iterator(chunk_size=5000):
        yield sample_pk, verifier_label(verifier), attempt_id, run_id


def system_samples_page(*, detail: SystemDetail, filters: LeaderboardFilters, number: str | None) -> Page:
    """Page `number` (from 1; None: the first) of the system's samples in the n range of `filters`,
    SYSTEM_SAMPLES_PER_PAGE to a page, each summarised as the system's last refresh stored it
    (SystemSampleStanding: two queries, the count and an index range, whatever the number of
    attempts). A verifier's choice in a run hidden since is left out. Raises BadPage, whose
    message names the pages there are."""
    stored = SystemSampleStanding.objects.none()
    if detail.standing_pk is not None:
        stored = SystemSampleStanding.objects.filter(Q(standing_id=detail.standing_pk) & _n_filter(filters, ""))
    counted, passes = ("counted_verified", "passes_verified") if filters.verified_only else ("counted", "passes")
    stored = stored.order_by("n", "paper", "sample_name", "sample_id").values_list(
        "sample_id", "sample_name", "paper", "n", "ended", counted, passes, "errors", "out_of_scope", "choices"
    )
    page = page_get(stored, number=number, per_page=SYSTEM_SAMPLES_PER_PAGE, parameter="samples_page", what="samples")
    explore_url = _explore_url_maker(detail.system.slug)
    attempt_url = attempt_url_maker()
    public = set(detail.run_ids)
    rows = []
    for sample_pk, name, paper, n, ended, counted_m, passed, errors, out_of_scope, choices in page.object_list:
        row = SampleSummary(
            sample_pk=sample_pk, sample_id=name, paper=paper, n=n, total=ended, counted=counted_m, passes=passed,
            errors=errors, out_of_scope=out_of_scope, attempts_url=explore_url(paper, name),
            choices={label: pk for label, (pk, run_id) in choices.items() if run_id in public},
        )
        row.choice_links = [(label, pk, attempt_url(pk)) for label, pk in row.choices.items()]
        rows.append(row)
    page.object_list = rows
    return page


@dataclass
class SystemPageRows:
    """What a system's page lists, computed at its refresh (leaderboard.standings stores them): per
    sample (SystemSampleStanding's fields), per run and n (SystemRunStanding's) and its nearest near
    misses per counting rule and n (SystemNearMiss's)."""

    samples: list[dict]
    runs: list[dict]
    near_misses: list[dict]


def system_page_rows_computed(run_ids: list[int]) -> SystemPageRows:
    """What the page of the system whose public runs are `run_ids` lists, from their attempts (three
    grouped queries, the verifier choices streamed, and one LIMIT query per counting rule and n
    with near misses): a refresh's work, never a request's."""
    if not run_ids:
        return SystemPageRows(samples=[], runs=[], near_misses=[])
    every, verified = LeaderboardFilters(verified_only=False), LeaderboardFilters(verified_only=True)
    attempts = Attempt.objects.filter(run_id__in=run_ids).order_by()
    out_of_scope = ~Q(out_of_scope_edits=[])
    per_sample = attempts.values("sample_id").annotate(
        ended=Count("pk", filter=Q(status__in=ENDED_STATUSES)),
        errors=Count("pk", filter=Q(status=Attempt.ERROR)),
        out_of_scope=Count("pk", filter=out_of_scope),
        counted=Count("pk", filter=counted_q(every)),
        passes=Count("pk", filter=counted_q(every) & filters_passes_q(every)),
        counted_verified=Count("pk", filter=counted_q(verified)),
        passes_verified=Count("pk", filter=counted_q(verified) & filters_passes_q(verified)),
    )
    # Grouped by sample id alone, then joined to the few groups' samples (grouping by the sample's
    # columns would join every attempt first).
    sql, params = per_sample.query.sql_with_params()
    statement = (
        "SELECT grouped.*, sample.n, paper.paper_id, sample.sample_id AS sample_name "
        f"FROM ({sql}) grouped JOIN {Sample._meta.db_table} sample ON sample.id = grouped.sample_id "
        f"JOIN {Paper._meta.db_table} paper ON paper.id = sample.paper_id"
    )
    with connections[per_sample.db].cursor() as cursor:
        cursor.execute(statement, params)
        names = ["paper" if column.name == "paper_id" else column.name for column in cursor.description]
        samples = {row[0]: {**dict(zip(names, row)), "choices": {}} for row in cursor.fetchall()}
    for sample_pk, label, attempt_id, run_id in _verifier_choices(run_ids):
        if sample_pk in samples:
            samples[sample_pk]["choices"][label] = [attempt_id, run_id]

    near = {flag: _near_miss_q(LeaderboardFilters(verified_only=flag)) for flag in (False, True)}
    per_status = attempts.values("run_id", "status", n=F("sample__n")).annotate(
        count=Count("pk"),
        not_reexecuted=Count("pk", filter=Q(status=Attempt.DONE, reexecution_passed__isnull=True)),
        out_of_scope=Count("pk", filter=out_of_scope),
        near_misses=Count("pk", filter=near[False]),
        near_misses_verified=Count("pk", filter=near[True]),
    )
    runs: dict[tuple[int, int], dict] = {}
    for row in per_status:
        own = runs.setdefault((row["run_id"], row["n"]), {
            "run_id": row["run_id"], "n": row["n"], "by_status": {}, "not_reexecuted": 0, "out_of_scope": 0,
            "near_misses": 0, "near_misses_verified": 0,
        })
        own["by_status"][row["status"]] = row["count"]
        for name in ("not_reexecuted", "out_of_scope", "near_misses", "near_misses_verified"):
            own[name] += row[name]

    near_misses = []
    for flag, column in ((False, "near_misses"), (True, "near_misses_verified")):
        for n in sorted({own["n"] for own in runs.values() if own[column]}):
            nearest = (
                attempts.filter(near[flag], sample__n=n)
                .order_by("tolerance_ratio", "sample__sample_id", "pk")
                .values_list("pk", "run_id", "index", "sample__sample_id", "tolerance_ratio", "reexecution_passed")
            )[:NEAR_MISS_LIMIT]
            near_misses += [
                {"verified_only": flag, "n": n, "attempt_id": pk, "run_id": run_id, "index": index,
                 "sample_name": sample_name, "tolerance_ratio": ratio, "verified": reexecuted is not None}
                for pk, run_id, index, sample_name, ratio, reexecuted in nearest
            ]
    return SystemPageRows(samples=list(samples.values()), runs=list(runs.values()), near_misses=near_misses)


def system_sample_rows(*, run_ids: list[int], filters: LeaderboardFilters) -> Iterator[dict]:
    """Every sample of the system in the n range of `filters`, with the ids of all its attempts and
    of those that pass (the samples export: complete, whatever its size). Streamed from the database
    in chunks: memory holds one sample's attempts and the verifier choices (a few per sample)."""
    choices: dict[int, dict[str, int]] = {}
    for sample_pk, label, attempt_id, _ in _verifier_choices(run_ids):
        choices.setdefault(sample_pk, {})[label] = attempt_id
    attempts = (
        Attempt.objects.filter(Q(run_id__in=run_ids) & _n_filter(filters, "sample__"))
        .order_by(*_SAMPLE_ORDER, "run_id", "index")
        .values_list("pk", "status", "passed", "reported_passed", "reexecution_passed", *_SAMPLE_ORDER)
    )
    current = None
    for pk, status, passed, reported, reexecuted, n, paper, sample_id, sample_pk in attempts.iterator(chunk_size=2000):
        if current is None or current["sample_pk"] != sample_pk:
            if current is not None:
                yield current
            current = {
                "sample_pk": sample_pk, "sample_id": sample_id, "paper": paper, "n": n, "attempts": 0, "passes": 0,
                "errors": 0, "attempt_ids": [], "passed_attempt_ids": [], "verifier_choices": choices.get(sample_pk, {}),
            }
        verified = reexecuted is not None
        current["attempt_ids"].append(pk)
        current["errors"] += status == Attempt.ERROR
        if status == Attempt.DONE and (verified or not filters.verified_only):
            current["attempts"] += 1
            if passed if verified else reported:
                current["passes"] += 1
                current["passed_attempt_ids"].append(pk)
    if current is not None:
        yield current


def _url_maker(name: str, marker):
    """A function from the one argument of URL `name` to the URL (None if that page is not wired up).

    One reverse() then string substitution: reversing per row would cost more than the query."""
    template = _url(name, marker)
    if template is None:
        return lambda value: None
    head, _, tail = template.rpartition(str(marker))
    return lambda value: f"{head}{value}{tail}"


def attempt_url_maker():
    """A function from attempt pk to its trajectory page URL (None if that page is not wired up)."""
    return _url_maker("replay:attempt", 987654321)


# --- filter choices ----------------------------------------------------------------------------------


def filter_choices() -> dict[str, list[str]]:
    """Suite names and agent names that exist, for the filter form (two small queries)."""
    return {
        "suites": list(Suite.objects.order_by("name").values_list("name", flat=True)),
        "agents": sorted(set(Run.objects.filter(public_runs_q()).order_by().values_list("agent", flat=True).distinct())),
    }
