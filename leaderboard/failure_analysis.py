"""The paper's failure analyses computed for one system, by n, and its error taxonomy (the system page).

Read from what is stored when an attempt is scored and analysed (Attempt.outcome, AttemptAnalysis,
AttemptException; runs.analysis), never from a trajectory: a constant number of grouped queries
whatever the number of attempts.

The rules (also shown on the page):

- The attempts are the system's public runs' (as the rest of the page) at the page's n; the
  counted ones are status done (and re-executed, under "verified only").
- Outcome split: every counted attempt by its outcome. Infrastructure and model provider failures
  (status error, or a done attempt whose outcome says so) are shown apart and are not in the
  denominator. "No answer" includes unparseable answers, as in the paper.
- Crash and recovery: of the counted attempts that ran an experiment (a step that ran the paper's
  Python code), the share whose first such run crashed; of those, the share that later reached a
  working run (exit 0 and a printed result). Steps, time and cost to the first working run are
  over the attempts that reached one (cost: over those whose cost is known).
- Error taxonomy: the exceptions of the counted attempts (in steps' output and in the
  re-execution output), grouped by type and message pattern.

Every number links to the attempts behind it in the attempts explorer (leaderboard:explore),
and each exception pattern to example attempts at the step where it occurred.
"""
from __future__ import annotations

import statistics
from collections import defaultdict
from dataclasses import dataclass, field
from decimal import Decimal
from urllib.parse import urlencode

from django.db import connections
from django.db.models import Aggregate, Avg, Count, F, FloatField, Q, Window
from django.db.models.functions import DenseRank, RowNumber
from django.urls import NoReverseMatch, reverse

from leaderboard import reference as paper
from leaderboard.models import SystemExceptionStanding, SystemFailureStanding
from leaderboard.rules import LeaderboardFilters, counted_q, n_range_q
from runs.analysis.links import step_url_maker
from runs.analysis.outcomes import shown_outcome_expression
from runs.models import Attempt, AttemptException

TAXONOMY_LIMIT = 20
EXAMPLES_PER_PATTERN = 3

# The outcome split's rows, in the page's order: (key, label, the outcomes it holds). Keys are
# Attempt.Outcome.choices keys (the explorer's outcome= values) except "no_answer_any", which holds two.
NO_ANSWER_ANY = "no_answer_any"
UNCLASSIFIED = "unclassified"
COUNTED_ROWS = [
    (Attempt.PASSED, "Passed", (Attempt.PASSED,)),
    (Attempt.WRONG_ANSWER, "Wrong answer", (Attempt.WRONG_ANSWER,)),
    (NO_ANSWER_ANY, "No answer (incl. unparseable)", (Attempt.NO_ANSWER, Attempt.UNPARSEABLE_ANSWER)),
    (Attempt.NO_ANSWER, "no answer given", (Attempt.NO_ANSWER,)),
    (Attempt.UNPARSEABLE_ANSWER, "answer could not be parsed", (Attempt.UNPARSEABLE_ANSWER,)),
    (Attempt.REEXECUTION_FAILED, "Crashed or timed out in re-execution", (Attempt.REEXECUTION_FAILED,)),
    (Attempt.BUDGET_EXHAUSTED, "Step, time or cost budget exhausted", (Attempt.BUDGET_EXHAUSTED,)),
    (Attempt.OUT_OF_SCOPE, "Edits outside the task dropped", (Attempt.OUT_OF_SCOPE,)),
    (UNCLASSIFIED, "Not classified yet", ("",)),
]
# Rows shown indented under the one before them (the parts of "No answer").
PART_ROWS = {Attempt.NO_ANSWER, Attempt.UNPARSEABLE_ANSWER}
# Not the model's doing: shown apart, never in the denominator.
APART_OUTCOMES = (Attempt.INFRASTRUCTURE, Attempt.MODEL_PROVIDER, Attempt.NOT_PREPARED)
APART_ROWS = [
    (Attempt.INFRASTRUCTURE, "Sandbox or worker failure", (Attempt.INFRASTRUCTURE,)),
    (Attempt.MODEL_PROVIDER, "Model provider error", (Attempt.MODEL_PROVIDER,)),
    (Attempt.NOT_PREPARED, "Environment or data not prepared", (Attempt.NOT_PREPARED,)),
    (UNCLASSIFIED, "Error, cause not recorded", ("",)),
]
# The paper's outcome split, as fractions, by row key.
PAPER_OUTCOMES = {
    Attempt.PASSED: paper.FAILURE_ANALYSIS.passed / 100,
    Attempt.WRONG_ANSWER: paper.FAILURE_ANALYSIS.wrong_answer / 100,
    NO_ANSWER_ANY: paper.FAILURE_ANALYSIS.no_answer / 100,
}


