"""Read side of the public benchmark pages: a suite, a paper, a function, an experiment and the
samples of one n. Plain functions, a few queries each whatever the number of rows.

Gold stays where it belongs: the masked stub of a function is built from the gold file exactly as
the workspace masks it (runs.benchmark.masking.mask_source), and the gold body and gold numbers are
for the viewers runs.visibility.gold_access allows (the one rule for gold, the replay's too): each
detail carries the viewer's `access`. Pass rates by system count public runs with the leaderboard's verdict
rule (leaderboard.selectors), so they never depend on who is looking; the attempts summarised on
the samples page (and listed by the explorer it links to) are those the viewer may see (runs.visibility).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlencode

from django.core.paginator import Paginator
from django.db.models import Count, FloatField, OuterRef, Q, Subquery, Sum
from django.db.models.functions import Cast, Coalesce, Lower
from django.urls import NoReverseMatch, reverse

from leaderboard.benchmark_api_models import CodeFile, TaskDownload
from leaderboard.metrics import PassRates, SystemRow
from leaderboard.models import SystemStanding
from leaderboard.rules import ENDED_STATUSES, LeaderboardFilters, counted_q, passes_q, runs_frame, system_case, system_name_order
from leaderboard.selectors import standings_shown_runs
from runs.benchmark.locating import MaskingError
from runs.benchmark.masking import MaskTarget, function_body_source, mask_source
from runs.benchmark.source_lines import NEWLINE
from runs.benchmark.workspace import EXCLUDED_DIRS, EXCLUDED_SUFFIXES
from runs.models import Attempt, Experiment, Function, Paper, Run, Sample, Suite
from runs.suites.selectors import SuiteGoldStability, suites_gold_stability
from runs.visibility import GoldAccess, gold_access, runs_visible_q

PAPER_TEXT_CHARS = 2_000  # the start of a paper's text shown on its page
CODE_TREE_LIMIT = 500  # files listed of a paper's code directory
SAMPLES_PER_PAGE = 50
CONTEXTS = Run.Context.values


def _count_of(model, field_name: str, outer: str = "pk"):
    """A correlated COUNT subquery: one number per row without the row explosion of joined Counts."""
    rows = model.objects.filter(**{field_name: OuterRef(outer)}).order_by().values(field_name)
    return Coalesce(Subquery(rows.annotate(count=Count("pk")).values("count")[:1]), 0)


# --- the suite ----------------------------------------------------------------------------------------


@dataclass
class PaperSummary:
    paper_id: str
    title: str
    functions: int
    experiments: int
    samples: int

    def as_dict(self) -> dict:
        return {"paper_id": self.paper_id, "title": self.title, "functions": self.functions,
                "experiments": self.experiments, "samples": self.samples}


@dataclass
class SuiteOverview:
    suite: Suite
    papers: list[PaperSummary]
    samples_by_n: dict[int, int]
    gold_stability: SuiteGoldStability | None
    downloads: list[TaskDownload] = field(default_factory=list)

    @property
    def functions(self) -> int:
        return sum(paper.functions for paper in self.papers)

    @property
    def experiments(self) -> int:
        return sum(paper.experiments for paper in self.papers)


def task_download_url(*, suite: str, n: int, context: str) -> str | None:
    """The task export's download (leaderboard:task_download), or None while it is not wired up."""
    try:
        return reverse("leaderboard:task_download", args=[suite, n, context])
    except NoReverseMatch:
        return None


