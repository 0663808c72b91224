"""Producing gold results and validating a suite, by running its code in the sandbox.

make_gold: gold numbers come from running the gold code (N times, each in a fresh workspace and
sandbox, to measure noise), never from a person typing them. An experiment whose runs differ by
more than half its tolerance is marked unstable (runs.benchmark.stability) and handled by the
suite's policy when scoring (`scoring_tolerances`, runs.evaluation.verdicts). `make_gold --check`
re-runs the gold code and reports each number's drift from the stored gold, writing nothing.
validate_suite: every function must matter (masking it breaks a dependent experiment), the gold
code must pass in a built workspace and be stable (or marked unstable), and plausible wrong
implementations (mutants) must be caught; otherwise a sample could be passed without implementing
anything.

Hidden variants of experiments (held-out checks, runs.models.HeldOutCheck) are gold targets like
the experiments: make_gold runs them as often, measures their spread and stores their gold (in
gold.json's "held_out"); validate_suite checks that the gold code passes them, that masking a
function breaks them, and reports how many mutants they catch, apart from the experiments' figures.
"""
import json
import tempfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path

from django.db import transaction

from runs.benchmark.execution import ExperimentOutcome, printed_result, run_experiment
from runs.benchmark.masking import MaskTarget, mask_source
from runs.benchmark.mutation import function_mutants
from runs.benchmark.scoring import DEFAULT_ATOL, DEFAULT_RTOL, score_experiment
from runs.benchmark.stability import (
    UNSTABLE_FRACTION,
    DriftRow,
    NumberTolerances,
    StabilityError,
    drift_rows,
    largest_relative_spread,
    number_spreads,
    spread_in_tolerances,
    widened_tolerances,
)
from runs.benchmark.workspace import CODE_DIR, ExperimentSpec, WorkspaceSpec, build_workspace
from runs.models import Experiment, Function, HeldOutCheck, Paper, Suite
from runs.suites.environments import NotPrepared, paper_provisions, paper_sandbox
from runs.suites.selectors import experiment_spec, gold_workspace_spec, held_out_spec

Progress = Callable[[str], None]

DEFAULT_REPEATS = 3

# What make_gold runs and stores gold for: an experiment, or one of its hidden variants (the same
# gold fields and tolerances; a variant reads its experiment's).
GoldTarget = Experiment | HeldOutCheck


class GoldError(Exception):
    pass


def experiment_tolerance(experiment: Experiment) -> tuple[float, float]:
    """The experiment's own (rtol, atol): its overrides, else the scoring rule's defaults."""
    rtol = DEFAULT_RTOL if experiment.rtol is None else experiment.rtol
    atol = DEFAULT_ATOL if experiment.atol is None else experiment.atol
    return rtol, atol


def scoring_tolerances(experiment: Experiment) -> tuple[float, float, NumberTolerances]:
    """How `experiment` is judged when it is scored: its (rtol, atol), and the numbers judged with
    their own, widened to cover every value their gold runs printed when the experiment is marked
    unstable (runs.benchmark.stability.widened_tolerances); only the noisy numbers are widened."""
    rtol, atol = experiment_tolerance(experiment)
    if experiment.gold_unstable and experiment.gold_result is not None and experiment.gold_spreads:
        return rtol, atol, widened_tolerances(experiment.gold_result, experiment.gold_spreads, rtol, atol)
    return rtol, atol, {}


def _where(target: GoldTarget) -> str:
    if isinstance(target, HeldOutCheck):
        return f"{target.paper.paper_id} experiment {target.experiment.exp_id} held-out variant {target.variant_id}"
    return f"{target.paper.paper_id} experiment {target.exp_id}"


def _spec(target: GoldTarget) -> ExperimentSpec:
    return held_out_spec(target) if isinstance(target, HeldOutCheck) else experiment_spec(target)


