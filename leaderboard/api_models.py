"""The JSON the public pages offer (`?format=json`) as pydantic models, for the OpenAPI description
(autoexperiment_site.openapi), for the views that build their answers through them, and for the
tests that check live responses against them.

Every object is described down to its leaves, its keys required (unless said to be optional) and
no others allowed (the benchmark pages' models are in leaderboard.benchmark_api_models): the nested rows are the `as_dict` of the selectors' dataclasses (leaderboard
.selectors, .benchmark, .explorer, .failure_analysis, .comparison, .curves, .pareto, .reference) plus
the keys the views add (`url`). The views of small pages build their JSON through `page_json`, so a
key added to an `as_dict` without being added here fails the page (and every test that reads it);
the explorer's export, up to ten thousand rows, is written without it and checked by
tests/leaderboard/test_api_models.py and the fuzz run (tests/deploy/test_api_fuzz.py).

Rates are fractions in [0, 1]; counts are attempts unless said otherwise; a dict keyed by n has the
n as a string (JSON's keys are strings).
"""
from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from leaderboard import curves

# Attempts, samples, systems...: a count is never negative.
Count = Annotated[int, Field(ge=0)]
Rate = Annotated[float, Field(ge=0, le=1)]
ByN = Field(description="keyed by n (as a string)")


class Strict(BaseModel):
    # A key the code adds without adding it here fails validation, and the schema says so.
    model_config = ConfigDict(extra="forbid")


def page_json(model: type[BaseModel], payload: dict) -> str:
    """`payload` checked against `model`, as JSON text, without the optional keys it did not have.
    Pydantic writes it (a nan or an infinity becomes null, as JSON has neither)."""
    return model.model_validate(payload).model_dump_json(exclude_unset=True)


# --- refusals -----------------------------------------------------------------------------------------


class PageError(Strict):
    """A refusal of a page's JSON: `error` names the parameter and what was wrong with it."""

    error: str = Field(min_length=1)


class FormErrors(Strict):
    """The explorer's refusal: one sentence per bad parameter, naming it."""

    errors: list[str] = Field(min_length=1)


# --- paging and filters -------------------------------------------------------------------------------


class ListPage(Strict):
    """Where a page of a list is, and its neighbours' JSON URLs."""

    number: int = Field(ge=1)
    pages: int = Field(ge=1)
    count: Count = Field(description="items in the whole list")
    per_page: int = Field(ge=1)
    previous: str | None = Field(description="the previous page's JSON URL (path and query); null on the first")
    next: str | None = Field(description="the next page's JSON URL (path and query); null on the last")


class SystemSamplesPage(ListPage):
    all_samples_csv: str = Field(description="every sample of the system, with every attempt id, as CSV")


class LeaderboardFilters(Strict):
    suite: str | None
    agent: str | None
    context: str | None
    verified_only: bool = Field(description="only attempts the harness re-executed count (the default)")
    unverified: bool = Field(description="uploads' reported numbers, not re-executed, count too (?unverified=1)")
    n_min: int | None
    n_max: int | None
    tolerance: float | None = Field(description="the relative tolerance whose Pass@1 is shown beside (?tolerance=)")
    counting: str = Field(description="which attempts count, in words")
    errors: list[str] = Field(description="bad filter parameters, each named (the response is then a 400)")


class LeaderboardTableFilters(LeaderboardFilters):
    sort: str = Field(description="the sort key in force (`-key`: descending)")


# --- a system's numbers -------------------------------------------------------------------------------


class FunctionDiagnoses(Strict):
    """At n >= 2: which masked functions broke the counted failed attempts."""

    failed_attempts: Count
    counts: dict[str, Count] = Field(description="failed attempts by diagnosis group (interaction, one_wrong, "
                                                 "several_wrong, not_decided)")
    shares: dict[str, Rate | None] = Field(description="each group's share of the failed attempts; null without any")
    not_decided_by_reason: dict[str, Count] = Field(description="why the not_decided were not: undecidable, "
                                                                "being judged, not judged (no transplants)")