# --- what the page shows ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Cell:
    """A count at one n, its share of the denominator (None: nothing to divide by, or shown apart)
    and the attempts behind it."""

    n: int
    count: int
    share: float | None
    url: str | None

    def as_dict(self) -> dict:
        return {"count": self.count, "share": self.share, "url": self.url}


@dataclass
class OutcomeRow:
    key: str
    label: str
    cells: list[Cell]
    paper: float | None = None  # the paper's share (GPT-4o, n = 1), a fraction
    part: bool = False  # one part of the row above it

    @property
    def total(self) -> int:
        return sum(cell.count for cell in self.cells)

    def as_dict(self) -> dict:
        return {"key": self.key, "label": self.label, "by_n": {str(c.n): c.as_dict() for c in self.cells},
                "paper": self.paper, "part_of_previous": self.part}


@dataclass
class TrajectoryStats:
    """Crash, recovery and the way to the first working run at one n (counted attempts)."""

    n: int
    counted: int = 0
    analysed: int = 0  # counted attempts whose trajectory was analysed
    ran: int = 0  # ... that ran an experiment
    crashed: int = 0  # ... whose first experiment run crashed
    recovered: int = 0  # ... of those, that reached a working run later
    working: int = 0  # attempts that reached a working run, crashed first or not
    steps_mean: float | None = None
    steps_median: float | None = None
    seconds_mean: float | None = None
    seconds_median: float | None = None
    cost_mean: float | None = None
    cost_median: float | None = None
    cost_known: int = 0
    urls: dict[str, str | None] = field(default_factory=dict)  # crashed, not_crashed, recovered, not_recovered, working

    @property
    def crash_share(self) -> float | None:
        return self.crashed / self.ran if self.ran else None

    @property
    def recovery_share(self) -> float | None:
        return self.recovered / self.crashed if self.crashed else None

    def as_dict(self) -> dict:
        return {
            "n": self.n, "counted": self.counted, "analysed": self.analysed, "ran_experiment": self.ran,
            "first_run_crashed": self.crashed, "first_run_crashed_share": self.crash_share,
            "recovered": self.recovered, "recovered_share": self.recovery_share, "reached_working_run": self.working,
            "steps_to_working": {"mean": self.steps_mean, "median": self.steps_median},
            "seconds_to_working": {"mean": self.seconds_mean, "median": self.seconds_median},
            "cost_to_working": {"mean": self.cost_mean, "median": self.cost_median, "known": self.cost_known},
            "urls": dict(self.urls),
        }


@dataclass
class FailureAnalysis:
    n_values: list[int]
    counted: dict[int, int]  # the denominator of the outcome split, by n
    outcomes: list[OutcomeRow]
    apart: list[OutcomeRow]  # infrastructure and model provider failures: counts only
    trajectories: list[TrajectoryStats]
    paper: paper.ReferenceFailureAnalysis = paper.FAILURE_ANALYSIS

    @property
    def analysed(self) -> int:
        return sum(stats.analysed for stats in self.trajectories)

    @property
    def counted_total(self) -> int:
        return sum(self.counted.values())

    @property
    def classified(self) -> int:
        unclassified = next((row.total for row in self.outcomes if row.key == UNCLASSIFIED), 0)
        return self.counted_total - unclassified

    @property
    def paper_n(self) -> int | None:
        """The n whose column the paper's values stand beside (None: that n is not shown)."""
        return self.paper.n if self.paper.n in self.n_values else None

    @property
    def paper_crash_share(self) -> float:
        return self.paper.first_run_crashed / 100

    @property
    def paper_recovery_share(self) -> float:
        return self.paper.recovered / 100

    def as_dict(self) -> dict:
        return {
            "n_values": self.n_values,
            "counted": {str(n): count for n, count in self.counted.items()},
            "classified": self.classified,
            "analysed": self.analysed,
            "outcomes": [row.as_dict() for row in self.outcomes],
            "shown_apart": [row.as_dict() for row in self.apart],
            "trajectories": [stats.as_dict() for stats in self.trajectories],
            "paper": {
                "label": self.paper.label, "model": self.paper.model, "agent": self.paper.agent, "n": self.paper.n,
                "passed": self.paper.passed / 100, "wrong_answer": self.paper.wrong_answer / 100,
                "no_answer": self.paper.no_answer / 100, "first_run_crashed": self.paper_crash_share,
                "recovered": self.paper_recovery_share, "source": self.paper.source, "source_url": paper.SOURCE_URL,
                "reference": True,
            },
        }


