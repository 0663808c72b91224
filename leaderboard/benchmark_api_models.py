"""The JSON of the benchmark pages (`/benchmark/...?format=json`: a suite, a paper, its samples, a
function, an experiment) as pydantic models; leaderboard.api_models says how they are used and
holds the leaderboard's, the system page's, the explorer's and the comparison's.
"""
from __future__ import annotations

from typing import Any

from pydantic import Field

from leaderboard.api_models import ByN, Count, GoldStability, ListPage, Rate, Strict

# --- the benchmark ------------------------------------------------------------------------------------


class SuitePaper(Strict):
    paper_id: str
    title: str
    functions: Count
    experiments: Count
    samples: Count
    url: str


# leaderboard.benchmark builds these for the suite page: one definition for its rows and its JSON.
class TaskDownload(Strict):
    n: int = Field(ge=1)
    context: str
    url: str


class BenchmarkSuite(Strict):
    """`/benchmark/<suite>/?format=json`."""

    suite: str
    version: str
    description: str
    papers: list[SuitePaper]
    functions: Count
    experiments: Count
    samples_by_n: dict[str, Count] = ByN
    gold_stability: GoldStability | None
    task_downloads: list[TaskDownload] = Field(description="empty for a viewer who may not see gold code")
    dataset_url: str = Field(description="the suite's samples and public attempts as a Parquet dataset (zip)")


class FunctionLink(Strict):
    func_id: int
    file: str
    name: str
    url: str


class PaperExperiment(Strict):
    exp_id: int
    description: str
    depends_on: list[int] = Field(description="the func_id of each function it depends on")
    url: str


# leaderboard.benchmark.code_tree lists these: one definition for the page and its JSON.
class CodeFile(Strict):
    path: str = Field(description="relative to the paper's code directory")
    size: int | None = Field(description="bytes; null for a symbolic link (never followed)")
    symlink: bool


class CodeTree(Strict):
    files: list[CodeFile]
    truncated: bool
    limit: int
    problem: str = Field(description="empty, or why nothing could be listed")


class BenchmarkPaper(Strict):
    """`/benchmark/<suite>/papers/<paper_id>/?format=json`."""

    suite: str
    paper_id: str
    title: str
    source_url: str
    text_start: str
    text_truncated: bool
    functions: list[FunctionLink]
    experiments: list[PaperExperiment]
    samples_by_n: dict[str, Count] = ByN
    code_tree: CodeTree


class SampleFunction(Strict):
    func_id: int
    name: str


class BenchmarkSample(Strict):
    """A sample and the attempts at it the viewer may see, summarised (every system's)."""

    sample_id: str
    paper: str
    n: int = Field(ge=1)
    functions: list[SampleFunction] = Field(description="its masked functions")
    attempts: Count = Field(description="counted attempts (re-executed, the leaderboard's default rule)")
    passes: Count
    pass_rate: Rate | None
    errors: Count
    ended_attempts: Count
    runs: Count
    attempts_url: str | None


class BenchmarkSamples(Strict):
    """`/benchmark/<suite>/samples/?format=json`."""

    suite: str
    n: int | None
    n_values: list[int]
    page: int
    pages: int
    count: Count
    previous: str | None
    next: str | None
    samples: list[BenchmarkSample]


class SystemRate(Strict):
    """One system's counted attempts at a function's or an experiment's samples."""

    system: str = Field(description="the system's slug")
    name: str
    agent: str
    model: str
    context: str
    agent_config: dict[str, Any]
    attempts: Count
    passes: Count
    pass_rate: Rate | None
    attempts_n1: Count
    passes_n1: Count
    pass_rate_n1: Rate | None
    url: str = Field(description="the system's page")


class ExperimentLink(Strict):
    exp_id: int
    url: str


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
    experiments: list[ExperimentLink]
    systems: list[SystemRate]
    systems_page: ListPage
    gold_body: str | None = Field(default=None, description="optional: only for a viewer who may see gold code")


class GoldSpread(Strict):
    """The smallest and largest value one number took over an experiment's repeated gold runs."""

    min: float
    max: float


class BenchmarkExperiment(Strict):
    """`/benchmark/<suite>/papers/<paper_id>/experiments/<exp_id>/?format=json`; gold numbers only for a
    viewer who may see them."""

    suite: str
    paper_id: str
    exp_id: int
    description: str
    command: str
    answer_format: Any = Field(description="the JSON the agent's answer must have, with example values")
    rtol: float | None
    atol: float | None
    timeout_seconds: int | None
    gold_unstable: bool
    gold_spread: float | None = Field(description="the largest relative difference between repeated gold runs")
    gold_repeats: int | None
    depends_on: list[FunctionLink]
    systems: list[SystemRate]
    systems_page: ListPage
    gold_result: Any = Field(default=None, description="optional: only for a viewer who may see gold numbers")
    gold_spreads: dict[str, GoldSpread] | None = Field(
        default=None, description="optional, as gold_result: per number (its flattened key), its spread over the gold runs")