class NMetrics(Strict):
    """One system at one n."""

    n: int = Field(ge=1)
    samples: Count = Field(description="samples with a counted attempt")
    attempts: Count = Field(description="counted attempts")
    errors: Count = Field(description="attempts that failed on the infrastructure or the model provider (never counted)")
    pass1: Rate | None = Field(description="mean over samples of c/m")
    pass1_ci_low: Rate | None = Field(description="95% percentile bootstrap interval over samples")
    pass1_ci_high: Rate | None
    k: int = Field(ge=1, description="the k of pass@k: the largest attempts per sample among the system's runs")
    passk: Rate | None = Field(description="the unbiased pass@k, over samples with at least k counted attempts")
    passk_samples: Count
    verifier_pass1: dict[str, Rate] = Field(description="by verifier: the share of samples whose chosen attempt passes")
    verifier_samples: dict[str, Count] = Field(description="by verifier: the samples it chose for")
    cost_mean: float | None = Field(description="USD per counted attempt of known cost")
    cost_unknown: Count = Field(description="counted attempts whose cost is unknown (left out of the mean)")
    seconds_mean: float | None = Field(description="agent seconds per counted attempt")
    pass1_at_tolerance: dict[str, Rate | None] | None = Field(
        default=None, description="optional: Pass@1 had the relative tolerance been the key (e.g. \"0.01\")")
    function_diagnoses: FunctionDiagnoses | None = Field(default=None, description="optional: at n >= 2 only")
    pareto_frontier: bool | None = Field(
        default=None, description="optional (leaderboard only): on the cost-accuracy Pareto frontier at this n")


class DifficultyCurve(Strict):
    """A system's fitted difficulty curve (leaderboard.curves): pass rate = 1 / (1 + e^-(intercept + slope·n))."""

    status: curves.CurveStatus
    n_values: list[int] = Field(description="the n it was fitted over")
    samples: Count
    intercept: float | None = Field(description="log-odds of passing at n = 0")
    slope: float | None = Field(description="log-odds per masked function")
    slope_low: float | None = Field(description="95% cluster bootstrap interval; null: open")
    slope_high: float | None
    n50: float | None = Field(description="where the curve crosses 50%; null: not determined")
    n50_low: float | None
    n50_high: float | None
    beyond: float | None = Field(description="above_range / below_range: the edge of the reportable range it crosses past")
    resamples: Count
    determined: bool
    reason: str = Field(description="why n50 is what it is, in words")


# What makes a system, and the runs pooled into it: the measured rows' and the comparison's.
class SystemKey(Strict):
    slug: str
    name: str
    suite: str
    agent: str
    model: str
    agent_config: dict[str, Any]
    context: str
    runs: list[int]


class _Measured(Strict):
    reference: Literal[False] = Field(description="false: measured here (reference rows are the paper's)")


# Its bases in this order put `reference` first, then the system's key (each model's field order is its JSON's).
class SystemRow(SystemKey, _Measured):
    """A measured system: suite + agent + model + agent configuration + context, its runs pooled."""

    slug: str = Field(description="the system's id (/systems/<slug>/)")
    runs: list[int] = Field(description="its public runs' ids")
    k: int = Field(ge=1)
    verified: bool = Field(description="every counted attempt was re-executed")
    attempts: Count
    verified_attempts: Count
    unverified_attempts: Count = Field(description="counted attempts judged by their reported numbers (?unverified=1 only)")
    note: str = Field(description="empty, or what marks a row counting unverified attempts")
    errors: Count
    samples: Count
    cost_mean: float | None
    cost_unknown: Count
    seconds_mean: float | None
    date: str | None = Field(description="ISO 8601: when its last finished run ended")
    unfinished_runs: Count
    stale: bool = Field(description="changed since its numbers were computed: they are being updated")
    difficulty_curve: DifficultyCurve | None
    by_n: dict[str, NMetrics] = ByN


