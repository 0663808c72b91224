"""The standings computation: a system's numbers by n, its per-function counts, its difficulty curve
and what its page lists, computed from its public runs' attempts. Only the refresh runs it
(leaderboard.standings stores what `standing_numbers_computed` yields); a request never does: the
pages read what was stored (leaderboard.selectors), and an import-linter contract keeps the views
and the reads from importing this module.

Computing one system is a handful of queries whatever the number of its attempts: the database
groups attempts per (system, sample) with `.values(...).annotate(...)` and those per (system, n,
c of m) (`_grouped`), and pandas turns the few rows that come back into systems by n. The counting
rules are leaderboard.rules'.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from typing import NamedTuple

import pandas as pd
from django.db import connections
from django.db.models import Avg, Case, Count, F, FloatField, Q, Sum, Value, When

from leaderboard.curves import CurveFit, curve_fit
from leaderboard.metrics import DIAGNOSIS_KEYS, NO_TRANSPLANTS, NMetrics, SystemRow, mean_or_none
from leaderboard.models import VerifierSelection
from leaderboard.rules import (
    BOOTSTRAP_RESAMPLES,
    BOOTSTRAP_SEED,
    CONFIDENCE,
    ENDED_STATUSES,
    NEAR_MISS_FACTOR,
    NEAR_MISS_LIMIT,
    TOLERANCES,
    LeaderboardFilters,
    counted_q,
    filters_passes_q,
    n_range_q,
    runs_frame,
    system_case,
    tolerance_scale,
    verifier_choices,
    verifier_label,
)
from runs.benchmark.statistics import bootstrap_ci, pass_at_k
from runs.models import Attempt, Paper, Sample, Transplant

# --- one system's numbers, as the refresh stores them -------------------------------------------------


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
    system; its bootstrap intervals are most of the time a large one takes). A slug without public runs
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


def _sample_shares(summary: pd.DataFrame) -> dict[int, list[tuple[int, int, int]]]:
    """Per n, one system's samples with counted attempts as (c, m, how many samples): Pass@1's input,
    and its difficulty curve's."""
    shares: dict[int, list[tuple[int, int, int]]] = {}
    evaluated = summary[summary["m"] > 0]
    for n, c, m, times in zip(evaluated["n"], evaluated["c"], evaluated["m"], evaluated["samples"]):
        shares.setdefault(int(n), []).append((int(c), int(m), int(times)))
    return shares


# --- loading: a few grouped queries, whatever the number of attempts ------------------------------
#
# A system's runs are pooled per sample, so the unit is (system, sample). The database groups
# attempts per (system, sample) and then groups those per (system, n, c, m): what comes back is a
# few rows per system and n (one per distinct c-of-m), not one per attempt or sample. The system a
# run belongs to is decided in Python, by canonical JSON (leaderboard.rules.runs_frame), and handed
# to SQL as a CASE over run ids, so key order in agent_config never splits a system on any database.

_SUMMARY_COLUMNS = [
    "system_no", "n", "c", "m", "samples", "verified_m", "errors", "cost_sum", "cost_known", "seconds_sum", "seconds_known",
]


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
    leaderboard.rules.tolerance_scale)."""
    counted = counted_q(filters)
    attempts = Attempt.objects.filter(n_range_q(filters, "sample__"), run_id__in=[int(pk) for pk in runs["run_id"]])
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
            Q(run_id__in=[int(pk) for pk in runs["run_id"]]) & counted_q(filters, "attempt__") & n_range_q(filters, "sample__")
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
            counted_q(filters) & ~filters_passes_q(filters) & Q(sample__n__gte=2) & n_range_q(filters, "sample__"),
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


# --- systems by n from the grouped rows ----------------------------------------------------------------


def _none_if_nan(value) -> float | None:
    if value is None:
        return None
    value = float(value)
    return None if math.isnan(value) else value


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
    systems = _measured_systems(runs, set(summary["system_no"]))
    scores = _verifier_scores(verifiers)
    summary = summary.assign(attempts=summary["m"] * summary["samples"])
    per_n = summary.groupby(["system_no", "n"], sort=True)[_SUMS].sum()
    evaluated = summary[summary["m"] > 0].sort_values(["system_no", "n", "c", "m"])
    triples = _sample_triples(evaluated)
    tolerance_sums = _tolerance_sums(evaluated, tolerances)
    for (number, n), totals in zip(per_n.index, per_n.itertuples(index=False)):
        key = (int(number), int(n))
        system = systems[key[0]]
        system.by_n[key[1]] = _n_metrics(
            system, key[1], totals, triples.get(key, ()), scores.get(key, ({}, {})), tolerance_sums.get(key, {}),
            tolerance=tolerance,
            diagnoses=dict(diagnoses.get(key, dict.fromkeys(DIAGNOSIS_KEYS, 0))) if diagnoses is not None and n >= 2 else {},
        )
    for system in systems.values():
        system.set_totals()
    return list(systems.values())


# The per-(system, n) sums of the summary's rows that NMetrics is made of.
_SUMS = ["verified_m", "errors", "cost_sum", "cost_known", "seconds_sum", "seconds_known", "attempts"]


def _measured_systems(runs: pd.DataFrame, measured: set[int]) -> dict[int, SystemRow]:
    """By system number, the systems of `runs` among `measured`, with their key and run facts and no numbers yet."""
    systems: dict[int, SystemRow] = {}
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
    return systems


def _verifier_scores(verifiers: pd.DataFrame) -> dict[tuple[int, int], tuple[dict[str, float], dict[str, int]]]:
    """Per (system, n): each verifier's Pass@1 and how many samples it chose among, by its label."""
    scores: dict[tuple[int, int], tuple[dict, dict]] = {}
    for row in verifiers.itertuples(index=False):
        chosen, counts = scores.setdefault((int(row.system_no), int(row.n)), ({}, {}))
        label = verifier_label(row.verifier)
        chosen[label], counts[label] = float(row.score), int(row.samples)
    return scores


