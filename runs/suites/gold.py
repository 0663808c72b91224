"""Producing gold results and validating a suite, by running its code in the sandbox.

make_gold: gold numbers come from running the gold code (twice, to measure noise), never from a
person typing them. validate_suite: every function must matter (masking it breaks a dependent
experiment), the gold code must pass in a built workspace, and plausible wrong implementations
(mutants) must be caught; otherwise a sample could be passed without implementing anything.
"""
import json
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from runs.benchmark.execution import ExperimentOutcome, printed_result, run_experiment
from runs.benchmark.masking import MaskTarget, mask_source
from runs.benchmark.mutation import function_mutants
from runs.benchmark.scoring import DEFAULT_ATOL, DEFAULT_RTOL, flatten_numbers, score_experiment
from runs.benchmark.workspace import CODE_DIR, build_workspace
from runs.models import Experiment, Paper, Suite
from runs.suites.selectors import experiment_spec, gold_workspace_spec
from sandbox import open_sandbox

Progress = Callable[[str], None]


class GoldError(Exception):
    pass


def _tolerance(experiment: Experiment) -> tuple[float, float]:
    rtol = DEFAULT_RTOL if experiment.rtol is None else experiment.rtol
    atol = DEFAULT_ATOL if experiment.atol is None else experiment.atol
    return rtol, atol


def _paper_sandbox(paper: Paper, scratch: Path, backend: str):
    """A sandbox on a fresh workspace of the paper's gold code (nothing masked)."""
    workspace = scratch / paper.paper_id
    build_workspace(gold_workspace_spec(paper=paper), workspace)
    return workspace, open_sandbox(backend, workspace, name=f"suite-check-{paper.paper_id}")


def _runs_disagreement(first: dict, second: dict, rtol: float, atol: float) -> tuple[float, list[str]]:
    """Largest relative difference between two runs, and the keys that differ by more than 1% of the tolerance."""
    a, b = flatten_numbers(first), flatten_numbers(second)
    problems = []
    if set(a) != set(b):
        problems.append(f"the runs printed different keys: {sorted(set(a) ^ set(b))}")
    spread = 0.0
    for key in sorted(set(a) & set(b)):
        x, y = float(a[key]), float(b[key])
        difference = abs(x - y)
        spread = max(spread, difference / abs(x) if x else difference)
        limit = (rtol * abs(x) + atol) / 100
        if difference > limit:
            problems.append(f"{key}: {x!r} then {y!r} (differ by {difference:.3g}, limit {limit:.3g})")
    return spread, problems


def suite_make_gold(*, suite: Suite, backend: str, runs: int = 2, progress: Progress = print) -> None:
    """Run every experiment of `suite` `runs` times in the sandbox and store the results as gold.

    Nothing is stored unless every experiment ran and its runs agreed within a hundredth of the
    tolerance; a native suite also gets its `gold.json` files rewritten.
    """
    if runs < 2:
        raise GoldError("make_gold needs at least two runs to measure noise")
    results: dict[int, tuple[dict, float]] = {}
    environments: dict[str, dict] = {}
    failures = []
    with tempfile.TemporaryDirectory(prefix="make-gold-") as scratch:
        for paper in suite.papers.exclude(code_dir="").order_by("paper_id"):
            workspace, sandbox = _paper_sandbox(paper, Path(scratch), backend)
            with sandbox:
                environments[paper.paper_id] = _sandbox_versions(sandbox, backend)
                for experiment in paper.experiments.order_by("exp_id"):
                    outcomes = [run_experiment(sandbox, experiment_spec(experiment)) for _ in range(runs)]
                    where = f"{paper.paper_id} experiment {experiment.exp_id}"
                    broken = [outcome for outcome in outcomes if outcome.error]
                    if broken:
                        failures.append(f"{where}: {broken[0].error}\n{broken[0].output[-2000:]}")
                        continue
                    spread = 0.0
                    for later in outcomes[1:]:
                        run_spread, problems = _runs_disagreement(outcomes[0].result, later.result, *_tolerance(experiment))
                        spread = max(spread, run_spread)
                        failures.extend(f"{where}: {problem}" for problem in problems)
                    results[experiment.pk] = (outcomes[0].result, spread)
                    seconds = max(outcome.duration for outcome in outcomes)
                    progress(f"{where}: {json.dumps(outcomes[0].result)} (spread {spread:.2g}, {seconds:.1f} s)")
    if failures:
        raise GoldError("gold results were not stored:\n" + "\n".join(failures))
    _store_gold(suite, results, environments)


def _sandbox_versions(sandbox, backend: str) -> dict:
    """Where the gold numbers were made, so a later drift can be traced to an interpreter or numpy change."""
    probe = sandbox.execute(
        'python3 -c "import json, platform; import numpy; '
        'print(json.dumps({\'python\': platform.python_version(), \'numpy\': numpy.__version__}))"',
        timeout=60,
    )
    return {"sandbox": backend, **(printed_result(probe.output) or {"python": "unknown", "numpy": "unknown"})}