def _paper_targets(paper: Paper) -> list[GoldTarget]:
    """The paper's experiments in id order, then their hidden variants."""
    experiments = list(paper.experiments.select_related("paper").order_by("exp_id"))
    by_id = {experiment.pk: experiment for experiment in experiments}
    variants = list(HeldOutCheck.objects.filter(experiment__paper=paper).order_by("experiment__exp_id", "variant_id"))
    for variant in variants:
        variant.experiment = by_id[variant.experiment_id]
    return [*experiments, *variants]


def _paper_sandbox(paper: Paper, scratch: Path, backend: str, *, repeat: int = 1, spec: WorkspaceSpec | None = None):
    """A sandbox on a fresh workspace of the paper's gold code (nothing masked); `spec`: that
    workspace's spec, when read already (gold_workspace_spec queries the database)."""
    workspace = scratch / f"{paper.paper_id}-{repeat}"
    build_workspace(spec or gold_workspace_spec(paper=paper), workspace)
    try:
        return workspace, paper_sandbox(paper, backend=backend, workspace=workspace, name=f"suite-check-{paper.paper_id}-{repeat}")
    except NotPrepared as error:
        raise GoldError(str(error)) from None


def _papers_prepared(papers: list[Paper], backend: str) -> None:
    """Refuse, before anything runs, a suite whose papers' environments or data this machine lacks."""
    missing = []
    for paper in papers:
        try:
            paper_provisions(paper, backend=backend)
        except NotPrepared as error:
            missing.append(str(error))
    if missing:
        raise GoldError("the suite is not prepared on this machine:\n" + "\n".join(missing))


def _gold_pass(paper: Paper, experiments: list[GoldTarget], scratch: Path, backend: str, *, repeat: int,
               environments: dict[str, dict] | None = None, spec: WorkspaceSpec | None = None) -> list[ExperimentOutcome]:
    """One run of every experiment (and hidden variant) of `paper` in a fresh workspace and sandbox of its gold code."""
    _, sandbox = _paper_sandbox(paper, scratch, backend, repeat=repeat, spec=spec)
    with sandbox:
        if environments is not None:
            environments[paper.paper_id] = _sandbox_versions(sandbox, backend)
        return [run_experiment(sandbox, _spec(experiment)) for experiment in experiments]


def _gold_runs(suite: Suite, backend: str, repeats: int, environments: dict[str, dict] | None = None
               ) -> list[tuple[GoldTarget, list[ExperimentOutcome]]]:
    """Every experiment and hidden variant of the suite's papers with gold code, with its outcome in
    each of `repeats` passes (a fresh workspace and sandbox per paper and pass, so no run sees
    another's files)."""
    runs = []
    papers = list(suite.papers.exclude(code_dir="").select_related("suite").order_by("paper_id"))
    _papers_prepared(papers, backend)
    with tempfile.TemporaryDirectory(prefix="make-gold-") as scratch:
        for paper in papers:
            experiments = _paper_targets(paper)
            passes = [
                _gold_pass(paper, experiments, Path(scratch), backend, repeat=repeat,
                           environments=environments if repeat == 1 else None)
                for repeat in range(1, repeats + 1)
            ]
            runs.extend((experiment, [outcomes[index] for outcomes in passes]) for index, experiment in enumerate(experiments))
    return runs


@dataclass(frozen=True)
class GoldStability:
    """An experiment's gold over repeated runs: the first run's result is the gold."""

    experiment: GoldTarget
    result: dict
    spreads: dict
    in_tolerances: float  # the largest number spread, in units of that number's tolerance
    repeats: int

    @property
    def unstable(self) -> bool:
        return self.in_tolerances > UNSTABLE_FRACTION

    @property
    def relative_spread(self) -> float:
        return largest_relative_spread(self.result, self.spreads)

    @property
    def label(self) -> str:
        return _where(self.experiment)

    @property
    def held_out(self) -> bool:
        return isinstance(self.experiment, HeldOutCheck)


def _failed_outcome(where: str, outcomes: list[ExperimentOutcome]) -> str | None:
    for repeat, outcome in enumerate(outcomes, start=1):
        if outcome.error:
            return f"{where}: run {repeat} of {len(outcomes)}: {outcome.error}\n{outcome.output[-2000:]}"
    return None