@dataclass(frozen=True)
class Example:
    attempt_pk: int
    step: int | None  # None: the re-execution output
    message: str
    url: str | None


@dataclass
class TaxonomyRow:
    exception_type: str
    pattern: str
    cells: list[tuple[int, int, int, str | None]]  # (n, attempts, occurrences, explorer url)
    examples: list[Example] = field(default_factory=list)
    url: str | None = None  # the explorer, by exception type

    @property
    def attempts(self) -> int:
        return sum(cell[1] for cell in self.cells)

    @property
    def occurrences(self) -> int:
        return sum(cell[2] for cell in self.cells)

    def as_dict(self) -> dict:
        return {
            "exception_type": self.exception_type, "pattern": self.pattern, "attempts": self.attempts,
            "occurrences": self.occurrences, "url": self.url,
            "by_n": {str(n): {"attempts": attempts, "occurrences": occurrences, "url": url}
                     for n, attempts, occurrences, url in self.cells},
            "examples": [{"attempt_id": e.attempt_pk, "step": e.step, "message": e.message, "url": e.url}
                         for e in self.examples],
        }


@dataclass
class ErrorTaxonomy:
    n_values: list[int]
    rows: list[TaxonomyRow]  # the TAXONOMY_LIMIT most frequent patterns
    patterns: int  # every distinct (type, pattern)
    attempts: dict[int, int]  # counted attempts with at least one exception, by n
    occurrences: dict[int, int]  # exceptions, by n

    def as_dict(self) -> dict:
        return {
            "limit": TAXONOMY_LIMIT,
            "patterns": self.patterns,
            "attempts_with_exception": {str(n): count for n, count in self.attempts.items()},
            "occurrences": {str(n): count for n, count in self.occurrences.items()},
            "rows": [row.as_dict() for row in self.rows],
        }


# --- links --------------------------------------------------------------------------------------------


def explorer_url_maker(*, slug: str, filters: LeaderboardFilters, status: str | None = None):
    """A function from explorer parameters to the URL of the attempts explorer showing this system's
    attempts (None while that page is not wired up). "verified only" carries over; `status` keeps
    the list to attempts of that status (the crash figures and the taxonomy count done ones)."""
    try:
        base = reverse("leaderboard:explore")
    except NoReverseMatch:
        return lambda **params: None
    fixed = {"system": slug, **({"verified": "1"} if filters.verified_only else {}), **({"status": status} if status else {})}
    return lambda **params: f"{base}?{urlencode({**fixed, **{k: v for k, v in params.items() if v is not None}})}"


# --- queries ------------------------------------------------------------------------------------------


class _Median(Aggregate):
    """PostgreSQL's median of a column (other databases: computed in Python, see _medians_apart)."""

    function = "PERCENTILE_CONT"
    name = "Median"
    template = "%(function)s(0.5) WITHIN GROUP (ORDER BY %(expressions)s)"
    output_field = FloatField()


_MEDIAN_FIELDS = ("analysis__working_run_step", "analysis__seconds_to_working", "analysis__cost_to_working")


def _counted_attempts(run_ids: list[int], filters: LeaderboardFilters):
    return Attempt.objects.filter(Q(run_id__in=run_ids) & counted_q(filters) & n_range_q(filters, "sample__"))


def _medians_apart(attempts) -> dict[int, tuple[float | None, float | None, float | None]]:
    """Per n: the median steps, seconds and cost to the first working run, over the attempts that
    reached one, on databases without PERCENTILE_CONT (one row per such attempt: SQLite is for small
    sites)."""
    values: dict[int, list[list[float]]] = defaultdict(lambda: [[], [], []])
    reached = attempts.filter(analysis__working_run_step__isnull=False).order_by()
    for n, *numbers in reached.values_list("sample__n", *_MEDIAN_FIELDS):
        for column, number in zip(values[n], numbers):
            if number is not None:
                column.append(number)
    return {n: tuple(statistics.median(c) if c else None for c in columns) for n, columns in values.items()}