def suite_overview(*, name: str) -> SuiteOverview | None:
    """A suite's papers with their counts, its samples by n and its gold stability (four queries);
    None when there is no such suite."""
    suite = Suite.objects.filter(name=name).first()
    if suite is None:
        return None
    papers = [
        PaperSummary(*row)
        for row in Paper.objects.filter(suite=suite)
        .annotate(
            function_count=_count_of(Function, "paper"),
            experiment_count=_count_of(Experiment, "paper"),
            sample_count=_count_of(Sample, "paper"),
        )
        .order_by("paper_id")
        .values_list("paper_id", "title", "function_count", "experiment_count", "sample_count")
    ]
    samples_by_n = dict(
        Sample.objects.filter(paper__suite=suite).order_by("n").values("n").annotate(count=Count("pk")).values_list("n", "count")
    )
    stability = suites_gold_stability(names=[suite.name])
    downloads = [
        TaskDownload(n=n, context=context, url=url)
        for n in samples_by_n
        for context in CONTEXTS
        if (url := task_download_url(suite=suite.name, n=n, context=context)) is not None
    ]
    return SuiteOverview(suite=suite, papers=papers, samples_by_n=samples_by_n,
                         gold_stability=stability[0] if stability else None, downloads=downloads)


# --- pass rates by system -------------------------------------------------------------------------------


@dataclass
class SystemRate(PassRates):
    """One system's counted attempts at the samples in question, and how many passed."""

    system: SystemRow
    attempts: int
    passes: int
    attempts_n1: int
    passes_n1: int

    def as_dict(self) -> dict:
        return {
            "system": self.system.slug, "name": self.system.name, "agent": self.system.agent, "model": self.system.model,
            "context": self.system.context, "agent_config": self.system.config,
            "attempts": self.attempts, "passes": self.passes, "pass_rate": self.pass_rate,
            "attempts_n1": self.attempts_n1, "passes_n1": self.passes_n1, "pass_rate_n1": self.pass_rate_n1,
        }


def rates_by_system(*, suite: str, samples) -> list[SystemRate]:
    """Per system of `suite` (public runs only, the leaderboard's systems and verdict rule): counted
    attempts at the samples of the `samples` queryset and their passes, best first (two queries)."""
    runs = runs_frame(Q(suite__name=suite))
    if runs.empty:
        return []
    counted = counted_q(LeaderboardFilters())
    rows = (
        Attempt.objects.filter(counted, run_id__in=[int(pk) for pk in runs["run_id"]], sample_id__in=samples.values("pk"))
        .annotate(system_no=system_case(runs))
        .order_by()
        .values("system_no")
        .annotate(
            attempts=Count("pk"),
            passes=Count("pk", filter=passes_q()),
            attempts_n1=Count("pk", filter=Q(sample__n=1)),
            passes_n1=Count("pk", filter=Q(sample__n=1) & passes_q()),
        )
        .values_list("system_no", "attempts", "passes", "attempts_n1", "passes_n1")
    )
    rates = []
    for number, attempts, passes, attempts_n1, passes_n1 in rows:
        own = runs[runs["system_no"] == number]
        if own.empty:
            continue
        first = own.iloc[0]
        system = SystemRow(
            slug=first["slug"], suite=first["suite"], agent=first["agent"], model=first["model"],
            config=first["agent_config"] or {}, config_json=first["config_json"], context=first["context"],
            run_ids=[int(pk) for pk in own["run_id"]], k=int(own["k"].max()), by_n={},
        )
        rates.append(SystemRate(system, attempts, passes, attempts_n1, passes_n1))
    rates.sort(key=lambda rate: (rate.system.name.lower(), rate.system.slug))
    rates.sort(key=lambda rate: -(rate.pass_rate or 0.0))
    return rates


class StoredFunctionRates:
    """A function's pass rates by system from the counts its systems' refreshes stored
    (SystemFunctionStanding, the default counting rule: the same counts as `rates_by_system` at the
    samples masking it), best first, as a sequence Paginator can page: `count()` and a slice are one
    query each, sorted and cut in the database, whatever the number of systems or attempts. A slice
    leaves out a system whose runs were all hidden since its refresh (one query), and a system
    changed since is marked stale."""

    def __init__(self, function: Function):
        at_n1 = Q(functions__n=1)
        self._standings = (
            SystemStanding.objects.filter(functions__function=function, functions__verified_only=True,
                                          refreshed_at__isnull=False)
            .annotate(attempts=Sum("functions__attempts"), passes=Sum("functions__passes"),
                      attempts_n1=Sum("functions__attempts", filter=at_n1), passes_n1=Sum("functions__passes", filter=at_n1))
            .annotate(rate=Cast("passes", FloatField()) / Cast("attempts", FloatField()))
            .order_by("-rate", system_name_order(), Lower("agent"), "slug")
        )

    def count(self) -> int:
        return self._standings.count()

    def __len__(self) -> int:
        return self.count()

    def __getitem__(self, window: slice) -> list[SystemRate]:
        standings = list(self._standings[window])
        shown = standings_shown_runs(standings)
        return [
            SystemRate(
                SystemRow(slug=standing.slug, suite=standing.suite, agent=standing.agent, model=standing.model,
                          config=json.loads(standing.config_json), config_json=standing.config_json,
                          context=standing.context, run_ids=list(shown[standing.pk]), k=standing.k, by_n={},
                          stale=standing.stale),
                standing.attempts, standing.passes, standing.attempts_n1 or 0, standing.passes_n1 or 0,
            )
            for standing in standings if standing.pk in shown
        ]


