"""Reads of the leaderboard's stored numbers: the board of systems (`leaderboard_get`), the
per-function difficulty (`function_difficulty`), one system's page (`system_detail`,
`system_samples_page`) and the exports' rows.

Systems' numbers are never computed in a request: the refresh (leaderboard.standings, with
leaderboard.computation) stores them after each change, and every read here takes what it stored
(a fixed number of queries). Who may see a run is never stored: each read keeps a stored system only
with its runs that are public now (`standings_shown_runs`, one query), so a run hidden or deleted
leaves every page in the request that hid it; only the numbers of what stays wait for the refresh
(marked as being updated). The rules the numbers follow are leaderboard.rules'.
"""
from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime

import pandas as pd
from django.core.paginator import Page
from django.db.models import Count, Q, Sum
from django.urls import get_script_prefix

from leaderboard.curves import CurveFit
from leaderboard.links import attempt_url_maker, explore_url_maker, url_maker
from leaderboard.metrics import Leaderboard, NMetrics, PassRates, SystemRow, curve_fit_loaded, metrics_loaded
from leaderboard.models import (
    SystemFunctionStanding,
    SystemNearMiss,
    SystemRunStanding,
    SystemSampleStanding,
    SystemStanding,
    SystemStandingByN,
)
from leaderboard.paging import page_get
from leaderboard.pareto import cost_accuracy
from leaderboard.rules import (
    NEAR_MISS_LIMIT,
    TOLERANCES,
    LeaderboardFilters,
    n_range_q,
    runs_frame,
    system_key_q,
    verifier_choices,
)
from leaderboard.sorting import default_sort, sort_systems
from runs.models import Attempt, Function, Run, Suite
from runs.visibility import public_run_ids, public_runs_q

# A system's page lists its samples (summarised) and its runs this many at a time / at most, so
# that its size does not grow with the system's attempts or uploads; the exports hold them all.
SYSTEM_SAMPLES_PER_PAGE = 100
SYSTEM_RUNS_SHOWN = 50
# The leaderboard lists its systems this many at a time (HTML and JSON; the CSV holds them all): one
# account can add systems without end by varying a model's name.
LEADERBOARD_PER_PAGE = 100


# --- the stored standings and their public runs --------------------------------------------------------


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
        & n_range_q(filters, "")
    ).values_list("standing_id", "n", "metrics")
    for standing_id, n, metrics in stored:
        by_standing.setdefault(standing_id, {})[n] = metrics_loaded(metrics, tolerances=tolerances, tolerance=filters.tolerance)
    rows = []
    system_url, suite_url = url_maker("leaderboard:system", "slugmarker"), url_maker("leaderboard:benchmark_suite", "slugmarker")
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
            fit=curve_fit_loaded(standing, filters.verified_only),
        )
        row.set_totals()
        rows.append(row)
    return rows


# --- the leaderboard ---------------------------------------------------------------------------------


def leaderboard_get(*, filters: LeaderboardFilters) -> Leaderboard:
    """The measured systems for `filters`, sorted, as last computed by leaderboard.standings, each
    with its runs that are public now (a system with none is not shown: `standings_shown_runs`).

    Two queries while the standings and their public runs are as this process last saw them (the
    standings' marks, read as plain tuples, which stays cheap at thousands of systems, and whether
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


# Building a board (decoding its systems' stored numbers, sorting, the Pareto frontier) costs far more
# than the two queries that say it would be the same: the boards of a few views (the first one, a few
# sorts and filters) are kept.
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
                Q(standing_id__in=standings, verified_only=filters.verified_only) & n_range_q(filters, "")
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
    system = _system_row(standing, slug, runs, filters)
    counts = _stored_run_counts(standing, run_ids, filters)
    refreshed_runs = set(standing.run_ids) if standing is not None else set()
    run_summaries = _run_summaries(runs, counts, refreshed_runs)
    return SystemDetail(system=system, runs=run_summaries[:SYSTEM_RUNS_SHOWN], run_ids=run_ids, runs_total=len(run_summaries),
                        all_runs=run_summaries, n_values=sorted(system.by_n),
                        out_of_scope_attempts=counts.out_of_scope,
                        near_misses=_nearest_misses(standing, run_ids, filters, counts.near_misses),
                        near_miss_total=counts.near_misses, not_reexecuted=counts.not_reexecuted,
                        standing_pk=standing.pk if standing is not None else None)


def _system_row(standing: SystemStanding | None, slug: str, runs: pd.DataFrame, filters: LeaderboardFilters) -> SystemRow:
    """The system as its refresh stored it, with its runs public now (`runs`, whatever the stored numbers
    were last computed from); without stored numbers in `filters`' n range, its key alone, marked as
    being updated when it has none at all."""
    run_ids = [int(pk) for pk in runs["run_id"]]
    if standing is not None:
        built = _standing_rows([standing], filters, shown_runs={standing.pk: tuple(run_ids)}, tolerances=TOLERANCES)
        if built:
            return built[0]
    first = runs.iloc[0]
    return SystemRow(
        slug=slug, suite=first["suite"], agent=first["agent"], model=first["model"], config=first["agent_config"] or {},
        config_json=first["config_json"], context=first["context"], run_ids=run_ids, k=int(runs["k"].max()), by_n={},
        stale=standing is None or standing.stale,
    )


@dataclass
class _StoredRunCounts:
    """What a system's refresh stored of its runs (SystemRunStanding), summed over the n in view."""

    by_run: dict[int, dict[str, int]]  # run pk -> its attempts by status
    unverified_runs: set[int] = field(default_factory=set)  # runs with done attempts not re-executed
    not_reexecuted: int = 0
    out_of_scope: int = 0
    near_misses: int = 0  # under the view's counting rule