def suite_make_gold(*, suite: Suite, backend: str, repeats: int = DEFAULT_REPEATS,
                    progress: Progress = print) -> list[GoldStability]:
    """Run every experiment of `suite` `repeats` times, each time in a fresh sandbox, and store the
    first run's results as gold with every number's spread over the runs.

    An experiment whose runs differ by more than half a number's tolerance is stored and marked
    unstable (the suite's policy decides how it is scored). Nothing at all is stored if an
    experiment crashed or its runs printed different keys. A native suite also gets its
    `gold.json` files rewritten.
    """
    if repeats < 2:
        raise GoldError(f"make_gold needs at least 2 repeats to measure noise, got {repeats}")
    environments: dict[str, dict] = {}
    measured: list[GoldStability] = []
    failures = []
    for experiment, outcomes in _gold_runs(suite, backend, repeats, environments):
        where = _where(experiment)
        if failure := _failed_outcome(where, outcomes):
            failures.append(failure)
            continue
        try:
            spreads = number_spreads([outcome.result for outcome in outcomes])
        except StabilityError as error:
            failures.append(f"{where}: {error}")
            continue
        gold = outcomes[0].result
        stability = GoldStability(
            experiment=experiment, result=gold, spreads=spreads, repeats=repeats,
            in_tolerances=spread_in_tolerances(gold, spreads, *experiment_tolerance(experiment)),
        )
        measured.append(stability)
        seconds = max(outcome.duration for outcome in outcomes)
        progress(
            f"{where}: {json.dumps(gold)} ({'UNSTABLE' if stability.unstable else 'stable'}: largest spread "
            f"{stability.in_tolerances:.2g} of its tolerance over {repeats} runs, {seconds:.1f} s)"
        )
    if failures:
        raise GoldError("gold results were not stored:\n" + "\n".join(failures))
    _store_gold(suite, measured, environments)
    return measured


def _sandbox_versions(sandbox, backend: str) -> dict:
    """Where the gold numbers were made, so a later drift can be traced to an interpreter or numpy change."""
    probe = sandbox.execute(
        'python3 -c "import json, platform; import numpy; '
        'print(json.dumps({\'python\': platform.python_version(), \'numpy\': numpy.__version__}))"',
        timeout=60,
    )
    return {"sandbox": backend, **(printed_result(probe.output) or {"python": "unknown", "numpy": "unknown"})}


@transaction.atomic
def _store_gold(suite: Suite, measured: list[GoldStability], environments: dict[str, dict]) -> None:
    by_paper: dict[Paper, dict[int, GoldStability]] = {}
    variants_by_paper: dict[Paper, dict[str, dict[str, dict]]] = {}
    for stability in measured:
        target = stability.experiment
        target.gold_result = stability.result
        target.gold_spread = stability.relative_spread
        target.gold_repeats = stability.repeats
        target.gold_spreads = stability.spreads
        target.gold_unstable = stability.unstable
        target.save(update_fields=["gold_result", "gold_spread", "gold_repeats", "gold_spreads", "gold_unstable"])
        if isinstance(target, HeldOutCheck):
            variants_by_paper.setdefault(target.paper, {}).setdefault(str(target.experiment.exp_id), {})[
                str(target.variant_id)
            ] = {"result": stability.result, "spread": stability.relative_spread, "spreads": stability.spreads,
                 "unstable": stability.unstable}
        else:
            by_paper.setdefault(target.paper, {})[target.exp_id] = stability
    if suite.source_format != Suite.Format.NATIVE:
        return
    for paper, stored in by_paper.items():
        ids = sorted(stored)
        held_out = variants_by_paper.get(paper)
        document = {
            "generated_by": "python manage.py make_gold",
            **environments[paper.paper_id],
            "repeats": stored[ids[0]].repeats,
            "results": {str(i): stored[i].result for i in ids},
            "spread": {str(i): stored[i].relative_spread for i in ids},
            "spreads": {str(i): stored[i].spreads for i in ids},
            "unstable": [i for i in ids if stored[i].unstable],
            **({"held_out": held_out} if held_out else {}),
        }
        (Path(paper.code_dir).parent / "gold.json").write_text(json.dumps(document, indent=2) + "\n")