# --- a paper -------------------------------------------------------------------------------------------


@dataclass
class CodeTree:
    files: list[CodeFile]
    truncated: bool
    problem: str = ""  # why nothing could be listed


def _excluded(name: str) -> bool:
    """What the workspace leaves out of a codebase (runs.benchmark.workspace._copy_code)."""
    return name in EXCLUDED_DIRS or name.endswith(EXCLUDED_SUFFIXES)


def code_tree(code_dir: str, *, limit: int = CODE_TREE_LIMIT) -> CodeTree:
    """The files of a gold codebase, as the workspace copies them: history, caches and backups left
    out (runs.benchmark.workspace EXCLUDED_DIRS / EXCLUDED_SUFFIXES), symbolic links listed but never
    followed, at most `limit` entries."""
    if not code_dir:
        return CodeTree(files=[], truncated=False, problem="no gold code directory was found for this paper")
    root = Path(code_dir)
    if not root.is_dir():
        return CodeTree(files=[], truncated=False, problem="the gold code directory is missing on this server")
    files: list[CodeFile] = []
    for directory, subdirs, names in os.walk(root):  # followlinks=False: a linked directory is not entered
        directory = Path(directory)
        subdirs[:] = sorted(name for name in subdirs if not _excluded(name))
        linked_dirs = [name for name in subdirs if (directory / name).is_symlink()]
        for name in sorted(names + linked_dirs):
            if _excluded(name):
                continue
            path = directory / name
            relative = path.relative_to(root).as_posix()
            if len(files) == limit:
                return CodeTree(files=files, truncated=True)
            if path.is_symlink():
                files.append(CodeFile(path=relative, size=None, symlink=True))
            else:
                files.append(CodeFile(path=relative, size=path.lstat().st_size, symlink=False))
    return CodeTree(files=files, truncated=False)


@dataclass
class PaperDetail:
    paper: Paper
    text_start: str
    text_truncated: bool
    functions: list[Function]
    experiments: list[Experiment]
    samples_by_n: dict[int, int]
    tree: CodeTree


def paper_get(*, suite: str, paper_id: str) -> Paper | None:
    return Paper.objects.select_related("suite").filter(suite__name=suite, paper_id=paper_id).first()


def paper_detail(*, suite: str, paper_id: str) -> PaperDetail | None:
    """A paper: the start of its text, its functions, experiments (with their dependencies), sample
    counts by n and code tree (five queries); None when there is no such paper."""
    paper = paper_get(suite=suite, paper_id=paper_id)
    if paper is None:
        return None
    return PaperDetail(
        paper=paper,
        text_start=paper.text[:PAPER_TEXT_CHARS],
        text_truncated=len(paper.text) > PAPER_TEXT_CHARS,
        functions=list(paper.functions.order_by("func_id")),
        experiments=list(paper.experiments.order_by("exp_id").prefetch_related("dependencies")),
        samples_by_n=dict(paper.samples.order_by("n").values("n").annotate(count=Count("pk")).values_list("n", "count")),
        tree=code_tree(paper.code_dir),
    )


# --- a function ----------------------------------------------------------------------------------------