class ReferenceN(Strict):
    n: int = Field(ge=1)
    pass1: Rate | None
    k: int | None = Field(description="the k of the paper's pass@k at this n; null: none reported")
    passk: Rate | None


class ReferenceRow(Strict):
    """A number the AutoExperiment paper reports (upstream suite and harness), shown, never reproduced."""

    reference: Literal[True]
    name: str
    suite: str
    agent: str
    model: str
    by_n: dict[str, ReferenceN] = ByN
    note: str
    source: str
    source_url: str


# Told apart by `reference` (each model's Literal). Not a pydantic discriminator: OpenAPI's discriminator
# maps string values, and this one is a boolean.
LeaderboardRow = SystemRow | ReferenceRow


class CostAccuracy(Strict):
    """Cost against accuracy at one n (leaderboard.pareto)."""

    n: int = Field(ge=1)
    frontier: list[str] = Field(description="slugs of the systems on the Pareto frontier, cheapest first")
    cost_unknown: list[str] = Field(description="slugs of the systems measured at n whose cost is not fully known "
                                                "(never placed, never on the frontier)")


class ReferenceFinding(Strict):
    """A finding of the paper that is not one system's pass rate."""

    finding: str
    values: dict[str, float]
    unit: str
    reference: Literal[True]


class GoldStability(Strict):
    """Whether a suite's gold numbers are stable over repeated runs, and its policy for those that are not."""

    experiments: Count
    unstable: Count
    policy: str
    held_out_checked: bool


class SuiteGoldStability(GoldStability):
    suite: str


class Leaderboard(Strict):
    """`/?format=json`: one row per system on this page, the paper's reference rows, the rules."""

    filters: LeaderboardTableFilters
    rules: list[str]
    n_values: list[int]
    computing: Count = Field(description="systems with new results not computed yet (not in rows)")
    cost_accuracy: list[CostAccuracy] = Field(description="the Pareto frontier of cost against Pass@1, by n")
    rows: list[LeaderboardRow] = Field(description="this page's systems, then the paper's reference rows")
    page: ListPage
    reference_findings: list[ReferenceFinding]
    gold_stability: list[SuiteGoldStability]


class FunctionDifficultyRow(Strict):
    """One masked function over the counted attempts whose sample masks it."""

    suite: str
    paper: str
    func_id: int
    file: str
    name: str
    attempts: Count
    right: Count = Field(description="attempts right about this function (exact at every n)")
    wrong: Count
    undecided: Count
    right_rate: Rate | None = Field(description="right / (right + wrong)")
    passes: Count = Field(description="attempts that passed (the whole sample)")
    pass_rate: Rate | None
    attempts_n1: Count
    passes_n1: Count
    pass_rate_n1: Rate | None
    systems: Count


class FunctionDifficulty(Strict):
    """`/functions/?format=json`: how often each masked function is implemented correctly."""

    filters: LeaderboardFilters
    rows: list[FunctionDifficultyRow]


# --- a system's page ----------------------------------------------------------------------------------


class SystemRun(Strict):
    id: int
    created_at: str = Field(description="ISO 8601")
    finished_at: str | None = Field(description="ISO 8601; null: unfinished")
    n_values: list[int]
    k: int = Field(ge=1, description="attempts per sample")
    attempts_by_status: dict[str, Count]
    verified: bool


class SystemSample(Strict):
    """One sample of the system: its attempts summarised (listed in the explorer, `attempts_url`)."""

    sample_id: str
    paper: str
    n: int = Field(ge=1)
    attempts: Count = Field(description="counted attempts")
    passes: Count
    pass_rate: Rate | None
    errors: Count
    ended_attempts: Count = Field(description="attempts that ended, done or error: what the explorer lists")
    out_of_scope_attempts: Count = Field(description="attempts whose edits outside the task re-execution dropped")
    verifier_choices: dict[str, int] = Field(description="by verifier: the attempt id it chose")
    attempts_url: str | None