@dataclass
class GoldCheck:
    """`make_gold --check`: each stored gold number against what the gold code prints now."""

    repeats: int
    rows: list[tuple[GoldTarget, DriftRow]] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    @property
    def drifted(self) -> list[tuple[GoldTarget, DriftRow]]:
        return [(experiment, row) for experiment, row in self.rows if not row.within_tolerance]

    def lines(self) -> list[str]:
        lines = []
        for experiment, row in self.rows:
            relative = "n/a" if row.relative_difference is None else f"{row.relative_difference:.2e}"
            status = "new key, not scored" if row.new_key else "ok" if row.within_tolerance else "DRIFTED beyond tolerance"
            lines.append(f"{_where(experiment)} {row.key or '(result)'}: stored {row.stored!r}, now {row.now!r}, "
                         f"relative drift {relative}: {status}")
        lines.extend(f"PROBLEM: {problem}" for problem in self.problems)
        return lines


def suite_check_gold(*, suite: Suite, backend: str, repeats: int = 1) -> GoldCheck:
    """Re-run the suite's gold code `repeats` times and compare every number with the stored gold,
    within the tolerance it is scored with (`scoring_tolerances`: an unstable experiment's noisy
    numbers widened). Writes nothing: neither the database nor gold.json."""
    if repeats < 1:
        raise GoldError(f"--check needs at least 1 repeat, got {repeats}")
    check = GoldCheck(repeats=repeats)
    for experiment, outcomes in _gold_runs(suite, backend, repeats):
        where = _where(experiment)
        if experiment.gold_result is None:
            check.problems.append(f"{where}: no stored gold to compare with (run make_gold)")
        elif failure := _failed_outcome(where, outcomes):
            check.problems.append(failure)
        else:
            rows = drift_rows(experiment.gold_result, [o.result for o in outcomes], *scoring_tolerances(experiment))
            check.rows.extend((experiment, row) for row in rows)
    return check


class MutantVerdict(StrEnum):
    """How a mutant (or a mask) fares against a function's dependent experiments, run in order until
    one fails (running the rest would multiply validate_suite's time for little): that first
    failure decides."""

    CRASH = "crash"  # errs: non-zero exit, timeout, no parseable result
    WRONG_NUMBERS = "wrong numbers"  # runs and prints numbers outside tolerance
    SURVIVES = "survives"  # every dependent passes: the suite cannot tell it from the gold code


@dataclass
class HeldOutFigures:
    """How a function's mask fares against the hidden variants of its dependent experiments, and
    the mutants its experiments let through: the variants are run on those alone (a mutant the
    experiments catch fails the attempt before any variant runs, as in re-execution)."""

    variants: int = 0
    mask_breaks: bool = True
    mutants_tried: int = 0  # the mutants the experiments let through
    mutants_crash: int = 0
    mutants_wrong: int = 0

    @property
    def mutants_caught(self) -> int:
        return self.mutants_crash + self.mutants_wrong


@dataclass
class FunctionCheck:
    label: str
    experiments: list[int]
    mask_breaks: bool
    mutants_tried: int = 0
    mutants_crash: int = 0
    mutants_wrong: int = 0
    survivors: list[str] = field(default_factory=list)
    held_out: HeldOutFigures = field(default_factory=HeldOutFigures)

    @property
    def mutants_caught(self) -> int:
        return self.mutants_crash + self.mutants_wrong