def _share(count: int, total: int) -> float | None:
    return count / total if total else None


_TRAJECTORY_FIELDS = ("counted", "analysed", "ran", "crashed", "recovered", "working", "steps_mean", "seconds_mean",
                      "cost_mean", "cost_known", "steps_median", "seconds_median", "cost_median")


def _failure_numbers(run_ids: list[int], filters: LeaderboardFilters) -> dict[int, dict]:
    """What the failure analysis of `run_ids`' attempts is built from, per n (two queries; three where
    the database has no median): {"outcomes": [[status, shown outcome, count], ...], "trajectory":
    the crash and recovery counts and statistics (_TRAJECTORY_FIELDS) or None}. Plain JSON, so that
    leaderboard.standings can store it (SystemFailureStanding)."""
    attempts = Attempt.objects.filter(Q(run_id__in=run_ids) & n_range_q(filters, "sample__")).filter(
        counted_q(filters) | Q(status=Attempt.ERROR)
    )
    outcome_counts = (
        attempts.annotate(shown=shown_outcome_expression()).order_by()
        .values_list("sample__n", "status", "shown").annotate(count=Count("id"))
    )
    numbers: dict[int, dict] = {}
    for n, status, shown, count in outcome_counts:
        numbers.setdefault(n, {"outcomes": [], "trajectory": None})["outcomes"].append([status, shown or "", count])

    trajectory_rows = (
        _counted_attempts(run_ids, filters).order_by().values("sample__n").annotate(
            counted=Count("id"),
            analysed=Count("analysis"),
            ran=Count("id", filter=Q(analysis__first_run_crashed__isnull=False)),
            crashed=Count("id", filter=Q(analysis__first_run_crashed=True)),
            recovered=Count("id", filter=Q(analysis__first_run_crashed=True, analysis__working_run_step__isnull=False)),
            working=Count("id", filter=Q(analysis__working_run_step__isnull=False)),
            steps_mean=Avg("analysis__working_run_step"),
            seconds_mean=Avg("analysis__seconds_to_working", filter=Q(analysis__working_run_step__isnull=False)),
            cost_mean=Avg("analysis__cost_to_working", filter=Q(analysis__working_run_step__isnull=False)),
            cost_known=Count("analysis__cost_to_working", filter=Q(analysis__working_run_step__isnull=False)),
        )
    )
    if connections[trajectory_rows.db].vendor == "postgresql":
        # In the same grouped query. The three columns are null unless a working run was reached
        # (cost: and known), and the median leaves nulls out.
        trajectory_rows = trajectory_rows.annotate(**{
            f"{name}_median": _Median(column) for name, column in zip(("steps", "seconds", "cost"), _MEDIAN_FIELDS)
        })
        medians = None
    else:
        medians = _medians_apart(_counted_attempts(run_ids, filters))
    for row in trajectory_rows:
        n = row["sample__n"]
        if medians is not None:
            row["steps_median"], row["seconds_median"], row["cost_median"] = medians.get(n, (None, None, None))
        numbers.setdefault(n, {"outcomes": [], "trajectory": None})["trajectory"] = {
            name: float(row[name]) if isinstance(row[name], Decimal) else row[name] for name in _TRAJECTORY_FIELDS
        }
    return numbers


def failure_analysis_computed(*, slug: str, run_ids: list[int], filters: LeaderboardFilters) -> FailureAnalysis:
    """The outcome split and the crash / recovery statistics of a system's runs, by n, from their
    attempts (two queries; three where the database has no median): what a refresh stores."""
    return _analysis_built(slug, filters, _failure_numbers(run_ids, filters))


def failure_analysis(*, slug: str, standing_pk: int | None, filters: LeaderboardFilters) -> FailureAnalysis:
    """`failure_analysis_computed` as the system's last refresh stored it (SystemFailureStanding: one
    query, whatever the number of attempts; nothing before the first refresh)."""
    rows = SystemFailureStanding.objects.filter(
        Q(standing_id=standing_pk, verified_only=filters.verified_only) & n_range_q(filters, "")
    ).values_list("n", "outcomes", "trajectory") if standing_pk is not None else []
    return _analysis_built(slug, filters, {
        n: {"outcomes": outcomes, "trajectory": trajectory} for n, outcomes, trajectory in rows if outcomes or trajectory
    })