@transaction.atomic
def _store_gold(suite: Suite, results: dict[int, tuple[dict, float]], environments: dict[str, dict]) -> None:
    experiments = Experiment.objects.filter(pk__in=results).select_related("paper")
    by_paper: dict[Paper, dict] = {}
    for experiment in experiments:
        experiment.gold_result, experiment.gold_spread = results[experiment.pk]
        experiment.save(update_fields=["gold_result", "gold_spread"])
        by_paper.setdefault(experiment.paper, {})[experiment.exp_id] = experiment
    if suite.source_format != Suite.NATIVE:
        return
    for paper, stored in by_paper.items():
        document = {
            "generated_by": "python manage.py make_gold",
            **environments[paper.paper_id],
            "results": {str(i): stored[i].gold_result for i in sorted(stored)},
            "spread": {str(i): stored[i].gold_spread for i in sorted(stored)},
        }
        (Path(paper.code_dir).parent / "gold.json").write_text(json.dumps(document, indent=2) + "\n")


@dataclass
class FunctionCheck:
    label: str
    experiments: list[int]
    mask_breaks: bool
    mutants_tried: int = 0
    mutants_caught: int = 0
    survivors: list[str] = field(default_factory=list)


@dataclass
class ValidationReport:
    gold_failures: list[str] = field(default_factory=list)
    functions: list[FunctionCheck] = field(default_factory=list)

    @property
    def mutants_tried(self) -> int:
        return sum(check.mutants_tried for check in self.functions)

    @property
    def mutants_caught(self) -> int:
        return sum(check.mutants_caught for check in self.functions)

    @property
    def catch_rate(self) -> float:
        return self.mutants_caught / self.mutants_tried if self.mutants_tried else 1.0

    def passed(self, *, min_catch_rate: float) -> bool:
        return (
            not self.gold_failures
            and all(check.mask_breaks for check in self.functions)
            and self.catch_rate >= min_catch_rate
        )

    def table(self) -> str:
        header = f"{'function':<55} {'experiments':<14} {'mask breaks':<12} mutants caught"
        rows = [header, "-" * len(header)]
        for check in self.functions:
            experiments = ",".join(map(str, check.experiments)) or "none"
            rows.append(
                f"{check.label:<55} {experiments:<14} {'yes' if check.mask_breaks else 'NO':<12} "
                f"{check.mutants_caught}/{check.mutants_tried}"
            )
        rows.append("-" * len(header))
        rows.append(f"mutants caught: {self.mutants_caught}/{self.mutants_tried} ({self.catch_rate:.1%})")
        rows.extend(f"GOLD FAILS: {failure}" for failure in self.gold_failures)
        return "\n".join(rows)


def _fails(outcome: ExperimentOutcome, experiment: Experiment) -> bool:
    if outcome.error:
        return True
    rtol, atol = _tolerance(experiment)
    return not score_experiment(gold=experiment.gold_result, predicted=outcome.result, rtol=rtol, atol=atol).passed


def suite_validate(
    *, suite: Suite, backend: str, mutants_per_function: int = 6, seed: int = 0, progress: Progress = print
) -> ValidationReport:
    """Check that the gold code passes, that every mask breaks something and that mutants are caught."""
    report = ValidationReport()
    with tempfile.TemporaryDirectory(prefix="validate-suite-") as scratch:
        for paper in suite.papers.exclude(code_dir="").order_by("paper_id"):
            workspace, sandbox = _paper_sandbox(paper, Path(scratch), backend)
            with sandbox:
                experiments = {e.exp_id: e for e in paper.experiments.order_by("exp_id")}
                for experiment in experiments.values():
                    if experiment.gold_result is None:
                        report.gold_failures.append(f"{paper.paper_id} experiment {experiment.exp_id}: no gold result")
                    elif _fails(outcome := run_experiment(sandbox, experiment_spec(experiment)), experiment):
                        reason = outcome.error or "numbers differ from gold"
                        report.gold_failures.append(f"{paper.paper_id} experiment {experiment.exp_id}: {reason}")
                for function in paper.functions.order_by("func_id").prefetch_related("experiments"):
                    check = _check_function(sandbox, workspace, function, seed, mutants_per_function)
                    report.functions.append(check)
                    progress(
                        f"{check.label}: mask breaks={'yes' if check.mask_breaks else 'NO'}, "
                        f"mutants caught {check.mutants_caught}/{check.mutants_tried}"
                    )
    return report


def _check_function(sandbox, workspace: Path, function, seed: int, limit: int) -> FunctionCheck:
    dependents = [e for e in function.experiments.order_by("exp_id") if e.gold_result is not None]
    path = workspace / CODE_DIR / function.file
    gold_source = path.read_text(encoding="utf-8")

    def breaks_something(source: str) -> bool:
        path.write_text(source, encoding="utf-8", newline="")
        try:
            return any(_fails(run_experiment(sandbox, experiment_spec(e)), e) for e in dependents)
        finally:
            path.write_text(gold_source, encoding="utf-8", newline="")

    target = MaskTarget(name=function.name, description=function.description, line_hint=function.line_hint)
    check = FunctionCheck(
        label=f"{function.paper.paper_id}#{function.func_id} {function.name}",
        experiments=[e.exp_id for e in dependents],
        mask_breaks=bool(dependents) and breaks_something(mask_source(gold_source, [target]).text),
    )
    for mutant in function_mutants(gold_source, function.name, line_hint=function.line_hint, seed=seed, limit=limit):
        check.mutants_tried += 1
        if breaks_something(mutant.source):
            check.mutants_caught += 1
        else:
            check.survivors.append(mutant.description)
    return check
