"""Reads of the suite tables: suites and samples by name, a sample's experiments, and what a
workspace of a sample (or of a paper's gold code) holds, as the plain `WorkspaceSpec` that
runs.benchmark.workspace builds from. Plain functions with keyword-only arguments."""

from dataclasses import dataclass
from math import comb
from pathlib import Path

from django.db.models import Count, Q

from runs.benchmark.sampling import sample_id as make_sample_id
from runs.benchmark.workspace import Context, ExperimentSpec, MaskedFunctionSpec, WorkspaceSpec
from runs.models import Experiment, HeldOutCheck, Paper, Sample, Suite


class SampleNotFound(Exception):
    pass


def sample_get(*, sample_id: str, suite: str | None = None) -> Sample:
    """The sample with this id; `suite` (a name) is needed only when two suites share the id."""
    samples = Sample.objects.filter(sample_id=sample_id).select_related("paper__suite")
    if suite:
        samples = samples.filter(paper__suite__name=suite)
    found = list(samples[:2])
    if not found:
        where = f" in suite {suite!r}" if suite else ""
        raise SampleNotFound(
            f"no sample {sample_id!r}{where}; samples are created by import_suite --samples N "
            "or when a run needs them"
        )
    if len(found) > 1:
        suites = ", ".join(sorted(sample.paper.suite.name for sample in found))
        raise SampleNotFound(f"sample {sample_id!r} exists in several suites ({suites}); name one")
    return found[0]


def sample_experiments(*, sample: Sample, functions=None, paper: Paper | None = None) -> list[Experiment]:
    """The experiments that depend on at least one masked function (`functions`: the sample's, when
    read already); all of them for n=0 (reproduction). Each comes with its paper and suite, which
    scoring reads (the suite's unstable-gold policy): `paper` (loaded with its suite) when given,
    else from the same query, the paper's text (tens of kilobytes repeated on every experiment's
    row) staying behind."""
    experiments = Experiment.objects.filter(paper_id=sample.paper_id)
    if sample.n:
        experiments = experiments.filter(dependencies__in=sample.functions.all() if functions is None else functions).distinct()
    if paper is None:
        return list(experiments.select_related("paper__suite").defer("paper__text").order_by("exp_id"))
    experiments = list(experiments.order_by("exp_id"))
    for experiment in experiments:
        experiment.paper = paper
    return experiments


def workspace_spec(*, sample: Sample, context: str = Context.FULL) -> WorkspaceSpec:
    """What the workspace of `sample` holds: its masked functions and the experiments that need them."""
    return sample_task(sample=sample, context=context).spec


@dataclass(frozen=True)
class SampleTask:
    """A sample as an attempt at it needs it, read once: the experiments its answers are scored on and
    the spec its workspaces (the agent's, the re-execution's) are built from."""

    experiments: list[Experiment]
    spec: WorkspaceSpec


def sample_task(*, sample: Sample, context: str = Context.FULL) -> SampleTask:
    """`sample` read with its paper and suite where it was (what a claim loads, runs.evaluation.kinds): two
    queries with nothing joined."""
    functions = list(sample.functions.order_by("func_id"))
    loaded = Sample.paper.is_cached(sample) and Paper.suite.is_cached(sample.paper)
    experiments = sample_experiments(sample=sample, functions=functions, paper=sample.paper if loaded else None)
    spec = _paper_workspace_spec(
        paper=sample.paper,
        sample_id=sample.sample_id,
        functions=functions,
        experiments=experiments,
        context=context,
    )
    return SampleTask(experiments=experiments, spec=spec)


def gold_workspace_spec(*, paper: Paper) -> WorkspaceSpec:
    """A workspace with nothing masked and every experiment: the gold code as the harness runs it."""
    return _paper_workspace_spec(
        paper=paper,
        sample_id=make_sample_id(paper.paper_id, []),
        functions=[],
        experiments=list(paper.experiments.order_by("exp_id")),
        context=Context.FULL,
    )


def experiment_spec(experiment: Experiment) -> ExperimentSpec:
    return ExperimentSpec(
        exp_id=experiment.exp_id,
        description=experiment.description,
        command=experiment.command,
        answer_format=experiment.answer_format,
        timeout_seconds=experiment.timeout_seconds,
    )