def _stored_run_counts(standing: SystemStanding | None, run_ids: list[int], filters: LeaderboardFilters) -> _StoredRunCounts:
    """The counts the system's refresh stored of `run_ids` (all zero while it has stored none)."""
    counts = _StoredRunCounts(by_run={pk: {} for pk in run_ids})
    if standing is None:
        return counts
    stored = SystemRunStanding.objects.filter(
        Q(standing=standing, run_id__in=run_ids) & n_range_q(filters, "")
    ).values_list("run_id", "by_status", "not_reexecuted", "out_of_scope", "near_misses", "near_misses_verified")
    for run_id, by_status, run_not_reexecuted, out_of_scope, near, near_verified in stored:
        own = counts.by_run[run_id]
        for status, count in by_status.items():
            own[status] = own.get(status, 0) + count
        if run_not_reexecuted:
            counts.unverified_runs.add(run_id)
        counts.not_reexecuted += run_not_reexecuted
        counts.out_of_scope += out_of_scope
        counts.near_misses += near_verified if filters.verified_only else near
    return counts


def _nearest_misses(standing: SystemStanding | None, run_ids: list[int], filters: LeaderboardFilters,
                    total: int) -> list[NearMiss]:
    """The system's stored near misses among `run_ids`, nearest first, at most NEAR_MISS_LIMIT (no query
    when it has none: `total`)."""
    if standing is None or not total:
        return []
    attempt_url = attempt_url_maker()
    nearest = (
        SystemNearMiss.objects.filter(
            Q(standing=standing, verified_only=filters.verified_only, run_id__in=run_ids) & n_range_q(filters, "")
        )
        .order_by("tolerance_ratio", "n", "sample_name", "attempt_id")
        .values_list("attempt_id", "run_id", "index", "sample_name", "n", "tolerance_ratio", "verified")
    )[:NEAR_MISS_LIMIT]
    return [NearMiss(pk, run_id, index, sample_id, n, ratio, verified, attempt_url(pk))
            for pk, run_id, index, sample_id, n, ratio, verified in nearest]


def _run_summaries(runs: pd.DataFrame, counts: _StoredRunCounts, refreshed_runs: set[int]) -> list[RunSummary]:
    """The system's public runs (`runs`), newest first, with their stored counts."""
    run_url = url_maker("runs:run_detail", 987654321)
    return [
        RunSummary(
            pk=int(run.run_id), created_at=run.created_at, finished_at=None if pd.isna(run.finished_at) else run.finished_at,
            n_values=run.n_values, k=int(run.k), counts=counts.by_run[run.run_id],
            verified=run.run_id not in counts.unverified_runs and counts.by_run[run.run_id].get(Attempt.DONE, 0) > 0,
            url=run_url(int(run.run_id)), refreshed=run.run_id in refreshed_runs,
        )
        for run in runs.sort_values("run_id", ascending=False).itertuples(index=False)
    ]


def system_samples_page(*, detail: SystemDetail, filters: LeaderboardFilters, number: str | None) -> Page:
    """Page `number` (from 1; None: the first) of the system's samples in the n range of `filters`,
    SYSTEM_SAMPLES_PER_PAGE to a page, each summarised as the system's last refresh stored it
    (SystemSampleStanding: two queries, the count and an index range, whatever the number of
    attempts). A verifier's choice in a run hidden since is left out. Raises BadPage, whose
    message names the pages there are."""
    stored = SystemSampleStanding.objects.none()
    if detail.standing_pk is not None:
        stored = SystemSampleStanding.objects.filter(Q(standing_id=detail.standing_pk) & n_range_q(filters, ""))
    counted, passes = ("counted_verified", "passes_verified") if filters.verified_only else ("counted", "passes")
    stored = stored.order_by("n", "paper", "sample_name", "sample_id").values_list(
        "sample_id", "sample_name", "paper", "n", "ended", counted, passes, "errors", "out_of_scope", "choices"
    )
    page = page_get(stored, number=number, per_page=SYSTEM_SAMPLES_PER_PAGE, parameter="samples_page", what="samples")
    explore_url = explore_url_maker(detail.system.slug)
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


# A system's samples in the order its page and exports list them.
_SAMPLE_ORDER = ("sample__n", "sample__paper__paper_id", "sample__sample_id", "sample_id")


def system_sample_rows(*, run_ids: list[int], filters: LeaderboardFilters) -> Iterator[dict]:
    """Every sample of the system in the n range of `filters`, with the ids of all its attempts and
    of those that pass (the samples export: complete, whatever its size). Streamed from the database
    in chunks: memory holds one sample's attempts and the verifier choices (a few per sample)."""
    choices: dict[int, dict[str, int]] = {}
    for sample_pk, label, attempt_id, _ in verifier_choices(run_ids):
        choices.setdefault(sample_pk, {})[label] = attempt_id
    attempts = (
        Attempt.objects.filter(Q(run_id__in=run_ids) & n_range_q(filters, "sample__"))
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


# --- filter choices ----------------------------------------------------------------------------------


def filter_choices() -> dict[str, list[str]]:
    """Suite names and agent names that exist, for the filter form (two small queries)."""
    return {
        "suites": list(Suite.objects.order_by("name").values_list("name", flat=True)),
        "agents": sorted(set(Run.objects.filter(public_runs_q()).order_by().values_list("agent", flat=True).distinct())),
    }