def _analysis_built(slug: str, filters: LeaderboardFilters, numbers: dict[int, dict]) -> FailureAnalysis:
    """The failure analysis the page shows from its numbers by n (`_failure_numbers`)."""
    explore = explorer_url_maker(slug=slug, filters=filters)
    explore_done = explorer_url_maker(slug=slug, filters=filters, status=Attempt.DONE)  # what the crash figures count
    counted: dict[tuple[int, str], int] = defaultdict(int)
    apart: dict[tuple[int, str], int] = defaultdict(int)
    n_values: set[int] = set()
    for n, own in numbers.items():
        for status, shown, count in own["outcomes"]:
            n_values.add(n)
            if status == Attempt.ERROR or shown in APART_OUTCOMES:
                apart[n, shown] += count
            else:
                counted[n, shown] += count
    ordered = sorted(n_values)
    denominators = {n: sum(count for (m, _), count in counted.items() if m == n) for n in ordered}

    def outcome_row(key, label, members, counts, *, shared: bool) -> OutcomeRow:
        cells = []
        for n in ordered:
            count = sum(counts.get((n, member), 0) for member in members)
            link = explore(n=n, outcome=key) if key not in (NO_ANSWER_ANY, UNCLASSIFIED) else None
            cells.append(Cell(n=n, count=count, share=_share(count, denominators[n]) if shared else None, url=link))
        return OutcomeRow(key=key, label=label, cells=cells, paper=PAPER_OUTCOMES.get(key) if shared else None,
                          part=shared and key in PART_ROWS)

    outcome_rows = [outcome_row(*spec, counted, shared=True) for spec in COUNTED_ROWS]
    apart_rows = [outcome_row(*spec, apart, shared=False) for spec in APART_ROWS]
    # Rows of nothing are left out where they would only add noise (nothing unclassified, no unlabelled
    # error, no attempt refused by a worker that lacked the paper's environment).
    outcome_rows = [row for row in outcome_rows if row.key != UNCLASSIFIED or row.total]
    apart_rows = [row for row in apart_rows if row.key not in (UNCLASSIFIED, Attempt.NOT_PREPARED) or row.total]

    trajectories = []
    for n in ordered:
        row = numbers[n]["trajectory"]
        if row is None:
            trajectories.append(TrajectoryStats(n=n))
            continue
        trajectories.append(TrajectoryStats(
            n=n, counted=row["counted"], analysed=row["analysed"], ran=row["ran"], crashed=row["crashed"],
            recovered=row["recovered"], working=row["working"],
            steps_mean=row["steps_mean"], steps_median=row["steps_median"],
            seconds_mean=row["seconds_mean"], seconds_median=row["seconds_median"],
            cost_mean=row["cost_mean"], cost_median=row["cost_median"], cost_known=row["cost_known"],
            urls={
                "crashed": explore_done(n=n, crashed_first=1), "not_crashed": explore_done(n=n, crashed_first=0),
                "recovered": explore_done(n=n, crashed_first=1, recovered=1),
                "not_recovered": explore_done(n=n, crashed_first=1, recovered=0), "working": explore_done(n=n, recovered=1),
            },
        ))
    return FailureAnalysis(n_values=ordered, counted=denominators, outcomes=outcome_rows, apart=apart_rows,
                           trajectories=trajectories)


# Patterns a refresh keeps per counting rule and n (the most frequent): the page shows the
# TAXONOMY_LIMIT most frequent over the n it shows, which these hold unless patterns at several n
# add up to outrank one kept at each.
STORED_PATTERNS = TAXONOMY_LIMIT * 5