@dataclass
class ExperimentStability:
    """An experiment's gold over `repeats` fresh runs at validation, measured as make_gold measures
    it (runs.benchmark.stability), next to what make_gold stored."""

    label: str
    repeats: int
    in_tolerances: float | None  # the largest number spread in units of its tolerance; None: a run failed
    marked_unstable: bool  # what make_gold stored, which scoring acts on
    # A marked-unstable experiment's run printed numbers outside even its widened tolerance: the
    # spread make_gold measured understates the noise.
    beyond_widened: bool = False
    # Why the runs cannot be compared at all (runs.benchmark.stability.StabilityError: they printed
    # different keys or different non-numbers); in_tolerances is then None.
    not_comparable: str | None = None
    held_out: bool = False  # a hidden variant's, not an experiment's

    @property
    def unstable(self) -> bool:
        return self.in_tolerances is not None and self.in_tolerances > UNSTABLE_FRACTION

    @property
    def handled(self) -> bool:
        """Stable, or unstable and marked so (then the suite's policy applies when scoring). Runs
        that cannot be compared are neither: no spread, so no policy, covers them."""
        return self.not_comparable is None and (not self.unstable or self.marked_unstable)

    def describe(self) -> str:
        if self.not_comparable is not None:
            return f"NOT COMPARABLE over runs: {self.not_comparable}"
        if self.in_tolerances is None:
            return "not measured (a gold run failed)"
        state = "UNSTABLE" if self.unstable else "stable"
        if self.unstable and not self.marked_unstable:
            state += " but stored as stable: re-run make_gold"
        elif self.marked_unstable and not self.unstable:
            state += " (stored as unstable)"
        described = f"{state}, largest spread {self.in_tolerances:.2g} of tolerance"
        if self.beyond_widened:
            described += "; a run fell outside its widened tolerance: re-run make_gold with more repeats"
        return described


@dataclass
class ValidationReport:
    policy: str = Suite.UnstablePolicy.WIDEN
    gold_failures: list[str] = field(default_factory=list)
    stability: list[ExperimentStability] = field(default_factory=list)
    functions: list[FunctionCheck] = field(default_factory=list)

    @property
    def mutants_tried(self) -> int:
        return sum(check.mutants_tried for check in self.functions)

    @property
    def mutants_caught(self) -> int:
        return sum(check.mutants_caught for check in self.functions)

    @property
    def mutants_crash(self) -> int:
        return sum(check.mutants_crash for check in self.functions)

    @property
    def mutants_wrong(self) -> int:
        return sum(check.mutants_wrong for check in self.functions)

    @property
    def catch_rate(self) -> float:
        return self.mutants_caught / self.mutants_tried if self.mutants_tried else 1.0

    @property
    def unstable(self) -> list[ExperimentStability]:
        return [item for item in self.stability if item.unstable]

    def held_out_total(self, name: str) -> int:
        return sum(getattr(check.held_out, name) for check in self.functions)

    def passed(self, *, min_catch_rate: float) -> bool:
        # An unstable experiment is no reason to refuse the suite when make_gold marked it (the policy
        # handles it); one measured unstable but stored as stable would be scored as if it were not.
        # A hidden variant that masking leaves passing would let a noop through its check.
        return (
            not self.gold_failures
            and all(item.handled for item in self.stability)
            and all(check.mask_breaks and check.held_out.mask_breaks for check in self.functions)
            and self.catch_rate >= min_catch_rate
        )

    def table(self) -> str:
        header = (f"{'function':<55} {'experiments':<14} {'mask breaks':<12} {'mutants caught':<15} "
                  f"{'crash':>5} {'wrong':>5} {'survive':>7}")
        rows = [header, "-" * len(header)]
        for check in self.functions:
            experiments = ",".join(map(str, check.experiments)) or "none"
            caught = f"{check.mutants_caught}/{check.mutants_tried}"
            rows.append(
                f"{check.label:<55} {experiments:<14} {'yes' if check.mask_breaks else 'NO':<12} {caught:<15} "
                f"{check.mutants_crash:>5} {check.mutants_wrong:>5} {len(check.survivors):>7}"
            )
        rows.append("-" * len(header))
        rows.append(f"mutants caught: {self.mutants_caught}/{self.mutants_tried} ({self.catch_rate:.1%})")
        rows.append(
            f"mutants: {self.mutants_tried} tried: {self.mutants_crash} crash, {self.mutants_wrong} print wrong "
            f"numbers, {self.mutants_tried - self.mutants_caught} survive"
        )
        variants = self.held_out_total("variants")
        if variants:
            checked = [check for check in self.functions if check.held_out.variants]
            tried = self.held_out_total("mutants_tried")
            caught = self.held_out_total("mutants_caught")
            rows.append("")
            hidden = sum(item.held_out for item in self.stability)
            rows.append(f"held-out checks: {hidden} hidden variants; {len(checked)} of {len(self.functions)} functions "
                        f"have some among their dependent experiments")
            rows.append(f"  gold passes every variant: {'no' if any('held-out variant' in f for f in self.gold_failures) else 'yes'}")
            rows.append(f"  noop (the function masked) fails its variants: "
                        f"{sum(check.held_out.mask_breaks for check in checked)}/{len(checked)} functions")
            rows.append(f"  mutants the public experiments let through, caught by the variants: {caught}/{tried} "
                        f"({self.held_out_total('mutants_crash')} crash, {self.held_out_total('mutants_wrong')} print "
                        f"wrong numbers, {tried - caught} survive both)")
            rows.extend(f"  NOOP PASSES THE VARIANTS: {check.label}" for check in checked if not check.held_out.mask_breaks)
        if self.stability:
            repeats = max(item.repeats for item in self.stability)
            rows.append("")
            rows.append(f"gold stability over {repeats} runs (unstable: a number's runs differ by more than "
                        f"{UNSTABLE_FRACTION:g} of its tolerance)")
            rows.extend(f"  {item.label:<45} {item.describe()}" for item in self.stability)
            policy = Suite.UnstablePolicy(self.policy).label
            experiments = [item for item in self.stability if not item.held_out]
            variants = [item for item in self.stability if item.held_out]
            unstable = sum(item.unstable for item in experiments)
            rows.append(f"gold stability: {unstable} of {len(experiments)} experiments unstable (policy: {policy})")
            if variants:
                rows.append(f"held-out gold stability: {sum(item.unstable for item in variants)} of {len(variants)} "
                            f"hidden variants unstable")
        rows.extend(f"GOLD FAILS: {failure}" for failure in self.gold_failures)
        return "\n".join(rows)