class NearMiss(Strict):
    """A failed counted attempt whose every number is within twice its tolerance."""

    attempt_id: int
    run_id: int
    index: Count
    sample_id: str
    n: int = Field(ge=1)
    tolerance_ratio: float = Field(description="its largest number error in units of that number's tolerance")
    verified: bool


class OutcomeCell(Strict):
    count: Count
    share: Rate | None = Field(description="of the counted attempts at this n; null: nothing to divide by, or shown apart")
    url: str | None = Field(description="the attempts behind it in the explorer")


class OutcomeRow(Strict):
    key: str = Field(description="an outcome (the explorer's outcome=), or no_answer_any, or unclassified")
    label: str
    by_n: dict[str, OutcomeCell] = ByN
    paper: Rate | None = Field(description="the paper's share (GPT-4o, n = 1)")
    part_of_previous: bool = Field(description="one part of the row above it")


class Median(Strict):
    mean: float | None
    median: float | None


class KnownMedian(Median):
    known: Count = Field(description="attempts whose cost is known")


class TrajectoryStats(Strict):
    """Crash, recovery and the way to the first working run at one n (counted attempts)."""

    n: int = Field(ge=1)
    counted: Count
    analysed: Count = Field(description="counted attempts whose trajectory was analysed")
    ran_experiment: Count
    first_run_crashed: Count
    first_run_crashed_share: Rate | None
    recovered: Count = Field(description="of those that crashed first, the ones that reached a working run")
    recovered_share: Rate | None
    reached_working_run: Count
    steps_to_working: Median
    seconds_to_working: Median
    cost_to_working: KnownMedian
    urls: dict[str, str | None] = Field(description="the explorer: crashed, not_crashed, recovered, not_recovered, working")


class PaperFailureAnalysis(Strict):
    """The paper's error analysis (percentages as fractions), shown beside the system's."""

    label: str
    model: str
    agent: str
    n: int
    passed: Rate
    wrong_answer: Rate
    no_answer: Rate
    first_run_crashed: Rate
    recovered: Rate
    source: str
    source_url: str
    reference: Literal[True]


class FailureAnalysis(Strict):
    n_values: list[int]
    counted: dict[str, Count] = Field(description="the outcome split's denominator, keyed by n")
    classified: Count
    analysed: Count
    outcomes: list[OutcomeRow]
    shown_apart: list[OutcomeRow] = Field(description="infrastructure and model provider failures: counts only")
    trajectories: list[TrajectoryStats]
    paper: PaperFailureAnalysis


class TaxonomyCell(Strict):
    attempts: Count
    occurrences: Count
    url: str | None


class TaxonomyExample(Strict):
    attempt_id: int
    step: int | None = Field(description="null: in the re-execution output")
    message: str
    url: str | None


class TaxonomyRow(Strict):
    exception_type: str
    pattern: str = Field(description="the message with numbers, paths and shapes masked")
    attempts: Count
    occurrences: Count
    url: str | None
    by_n: dict[str, TaxonomyCell] = ByN
    examples: list[TaxonomyExample]


class ErrorTaxonomy(Strict):
    limit: int = Field(description="the most frequent patterns listed")
    patterns: Count = Field(description="every distinct (type, pattern)")
    attempts_with_exception: dict[str, Count] = ByN
    occurrences: dict[str, Count] = ByN
    rows: list[TaxonomyRow]


class SystemPage(Strict):
    """`/systems/<slug>/?format=json`."""

    filters: LeaderboardFilters
    system: SystemRow
    runs: list[SystemRun] = Field(description="its newest runs (the runs CSV has them all)")
    runs_total: Count
    runs_csv: str
    dataset_url: str = Field(description="this system's public attempts as a Parquet dataset (zip)")
    samples: list[SystemSample]
    samples_page: SystemSamplesPage
    out_of_scope_attempts: Count
    not_reexecuted_attempts: Count
    tolerances: list[float]
    near_misses: list[NearMiss]
    near_miss_total: Count
    failure_analysis: FailureAnalysis
    error_taxonomy: ErrorTaxonomy