@dataclass
class FunctionDetail:
    function: Function
    stub: str  # the function as the agent sees it in its workspace: signature, docstring, raise
    stub_problem: str  # why the stub could not be built (then `stub` is empty)
    gold_body: str | None  # None unless the viewer may see it (and found)
    experiments: list[Experiment]
    rates: StoredFunctionRates  # a page of it at a time
    access: GoldAccess  # what the viewer may see of the suite's gold


def _gold_source(paper: Paper, function: Function) -> str:
    if not paper.code_dir:
        raise MaskingError("no gold code directory was found for this paper")
    path = Path(paper.code_dir) / function.file
    if not path.is_file():
        raise MaskingError(f"{function.file} is missing from the gold code on this server")
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise MaskingError(f"{function.file} is not valid UTF-8 ({error.reason} at byte {error.start})") from None


def masked_stub(source: str, function: Function) -> str:
    """The function in its masked file, from its `def` line to the end of its stub: exactly the text
    the agent finds (mask_source, as the workspace masks it)."""
    target = MaskTarget(name=function.name, description=function.description, line_hint=function.line_hint)
    masked = mask_source(source, [target], filename=function.file)
    (start, _), replacement, location = masked.spans[0], masked.replacements[0], masked.locations[0]
    line_starts = [0] + [line_break.end() for line_break in NEWLINE.finditer(source)]  # Python's own line breaks
    def_start = line_starts[location.def_line - 1]
    return source[def_start:start] + replacement


def function_detail(*, suite: str, paper_id: str, func_id: int, user) -> FunctionDetail | None:
    """A function: its masked stub, its gold body when `user` may see the suite's gold code, the
    experiments depending on it (four queries) and how often each system implements it (read a page at
    a time: StoredFunctionRates); None when there is no such function."""
    paper = paper_get(suite=suite, paper_id=paper_id)
    function = paper and paper.functions.filter(func_id=func_id).first()
    if function is None:
        return None
    access = gold_access(user=user, suite=paper.suite)
    include_gold = access.code
    stub, problem, gold_body = "", "", None
    try:
        source = _gold_source(paper, function)
        stub = masked_stub(source, function)
        if include_gold:
            gold_body = function_body_source(source, function.name, line_hint=function.line_hint)
    except (MaskingError, SyntaxError) as error:
        problem = str(error)
    return FunctionDetail(
        function=function, stub=stub, stub_problem=problem, gold_body=gold_body,
        experiments=list(function.experiments.order_by("exp_id")),
        rates=StoredFunctionRates(function),
        access=access,
    )


# --- an experiment -------------------------------------------------------------------------------------


@dataclass
class ExperimentDetail:
    experiment: Experiment
    dependencies: list[Function]
    rates: list[SystemRate]
    access: GoldAccess  # what the viewer may see of the suite's gold (its numbers: `access.numbers`)


def experiment_detail(*, suite: str, paper_id: str, exp_id: int, user) -> ExperimentDetail | None:
    """An experiment, the functions it depends on and, per system, the verdicts of attempts at the
    samples that run it (those masking one of its dependencies; five queries); None when there is none.
    Its gold numbers are for the viewers `detail.access.numbers` allows (the caller's part)."""
    paper = paper_get(suite=suite, paper_id=paper_id)
    experiment = paper and paper.experiments.filter(exp_id=exp_id).first()
    if experiment is None:
        return None
    dependencies = list(experiment.dependencies.order_by("func_id"))
    samples = Sample.objects.filter(functions__in=[function.pk for function in dependencies])
    return ExperimentDetail(
        experiment=experiment, dependencies=dependencies,
        rates=rates_by_system(suite=suite, samples=samples) if dependencies else [],
        access=gold_access(user=user, suite=paper.suite),
    )


# --- the samples of one n ------------------------------------------------------------------------------