def held_out_spec(variant: HeldOutCheck) -> ExperimentSpec:
    """A hidden variant as the harness runs it: its own command, its experiment's answer format and
    timeout, and no description (nothing of it is ever shown to an agent)."""
    experiment = variant.experiment
    return ExperimentSpec(
        exp_id=experiment.exp_id,
        description="",
        command=variant.command,
        answer_format=experiment.answer_format,
        timeout_seconds=experiment.timeout_seconds,
    )


def sample_held_out_checks(*, experiments: list[Experiment]) -> list[HeldOutCheck]:
    """The hidden variants of a sample's experiments (as sample_experiments read them) that have
    gold, in the experiments' order, each with its experiment (and that experiment's paper and
    suite) attached. A variant declared since the last make_gold checks nothing until it has gold."""
    by_id = {experiment.pk: experiment for experiment in experiments}
    variants = list(
        HeldOutCheck.objects.filter(experiment_id__in=by_id, gold_result__isnull=False).order_by("experiment__exp_id", "variant_id")
    )
    for variant in variants:
        variant.experiment = by_id[variant.experiment_id]
    return variants


def masked_function_specs(functions) -> list[MaskedFunctionSpec]:
    """Functions (rows) as the workspace builder masks them."""
    return [
        MaskedFunctionSpec(
            func_id=function.func_id,
            file=function.file,
            name=function.name,
            description=function.description,
            relevant_paper=function.relevant_paper,
            line_hint=function.line_hint,
        )
        for function in functions
    ]


def _paper_workspace_spec(*, paper: Paper, sample_id: str, functions, experiments, context: str) -> WorkspaceSpec:
    masked = masked_function_specs(functions)
    return WorkspaceSpec(
        sample_id=sample_id,
        paper_title=paper.title,
        paper_text=paper.text,
        code_dir=Path(paper.code_dir),
        masked=masked,
        experiments=[experiment_spec(experiment) for experiment in experiments],
        context=context,
    )


def suite_get(*, name: str) -> Suite:
    try:
        return Suite.objects.get(name=name)
    except Suite.DoesNotExist:
        known = ", ".join(Suite.objects.order_by("name").values_list("name", flat=True)) or "none"
        raise Suite.DoesNotExist(f"no suite named {name!r} (imported suites: {known})") from None



def suite_function_counts(*, suite: Suite) -> list[int]:
    """How many maskable functions each paper of `suite` that has gold code holds (papers without
    gold code give no samples: runs.suites.services.samples_ensure passes them over)."""
    return list(
        suite.papers.exclude(code_dir="").annotate(function_count=Count("functions")).values_list("function_count", flat=True)
    )


def suite_max_n(*, suite: Suite) -> int:
    """The largest n a sample of `suite` can have: the most functions one of its papers holds."""
    return max(suite_function_counts(suite=suite), default=0)


def suite_sample_counts(*, suite: Suite, n_values: list[int], cap: int) -> dict[int, int]:
    """How many samples `samples_ensure` gives for each n, counted without drawing or storing any:
    per paper with gold code, all C(F, n) sets when there are at most `cap` of them, else `cap`
    (runs.benchmark.sampling.draw_combinations). What a run's size (and cost) is estimated from
    before it is created."""
    counts = suite_function_counts(suite=suite)
    return {n: sum(min(comb(functions, n), cap) for functions in counts if 0 <= n <= functions) for n in n_values}

@dataclass(frozen=True)
class SuiteGoldStability:
    name: str
    experiments: int
    unstable: int
    policy: str
    # Experiments without a hidden variant (runs.models.HeldOutCheck): a suite's passes are
    # held-out checked when there are none.
    unchecked: int = 0

    @property
    def policy_label(self) -> str:
        return Suite.UnstablePolicy(self.policy).label

    @property
    def held_out_checked(self) -> bool:
        return self.experiments > 0 and self.unchecked == 0


def suites_gold_stability(*, names) -> list[SuiteGoldStability]:
    """For each named suite: how many of its experiments make_gold found unstable, what its policy
    does with them, and how many have no hidden variant (one query)."""
    experiments = "papers__experiments"
    rows = (
        Suite.objects.filter(name__in=names)
        .annotate(
            experiment_count=Count(experiments, distinct=True),
            unstable_count=Count(experiments, filter=Q(papers__experiments__gold_unstable=True), distinct=True),
            unchecked_count=Count(
                experiments, filter=Q(papers__experiments__held_out_checks__isnull=True), distinct=True
            ),
        )
        .order_by("name")
        .values_list("name", "experiment_count", "unstable_count", "unstable_policy", "unchecked_count")
    )
    return [SuiteGoldStability(*row) for row in rows]