# --- the explorer -------------------------------------------------------------------------------------


class ExplorerFilters(Strict):
    """The explorer's parameters as validated (empty or null: not filtered)."""

    q: str
    suite: str
    system: str
    paper: str
    sample: str
    function: tuple[str, int] | None = Field(description="[paper_id, func_id]")
    n: int | None
    status: str
    outcome: str
    exception: str
    exit_status: str
    verified: bool | None
    mismatch: bool | None
    near_miss: bool | None
    crashed_first: bool | None
    recovered: bool | None
    sort: str


class AttemptPlace(Strict):
    """Where an attempt the explorer lists belongs (leaderboard.explorer's _AttemptPlace): its run,
    system, suite, paper and sample."""

    run_id: int
    system: str
    slug: str
    suite: str
    paper: str
    sample_id: str
    n: int


class ExplorerAttempt(AttemptPlace):
    attempt_id: int
    url: str | None = Field(description="the replay at its first error step")
    status: str
    outcome: str
    exit_status: str
    verified: bool
    mismatch: bool = Field(description="the reported verdict and the re-execution's differ")
    tolerance_ratio: float | None
    steps: int | None
    cost: float | None
    seconds: float | None
    first_error_step: int | None
    first_error_line: str


class ExplorerHit(AttemptPlace):
    """A step whose text matches `q`."""

    attempt_id: int
    step: int
    url: str | None = Field(description="the replay at this step")
    outcome: str


class ExplorerExport(Strict):
    """`/explore/?format=json`: the attempts (or, with `q`, the matching steps) the filters select."""

    filters: ExplorerFilters
    count: Count
    truncated: bool
    note: str = Field(description="empty, or why the rows were cut")
    rows: list[ExplorerAttempt] | list[ExplorerHit] = Field(description="attempts; with q, matching steps")


# --- the comparison -----------------------------------------------------------------------------------


class ComparedSystem(SystemKey):
    pass  # one of the two systems compared


class Outcomes(Strict):
    """Shared samples by who passes (a system passes a sample when c/m >= pass_share)."""

    both: Count
    only_a: Count
    only_b: Count
    neither: Count


class NComparison(Strict):
    n: int = Field(ge=1)
    samples_a: Count = Field(description="samples with a counted attempt of A")
    samples_b: Count
    shared_samples: Count
    attempts_a: Count = Field(description="counted attempts of A at the shared samples")
    attempts_b: Count
    outcomes: Outcomes
    pass1_a: Rate | None = Field(description="on the shared samples")
    pass1_b: Rate | None
    difference: float | None = Field(description="pass1_a - pass1_b")
    difference_ci_low: float | None = Field(description="paired bootstrap, 95%")
    difference_ci_high: float | None
    p_value: float | None = Field(description="two-sided, for no difference")
    differing_samples: Count


class SampleDifference(Strict):
    sample_id: str
    paper: str
    n: int = Field(ge=1)
    a_passes: Count
    a_attempts: Count
    b_passes: Count
    b_attempts: Count
    difference: float = Field(description="A's c/m minus B's")
    outcome: Literal["both", "only_a", "only_b", "neither"]
    attempt_a: int = Field(description="shown side by side: the better system's passing attempt, the other's failing one")
    attempt_b: int
    replay_compare_url: str


class Comparison(Strict):
    """`/compare/?a=<slug>&b=<slug>&format=json`: two systems sample by sample, per n."""

    a: ComparedSystem
    b: ComparedSystem
    verified_only: bool
    n: int | None = Field(description="the one n asked for; null: every n")
    pass_share: float
    rules: list[str]
    by_n: list[NComparison]
    differing_samples: list[SampleDifference] = Field(description="largest gap first, at most differing_samples_limit")
    differing_samples_total: Count
    differing_samples_limit: int