def _taxonomy_numbers(run_ids: list[int], filters: LeaderboardFilters) -> dict[int, dict]:
    """What the error taxonomy of `run_ids`' counted attempts is built from, per n (three queries):
    {"attempts": with an exception, "occurrences", "patterns": how many distinct, "groups": the
    STORED_PATTERNS most frequent as [type, pattern, attempts, occurrences, examples], each example
    [attempt pk, step, message, run pk], newest first}. Plain JSON, for SystemFailureStanding and
    SystemExceptionStanding."""
    exceptions = AttemptException.objects.filter(
        Q(attempt__run_id__in=run_ids) & counted_q(filters, "attempt__") & n_range_q(filters, "attempt__sample__")
    )
    groups = (
        exceptions.order_by().values_list("attempt__sample__n", "exception_type", "pattern")
        .annotate(attempts=Count("attempt_id", distinct=True), occurrences=Count("id"))
    )
    by_n: dict[int, list[list]] = defaultdict(list)
    for n, exception_type, pattern, attempt_count, occurrence_count in groups:
        by_n[n].append([exception_type, pattern, attempt_count, occurrence_count, []])
    totals = (
        exceptions.order_by().values_list("attempt__sample__n")
        .annotate(attempts=Count("attempt_id", distinct=True), occurrences=Count("id"))
    )
    numbers = {n: {"attempts": attempt_count, "occurrences": occurrence_count, "patterns": len(by_n[n]), "groups": []}
               for n, attempt_count, occurrence_count in totals}
    for n, own in by_n.items():
        own.sort(key=lambda group: (-group[2], -group[3], group[0], group[1]))
        numbers[n]["groups"] = own[:STORED_PATTERNS]
    _examples_attached(exceptions, numbers)
    return numbers


def _examples_attached(exceptions, numbers: dict[int, dict]) -> None:
    """Up to EXAMPLES_PER_PATTERN attempts per kept group of `numbers` (the newest), each at its first
    occurrence of the pattern (a step before the re-execution output): one query, ranked by window functions."""
    wanted = Q()
    groups = {}
    for n, own in numbers.items():
        for group in own["groups"]:
            wanted |= Q(attempt__sample__n=n, exception_type=group[0], pattern=group[1])
            groups[n, group[0], group[1]] = group
    if not groups:
        return
    partition = [F("attempt__sample__n"), F("exception_type"), F("pattern")]
    examples = (
        exceptions.filter(wanted)
        .annotate(
            occurrence=Window(RowNumber(), partition_by=[*partition, F("attempt_id")],
                              order_by=[F("step").asc(nulls_last=True), F("id").asc()]),
            attempt_rank=Window(DenseRank(), partition_by=partition, order_by=F("attempt_id").desc()),
        )
        .filter(occurrence=1, attempt_rank__lte=EXAMPLES_PER_PATTERN)
        .order_by("attempt__sample__n", "exception_type", "pattern", "-attempt_id")
        .values_list("attempt__sample__n", "exception_type", "pattern", "attempt_id", "step", "message", "attempt__run_id")
    )
    for n, exception_type, pattern, attempt_pk, step, message, run_pk in examples:
        groups[n, exception_type, pattern][4].append([attempt_pk, step, message, run_pk])


def error_taxonomy_computed(*, slug: str, run_ids: list[int], filters: LeaderboardFilters) -> ErrorTaxonomy:
    """The exceptions of a system's counted attempts by (type, pattern) and n, most frequent first
    (the first TAXONOMY_LIMIT), each with up to EXAMPLES_PER_PATTERN example attempts, from the
    attempts (four queries): what a refresh stores."""
    numbers = _taxonomy_numbers(run_ids, filters)
    return _taxonomy_built(slug, filters, numbers, public_runs=None)


def error_taxonomy(*, slug: str, standing_pk: int | None, run_ids: list[int], filters: LeaderboardFilters) -> ErrorTaxonomy:
    """`error_taxonomy_computed` as the system's last refresh stored it (two queries, whatever the
    number of attempts), its examples only those of `run_ids` (its runs public now)."""
    numbers: dict[int, dict] = {}
    if standing_pk is not None:
        in_view = Q(standing_id=standing_pk, verified_only=filters.verified_only) & n_range_q(filters, "")
        for n, attempts, occurrences, patterns in SystemFailureStanding.objects.filter(in_view).values_list(
            "n", "exception_attempts", "exception_occurrences", "patterns"
        ):
            if attempts or occurrences:
                numbers[n] = {"attempts": attempts, "occurrences": occurrences, "patterns": patterns, "groups": []}
        for n, *group in SystemExceptionStanding.objects.filter(in_view).values_list(
            "n", "exception_type", "pattern", "attempts", "occurrences", "examples"
        ):
            if n in numbers:
                numbers[n]["groups"].append(group)
    return _taxonomy_built(slug, filters, numbers, public_runs=set(run_ids))