def _fails(outcome: ExperimentOutcome, experiment: Experiment) -> bool:
    """Whether the outcome fails the experiment as scoring would judge it (an unstable experiment
    with its widened tolerance, which it is scored with under either policy when it is scored)."""
    if outcome.error:
        return True
    rtol, atol, number_tolerances = scoring_tolerances(experiment)
    return not score_experiment(
        gold=experiment.gold_result, predicted=outcome.result, rtol=rtol, atol=atol, number_tolerances=number_tolerances
    ).passed


def _stability(experiment: Experiment, outcomes: list[ExperimentOutcome]) -> ExperimentStability:
    label = _where(experiment)
    beyond_widened = experiment.gold_unstable and experiment.gold_result is not None and any(
        not outcome.error and _fails(outcome, experiment) for outcome in outcomes
    )
    in_tolerances = not_comparable = None
    if experiment.gold_result is not None and not any(outcome.error for outcome in outcomes):
        try:
            spreads = number_spreads([outcome.result for outcome in outcomes])
        except StabilityError as error:
            not_comparable = str(error)
        else:
            # Judged as make_gold would judge these runs (the first one as gold): would it mark them unstable?
            in_tolerances = spread_in_tolerances(outcomes[0].result, spreads, *experiment_tolerance(experiment))
    return ExperimentStability(label=label, repeats=len(outcomes), in_tolerances=in_tolerances,
                               marked_unstable=experiment.gold_unstable, beyond_widened=beyond_widened,
                               not_comparable=not_comparable, held_out=isinstance(experiment, HeldOutCheck))


@dataclass
class _FunctionPlan:
    """A function's checks as read from the database: its dependent experiments and their hidden variants."""

    function: Function
    dependents: list[Experiment]
    held_out: list[HeldOutCheck]


@dataclass
class _PaperPlan:
    """Everything validating one paper reads from the database, read up front: a paper is then
    checked in a thread of its own, which must not query (a thread has its own connection, which
    sees neither the caller's uncommitted rows nor closes with it)."""

    paper: Paper
    workspace: WorkspaceSpec
    targets: list[GoldTarget]
    functions: list[_FunctionPlan]


