"""The JSON the public pages offer (`?format=json`) as pydantic models, for the OpenAPI description
(autoexperiment_site.openapi) and for the tests that check live responses against it.

Each page's top-level keys are listed and required, and no others are allowed: a key added to a
view without being added here fails tests/deploy/test_api_fuzz.py. Nested rows are described as
objects (their keys are the `as_dict` of the selectors' dataclasses, documented in README's "Data
exports"); the models say what a script can rely on at the top.
"""
from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

Row = dict[str, Any]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class PageError(Strict):
    """A refusal of a page's JSON: `error` names the parameter and what was wrong with it."""

    error: str = Field(min_length=1)


class FormErrors(Strict):
    """The explorer's refusal: one sentence per bad parameter, naming it."""

    errors: list[str] = Field(min_length=1)


class ListPage(Strict):
    number: int
    pages: int
    count: int
    per_page: int
    previous: str | None = Field(description="the previous page's JSON URL (path and query); null on the first")
    next: str | None


class SystemSamplesPage(ListPage):
    all_samples_csv: str


class LeaderboardFilters(Strict):
    suite: str | None
    agent: str | None
    context: str | None
    verified_only: bool
    unverified: bool
    n_min: int | None
    n_max: int | None
    tolerance: float | None
    counting: str = Field(description="which attempts count, in words")
    errors: list[str] = Field(description="bad filter parameters, each named (the response is then a 400)")


class LeaderboardTableFilters(LeaderboardFilters):
    sort: str


class Leaderboard(Strict):
    """`/?format=json`: one row per system on this page, the paper's reference rows, the rules."""

    filters: LeaderboardTableFilters
    rules: list[str]
    n_values: list[int]
    computing: int = Field(description="systems with new results not computed yet (not in rows)")
    cost_accuracy: list[Row] = Field(description="the Pareto frontier of cost against Pass@1, by n")
    rows: list[Row]
    page: ListPage
    reference_findings: list[Row]
    gold_stability: list[Row]


class FunctionDifficulty(Strict):
    """`/functions/?format=json`: how often each masked function is implemented correctly."""

    filters: LeaderboardFilters
    rows: list[Row]


class SystemPage(Strict):
    """`/systems/<slug>/?format=json`."""

    filters: LeaderboardFilters
    system: Row
    runs: list[Row]
    runs_total: int
    runs_csv: str
    dataset_url: str = Field(description="this system's public attempts as a Parquet dataset (zip)")
    samples: list[Row]
    samples_page: SystemSamplesPage
    out_of_scope_attempts: int
    not_reexecuted_attempts: int
    tolerances: list[float]
    near_misses: list[Row]
    near_miss_total: int
    failure_analysis: Row
    error_taxonomy: Row


class ExplorerExport(Strict):
    """`/explore/?format=json`: the attempts (or, with `q`, the matching steps) the filters select."""

    filters: Row
    count: int
    truncated: bool
    note: str = Field(description="empty, or why the rows were cut")
    rows: list[Row]


class GoldStability(Strict):
    experiments: int
    unstable: int
    policy: str
    held_out_checked: bool


class BenchmarkSuite(Strict):
    """`/benchmark/<suite>/?format=json`."""

    suite: str
    version: str
    description: str
    papers: list[Row]
    functions: int
    experiments: int
    samples_by_n: dict[str, int]
    gold_stability: GoldStability | None
    task_downloads: list[Row] = Field(description="empty for a viewer who may not see gold code")
    dataset_url: str = Field(description="the suite's samples and public attempts as a Parquet dataset (zip)")


class BenchmarkPaper(Strict):
    """`/benchmark/<suite>/papers/<paper_id>/?format=json`."""

    suite: str
    paper_id: str
    title: str
    source_url: str
    text_start: str
    text_truncated: bool
    functions: list[Row]
    experiments: list[Row]
    samples_by_n: dict[str, int]
    code_tree: Row


class BenchmarkSamples(Strict):
    """`/benchmark/<suite>/samples/?format=json`."""

    suite: str
    n: int | None
    n_values: list[int]
    page: int
    pages: int
    count: int
    previous: str | None
    next: str | None
    samples: list[Row]


class BenchmarkFunction(Strict):
    """`/benchmark/<suite>/papers/<paper_id>/functions/<func_id>/?format=json`; `gold_body` only for a
    viewer who may see gold code (runs.visibility.gold_access)."""

    suite: str
    paper_id: str
    func_id: int
    file: str
    name: str
    description: str
    relevant_paper: str
    masked_stub: str
    masked_stub_problem: str | None
    experiments: list[Row]
    systems: list[Row]
    systems_page: ListPage
    gold_body: str | None = None


class BenchmarkExperiment(Strict):
    """`/benchmark/<suite>/papers/<paper_id>/experiments/<exp_id>/?format=json`; gold numbers only for a
    viewer who may see them."""

    suite: str
    paper_id: str
    exp_id: int
    description: str
    command: str
    answer_format: Any
    rtol: float | None
    atol: float | None
    timeout_seconds: int | None
    gold_unstable: bool
    gold_spread: Any
    gold_repeats: int | None
    depends_on: list[Row]
    systems: list[Row]
    systems_page: ListPage
    gold_result: Any = None
    gold_spreads: Any = None