def _sample_triples(evaluated: pd.DataFrame) -> dict[tuple[int, int], tuple[tuple[int, int, int], ...]]:
    """Per (system, n): (c, m, how many samples) in canonical order (`evaluated` is sorted by them): the
    bootstrap's input, compactly."""
    triples: dict[tuple[int, int], list[tuple[int, int, int]]] = {}
    for number, n, c, m, times in zip(evaluated["system_no"], evaluated["n"], evaluated["c"], evaluated["m"], evaluated["samples"]):
        triples.setdefault((int(number), int(n)), []).append((int(c), int(m), int(times)))
    return {key: tuple(value) for key, value in triples.items()}


def _tolerance_sums(evaluated: pd.DataFrame, tolerances: tuple[float, ...]) -> dict[tuple[int, int], dict[float, float]]:
    """Per (system, n) and tolerance: the sum over samples of c_t / m (Pass@1 at t once divided by the samples)."""
    sums: dict[tuple[int, int], dict[float, float]] = {}
    for index, tol in enumerate(tolerances):
        shares = evaluated[_tolerance_column(index)] / evaluated["m"]
        for (number, n), total in shares.groupby([evaluated["system_no"], evaluated["n"]]).sum().items():
            sums.setdefault((int(number), int(n)), {})[tol] = float(total)
    return sums


def _passk(counts_cm: tuple[tuple[int, int, int], ...], k: int) -> tuple[float | None, int]:
    """Pass@k over the samples with at least k counted attempts, and how many samples those are
    ((None, 0) at k = 1, or without such a sample)."""
    if k <= 1:
        return None, 0
    usable = [(c, m, times) for c, m, times in counts_cm if m >= k]
    eligible = sum(times for _, _, times in usable)
    if not eligible:
        return None, 0
    return sum(_pass_at_k(m, c, k) * times for c, m, times in usable) / eligible, eligible


def _n_metrics(
    system: SystemRow, n: int, totals, counts_cm: tuple[tuple[int, int, int], ...],
    scores: tuple[dict[str, float], dict[str, int]], tolerance_sums: dict[float, float], *, tolerance: float | None,
    diagnoses: dict[str, int],
) -> NMetrics:
    """`system` at `n`, from its summed `totals` (a row of `_SUMS`), its (c, m, how many samples) triples,
    its verifiers' scores and its tolerance sums."""
    estimate = low = high = None
    if counts_cm:
        estimate, low, high = _interval(counts_cm)
    passk, eligible = _passk(counts_cm, system.k)
    attempts = int(totals.attempts)
    chosen, counts = scores
    samples = sum(times for _, _, times in counts_cm)
    return NMetrics(
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
        cost_mean=mean_or_none(totals.cost_sum, int(totals.cost_known)),
        cost_unknown=attempts - int(totals.cost_known),
        seconds_mean=mean_or_none(totals.seconds_sum, int(totals.seconds_known)),
        pass1_at={tol: total / samples for tol, total in tolerance_sums.items()},
        tolerance=tolerance,
        diagnoses=diagnoses,
        verified_attempts=int(totals.verified_m),
        cost_sum=float(totals.cost_sum),
        cost_known=int(totals.cost_known),
        seconds_sum=float(totals.seconds_sum),
        seconds_known=int(totals.seconds_known),
    )