@dataclass
class SampleRow:
    """One sample and a summary of the attempts at it the viewer may see (every system's): how many
    there are, count (done and re-executed, the leaderboard's default rule), pass and failed on the
    infrastructure. The attempts themselves are in the explorer (`attempts_url`), a page at a time."""

    sample: Sample
    functions: list[Function]
    attempts_url: str | None = None
    total: int = 0  # attempts that ended (done or error): what the explorer lists
    counted: int = 0
    passes: int = 0
    errors: int = 0
    runs: int = 0

    @property
    def pass_rate(self) -> float | None:
        return self.passes / self.counted if self.counted else None

    def summary(self) -> dict:
        return {"attempts": self.counted, "passes": self.passes, "pass_rate": self.pass_rate, "errors": self.errors,
                "ended_attempts": self.total, "runs": self.runs, "attempts_url": self.attempts_url}


@dataclass
class SamplesPage:
    suite: Suite
    n: int
    n_values: list[int]
    page: object  # django.core.paginator.Page of Sample
    rows: list[SampleRow]


class BadSamplesRequest(ValueError):
    """The samples page was asked for an n or a page that it does not have; the message says which."""


def _explore_url_maker(suite: str):
    """A function from (paper id, sample id) to the attempts explorer listing the attempts at that
    sample (None while the explorer is not wired up)."""
    try:
        base = reverse("leaderboard:explore")
    except NoReverseMatch:
        return lambda paper, sample_id: None
    return lambda paper, sample_id: f"{base}?{urlencode({'suite': suite, 'paper': paper, 'sample': sample_id})}"


def samples_page(*, suite: Suite, n: int | None, page: str | None, user) -> SamplesPage:
    """The samples of `suite` at `n` (default: its smallest n), a page at a time, each with a
    summary of the attempts at it that `user` may see (five queries, the attempts grouped per sample
    in the database: nothing grows with their number). Raises BadSamplesRequest."""
    n_values = list(Sample.objects.filter(paper__suite=suite).order_by("n").values_list("n", flat=True).distinct())
    if n is None:
        n = n_values[0] if n_values else 1
    elif n not in n_values:
        known = ", ".join(map(str, n_values)) or "none yet"
        raise BadSamplesRequest(f"n={n}: suite {suite.name} has no samples with {n} masked functions (n with samples: {known})")
    samples = (
        Sample.objects.filter(paper__suite=suite, n=n).select_related("paper").order_by("paper__paper_id", "sample_id")
    )
    paginator = Paginator(samples, SAMPLES_PER_PAGE)
    number = page or "1"
    if not number.isascii() or not number.isdigit() or not 1 <= int(number) <= paginator.num_pages:
        raise BadSamplesRequest(f"page={number[:20]!r}: pages of n={n} run from 1 to {paginator.num_pages}")
    current = paginator.page(int(number))
    explore_url = _explore_url_maker(suite.name)
    by_pk = {
        sample.pk: SampleRow(sample=sample, functions=[], attempts_url=explore_url(sample.paper.paper_id, sample.sample_id))
        for sample in current.object_list
    }
    masks = Sample.functions.through.objects.filter(sample_id__in=list(by_pk)).select_related("function")
    for mask in masks.order_by("function__func_id"):
        by_pk[mask.sample_id].functions.append(mask.function)
    # Not re-executed (an upload's reported numbers): not counted, as on the default leaderboard.
    counted = Q(status=Attempt.DONE, reexecution_passed__isnull=False)
    summaries = (
        Attempt.objects.filter(runs_visible_q(user=user, prefix="run__"), sample_id__in=list(by_pk))
        .order_by()
        .values("sample_id")
        .annotate(
            total=Count("pk", filter=Q(status__in=ENDED_STATUSES)), counted=Count("pk", filter=counted), passes=Count("pk", filter=counted & passes_q()),
            errors=Count("pk", filter=Q(status=Attempt.ERROR)), runs=Count("run_id", distinct=True),
        )
        .values_list("sample_id", "total", "counted", "passes", "errors", "runs")
    )
    for sample_pk, total, counted_attempts, passes, errors, runs in summaries:
        row = by_pk[sample_pk]
        row.total, row.counted, row.passes, row.errors, row.runs = total, counted_attempts, passes, errors, runs
    return SamplesPage(suite=suite, n=n, n_values=n_values, page=current, rows=list(by_pk.values()))