@dataclass
class _PaperValidation:
    """What validating one paper found, merged into the report in the papers' order."""

    gold_failures: list[str] = field(default_factory=list)
    functions: list[FunctionCheck] = field(default_factory=list)
    stability: list[ExperimentStability] = field(default_factory=list)


def _paper_plan(paper: Paper) -> _PaperPlan:
    targets = _paper_targets(paper)
    variants: dict[int, list[HeldOutCheck]] = {}
    for target in targets:
        if isinstance(target, HeldOutCheck):
            variants.setdefault(target.experiment_id, []).append(target)
    functions = [
        _function_plan(function, variants)
        for function in paper.functions.select_related("paper").order_by("func_id").prefetch_related("experiments__paper")
    ]
    return _PaperPlan(paper=paper, workspace=gold_workspace_spec(paper=paper), targets=targets, functions=functions)


def _function_plan(function: Function, variants: dict[int, list[HeldOutCheck]]) -> _FunctionPlan:
    with_gold = [e for e in sorted(function.experiments.all(), key=lambda e: e.exp_id) if e.gold_result is not None]
    # Noise must not pass for a caught mutant: unstable experiments judge only a function that has
    # no stable one (as scoring falls back to them when a sample has nothing else).
    dependents = [e for e in with_gold if not e.gold_unstable] or with_gold
    held_out = [v for e in dependents for v in variants.get(e.pk, []) if v.gold_result is not None]
    held_out = [v for v in held_out if not v.gold_unstable] or held_out
    return _FunctionPlan(function=function, dependents=dependents, held_out=held_out)


def suite_validate(
    *, suite: Suite, backend: str, mutants_per_function: int = 6, seed: int = 0, repeats: int = DEFAULT_REPEATS,
    jobs: int = 1, progress: Progress = print,
) -> ValidationReport:
    """Check that the gold code passes and is stable over `repeats` runs (the first run is also the
    pass check; each further run is in a fresh workspace and sandbox), that every mask breaks
    something and that mutants are caught, counting those that crash apart from those that run and
    print wrong numbers. Up to `jobs` papers are checked at once, each in sandboxes of its own (a
    run is mostly one process starting: one at a time leaves cores idle); the report is the same
    whatever `jobs` is."""
    if repeats < 1:
        raise GoldError(f"validate_suite needs at least 1 gold run, got {repeats}")
    if jobs < 1:
        raise GoldError(f"validate_suite needs at least 1 job, got {jobs}")
    report = ValidationReport(policy=suite.unstable_policy)
    papers = list(suite.papers.exclude(code_dir="").select_related("suite").order_by("paper_id"))
    _papers_prepared(papers, backend)
    plans = [_paper_plan(paper) for paper in papers]
    with tempfile.TemporaryDirectory(prefix="validate-suite-") as scratch:
        def validate(plan: _PaperPlan) -> _PaperValidation:
            return _paper_validate(plan, Path(scratch), backend, mutants_per_function, seed, repeats, progress)

        with ThreadPoolExecutor(max_workers=jobs) as pool:
            for found in pool.map(validate, plans):
                report.gold_failures.extend(found.gold_failures)
                report.functions.extend(found.functions)
                report.stability.extend(found.stability)
    return report