# --- per-function counts --------------------------------------------------------------------------------


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
            & n_range_q(filters, "attempt__sample__"),
            attempt__run_id__in=[int(pk) for pk in runs["run_id"]],
            verdict__in=[Transplant.Verdict.RIGHT, Transplant.Verdict.WRONG],
        )
        .order_by()
        .values("function_id", n=F("attempt__sample__n"))
        .annotate(right=Count("id", filter=Q(verdict=Transplant.Verdict.RIGHT)), wrong=Count("id", filter=Q(verdict=Transplant.Verdict.WRONG)))
        .values_list("function_id", "n", "right", "wrong")
    )
    return {(int(pk), int(n)): (int(right), int(wrong)) for pk, n, right, wrong in rows}


# --- what a system's page lists -------------------------------------------------------------------------


@dataclass
class SystemPageRows:
    """What a system's page lists, computed at its refresh (leaderboard.standings stores them): per
    sample (SystemSampleStanding's fields), per run and n (SystemRunStanding's) and its nearest near
    misses per counting rule and n (SystemNearMiss's)."""

    samples: list[dict]
    runs: list[dict]
    near_misses: list[dict]


def _near_miss_q(filters: LeaderboardFilters) -> Q:
    """A counted attempt that failed with every number within NEAR_MISS_FACTOR of its tolerance."""
    return (
        counted_q(filters) & ~filters_passes_q(filters)
        & Q(tolerance_ratio__gt=1, tolerance_ratio__lte=NEAR_MISS_FACTOR)
    )


def system_page_rows_computed(run_ids: list[int]) -> SystemPageRows:
    """What the page of the system whose public runs are `run_ids` lists, from their attempts (three
    grouped queries, the verifier choices streamed, and one LIMIT query per counting rule and n
    with near misses): a refresh's work, never a request's."""
    if not run_ids:
        return SystemPageRows(samples=[], runs=[], near_misses=[])
    attempts = Attempt.objects.filter(run_id__in=run_ids).order_by()
    near = {flag: _near_miss_q(LeaderboardFilters(verified_only=flag)) for flag in (False, True)}
    samples = _page_samples(attempts, run_ids)
    runs = _page_runs(attempts, near)
    return SystemPageRows(samples=samples, runs=runs, near_misses=_page_near_misses(attempts, runs, near))


# Attempts whose final patch edited outside the task (re-execution dropped those edits).
_OUT_OF_SCOPE = ~Q(out_of_scope_edits=[])


def _page_samples(attempts, run_ids: list[int]) -> list[dict]:
    """Per sample of `attempts`: SystemSampleStanding's fields (one grouped query, the verifier choices streamed)."""
    every, verified = LeaderboardFilters(verified_only=False), LeaderboardFilters(verified_only=True)
    per_sample = attempts.values("sample_id").annotate(
        ended=Count("pk", filter=Q(status__in=ENDED_STATUSES)),
        errors=Count("pk", filter=Q(status=Attempt.ERROR)),
        out_of_scope=Count("pk", filter=_OUT_OF_SCOPE),
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
    for sample_pk, label, attempt_id, run_id in verifier_choices(run_ids):
        if sample_pk in samples:
            samples[sample_pk]["choices"][label] = [attempt_id, run_id]
    return list(samples.values())


def _page_runs(attempts, near: dict[bool, Q]) -> list[dict]:
    """Per (run, n) of `attempts`: SystemRunStanding's fields (one grouped query)."""
    per_status = attempts.values("run_id", "status", n=F("sample__n")).annotate(
        count=Count("pk"),
        not_reexecuted=Count("pk", filter=Q(status=Attempt.DONE, reexecution_passed__isnull=True)),
        out_of_scope=Count("pk", filter=_OUT_OF_SCOPE),
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
    return list(runs.values())


def _page_near_misses(attempts, runs: list[dict], near: dict[bool, Q]) -> list[dict]:
    """The nearest NEAR_MISS_LIMIT near misses of `attempts` per counting rule and n that has any (by
    `runs`' counts, `_page_runs`): SystemNearMiss's fields (one LIMIT query each)."""
    near_misses = []
    for flag, column in ((False, "near_misses"), (True, "near_misses_verified")):
        for n in sorted({own["n"] for own in runs if own[column]}):
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
    return near_misses