def _taxonomy_built(slug: str, filters: LeaderboardFilters, numbers: dict[int, dict], *,
                    public_runs: set[int] | None) -> ErrorTaxonomy:
    """The error taxonomy the page shows from its numbers by n (`_taxonomy_numbers`); examples only
    from `public_runs` (None: any)."""
    explore_done = explorer_url_maker(slug=slug, filters=filters, status=Attempt.DONE)
    by_pattern: dict[tuple[str, str], dict[int, tuple[int, int]]] = defaultdict(dict)
    examples: dict[tuple[str, str], list] = defaultdict(list)
    for n, own in numbers.items():
        for exception_type, pattern, attempt_count, occurrence_count, found in own["groups"]:
            by_pattern[exception_type, pattern][n] = (attempt_count, occurrence_count)
            examples[exception_type, pattern] += [
                example for example in found if public_runs is None or example[3] in public_runs
            ]
    n_values = sorted(numbers)
    kept = sum(len(own["groups"]) for own in numbers.values())
    # Every distinct pattern: exact where no n had more than it kept (a pattern at two n counts once).
    patterns = len(by_pattern) + sum(own["patterns"] for own in numbers.values()) - kept

    def frequency(item):
        (exception_type, pattern), cells = item
        return (-sum(a for a, _ in cells.values()), -sum(o for _, o in cells.values()), exception_type, pattern)

    top = sorted(by_pattern.items(), key=frequency)[:TAXONOMY_LIMIT]
    step_url = step_url_maker()
    rows = []
    for (exception_type, pattern), cells in top:
        newest = sorted(examples[exception_type, pattern], key=lambda example: -example[0])[:EXAMPLES_PER_PATTERN]
        rows.append(TaxonomyRow(
            exception_type=exception_type, pattern=pattern,
            cells=[(n, *cells.get(n, (0, 0)), explore_done(n=n, exception=exception_type)) for n in n_values],
            url=explore_done(exception=exception_type),
            examples=[Example(pk, step, message, step_url(pk, step)) for pk, step, message, _ in newest],
        ))
    return ErrorTaxonomy(n_values=n_values, rows=rows, patterns=patterns,
                         attempts={n: own["attempts"] for n, own in sorted(numbers.items())},
                         occurrences={n: own["occurrences"] for n, own in sorted(numbers.items())})


@dataclass
class FailureRows:
    """What leaderboard.standings stores of a system's failure analysis and error taxonomy, per
    counting rule and n (SystemFailureStanding's fields) and per kept pattern (SystemExceptionStanding's)."""

    by_n: list[dict]
    patterns: list[dict]


def failure_rows_computed(run_ids: list[int]) -> FailureRows:
    """The failure analysis and error taxonomy of `run_ids`' attempts under both counting rules, by n,
    as stored at a refresh (a few grouped queries per rule)."""
    by_n, patterns = [], []
    if not run_ids:
        return FailureRows(by_n=by_n, patterns=patterns)
    for verified_only in (False, True):
        filters = LeaderboardFilters(verified_only=verified_only)
        failures = _failure_numbers(run_ids, filters)
        taxonomy = _taxonomy_numbers(run_ids, filters)
        for n in sorted(set(failures) | set(taxonomy)):
            analysis = failures.get(n, {"outcomes": [], "trajectory": None})
            exceptions = taxonomy.get(n, {"attempts": 0, "occurrences": 0, "patterns": 0, "groups": []})
            by_n.append({
                "verified_only": verified_only, "n": n, "outcomes": analysis["outcomes"], "trajectory": analysis["trajectory"],
                "exception_attempts": exceptions["attempts"], "exception_occurrences": exceptions["occurrences"],
                "patterns": exceptions["patterns"],
            })
            patterns += [
                {"verified_only": verified_only, "n": n, "exception_type": exception_type, "pattern": pattern,
                 "attempts": attempt_count, "occurrences": occurrence_count, "examples": examples}
                for exception_type, pattern, attempt_count, occurrence_count, examples in exceptions["groups"]
            ]
    return FailureRows(by_n=by_n, patterns=patterns)