def _paper_validate(plan: _PaperPlan, scratch: Path, backend: str, mutants_per_function: int, seed: int, repeats: int,
                    progress: Progress) -> _PaperValidation:
    """One paper's part of suite_validate, from its plan alone (no database)."""
    found = _PaperValidation()
    paper, experiments = plan.paper, plan.targets
    workspace, sandbox = _paper_sandbox(paper, scratch, backend, spec=plan.workspace)
    with sandbox:
        first = [run_experiment(sandbox, _spec(experiment)) for experiment in experiments]
        for experiment, outcome in zip(experiments, first):
            if experiment.gold_result is None:
                found.gold_failures.append(f"{_where(experiment)}: no gold result")
            elif outcome.error:
                found.gold_failures.append(f"{_where(experiment)}: {outcome.error}")
            elif _fails(outcome, experiment) and not experiment.gold_unstable:
                # (a marked-unstable experiment's noise is reported with its stability)
                found.gold_failures.append(f"{_where(experiment)}: numbers differ from gold")
        for function_plan in plan.functions:
            check = _check_function(sandbox, workspace, function_plan, seed, mutants_per_function)
            found.functions.append(check)
            held_out = check.held_out
            progress(
                f"{check.label}: mask breaks={'yes' if check.mask_breaks else 'NO'}, mutants caught "
                f"{check.mutants_caught}/{check.mutants_tried} ({check.mutants_crash} crash, "
                f"{check.mutants_wrong} wrong numbers)"
                + (f"; held-out: mask breaks={'yes' if held_out.mask_breaks else 'NO'}, mutants the "
                   f"experiments let through caught {held_out.mutants_caught}/{held_out.mutants_tried}"
                   if held_out.variants else "")
            )
    passes = [first] + [
        _gold_pass(paper, experiments, scratch, backend, repeat=repeat, spec=plan.workspace) for repeat in range(2, repeats + 1)
    ]
    for index, experiment in enumerate(experiments):
        outcomes = [outcomes[index] for outcomes in passes]
        # The first run's failure is reported above; a later one is a gold failure too.
        found.gold_failures.extend(
            f"{_where(experiment)}: run {repeat} of {repeats}: {outcome.error}"
            for repeat, outcome in enumerate(outcomes[1:], start=2) if outcome.error
        )
        stability = _stability(experiment, outcomes)
        found.stability.append(stability)
        progress(f"{stability.label}: {stability.describe()}")
    return found


def _check_function(sandbox, workspace: Path, plan: _FunctionPlan, seed: int, limit: int) -> FunctionCheck:
    """The function's mask and mutants against its dependent experiments and, apart, against
    those experiments' hidden variants (no database: the plan holds what is read)."""
    function, dependents, held_out = plan.function, plan.dependents, plan.held_out
    path = workspace / CODE_DIR / function.file
    gold_source = path.read_text(encoding="utf-8")

    def verdict(source: str, targets: list[GoldTarget]) -> MutantVerdict:
        path.write_text(source, encoding="utf-8", newline="")
        try:
            for target in targets:
                outcome = run_experiment(sandbox, _spec(target))
                if outcome.error:
                    return MutantVerdict.CRASH
                if _fails(outcome, target):
                    return MutantVerdict.WRONG_NUMBERS
            return MutantVerdict.SURVIVES
        finally:
            path.write_text(gold_source, encoding="utf-8", newline="")

    target = MaskTarget(name=function.name, description=function.description, line_hint=function.line_hint)
    masked = mask_source(gold_source, [target]).text
    check = FunctionCheck(
        label=f"{function.paper.paper_id}#{function.func_id} {function.name}",
        experiments=[e.exp_id for e in dependents],
        mask_breaks=bool(dependents) and verdict(masked, dependents) != MutantVerdict.SURVIVES,
        held_out=HeldOutFigures(variants=len(held_out), mask_breaks=not held_out or verdict(masked, held_out) != MutantVerdict.SURVIVES),
    )
    for mutant in function_mutants(gold_source, function.name, line_hint=function.line_hint, seed=seed, limit=limit):
        check.mutants_tried += 1
        outcome = verdict(mutant.source, dependents)
        if outcome == MutantVerdict.CRASH:
            check.mutants_crash += 1
        elif outcome == MutantVerdict.WRONG_NUMBERS:
            check.mutants_wrong += 1
        else:
            check.survivors.append(mutant.description)
        if held_out and outcome == MutantVerdict.SURVIVES:
            check.held_out.mutants_tried += 1
            hidden = verdict(mutant.source, held_out)
            check.held_out.mutants_crash += hidden == MutantVerdict.CRASH
            check.held_out.mutants_wrong += hidden == MutantVerdict.WRONG_NUMBERS
    return check
