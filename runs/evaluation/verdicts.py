"""What an attempt's work is worth: failure labels, scoring against gold, and re-execution.

Scoring turns a sample's experiments into what runs.benchmark.scoring needs (`scoring_specs`),
applies the suite's policy for unstable gold (`score_answer`) and turns the result into stored JSON
(`score_dict`); `with_tolerance_ratio` adds what the tolerance curves and the failure analysis read; `failure_label` says
why an attempt that did not pass failed. `reexecute` is the harness's own verdict on a final patch,
shared by a run's attempts and a submission's: the patch is applied to a fresh masked workspace keeping only what the task allows
(runs.benchmark.patches, runs.benchmark.scope), every experiment runs in a fresh sandbox
(runs.benchmark.execution) and what they print is scored. Code that passes them then runs the
hidden variants of its experiments (held-out checks, runs.models.HeldOutCheck), whose gold never
leaves the server; a pass needs them all. A broken workspace or sandbox raises
InfrastructureFailure; whatever the code does is the verdict."""

from __future__ import annotations

import dataclasses
import itertools
import json
import os
import time
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from django.conf import settings

from runs.agents.base import ExitStatus
from runs.analysis.outcomes import REFUSED_KEY, outcome_from
from runs.benchmark.execution import ExperimentOutcome, run_experiment
from runs.benchmark.gold_literals import Implementation, enclosing_definition, gold_literals_in, gold_numbers_of
from runs.benchmark.patch_parsing import parse_patch
from runs.benchmark.patches import PatchError, apply_file_patch
from runs.benchmark.scope import OutOfScopeEdit, ScopedCode, restrict_to_scope
from runs.benchmark.scoring import SampleScore, score_experiment, score_sample
from runs.benchmark.text import json_safe, storable_text
from runs.benchmark.tolerance_ratios import attempt_tolerance_ratio
from runs.benchmark.workspace import CODE_DIR, WorkspaceError, experiment_label
from runs.evaluation.claims import InfrastructureFailure
from runs.evaluation.workdirs import remove_tree
from runs.limits import patch_problem, trajectory_limits
from runs.models import Attempt, Experiment, HeldOutCheck, Sample, Suite
from runs.suites.environments import NotPrepared, paper_sandbox
from runs.suites.gold import scoring_tolerances
from runs.suites.selectors import SampleTask, experiment_spec, held_out_spec, sample_held_out_checks, sample_task
from runs.suites.services import workspace_build
from sandbox import Backend, Sandbox, SandboxError, fs

LIMIT_EXITS = (ExitStatus.STEP_LIMIT, ExitStatus.TIME_LIMIT, ExitStatus.COST_LIMIT)
INFRASTRUCTURE_EXITS = (ExitStatus.SANDBOX_ERROR, ExitStatus.HARNESS_ERROR)


# What the re-execution keeps of each experiment's output, and of all of them together.
MAX_OUTPUT_PER_EXPERIMENT = 4_000


MAX_REEXECUTION_OUTPUT = 20_000
# Entries read per directory when listing the workspace's own modules.
MAX_WORKSPACE_MODULES = 10_000


def failure_label(
    *, exit_status: str, final_answer_raw: str | None, answer_parsed: bool, passed: bool
) -> Attempt.FailureLabel | Literal[""]:
    """The failure label of a scored attempt ("" when it passed).

    Provider and infrastructure failures come first: whatever the agent managed before them is not
    its result. A limit reached without an answer is the budget's doing, no answer otherwise is
    the agent's, an answer that cannot be read is unparseable, and anything else that did not
    pass (including reported numbers the re-executed code does not produce) is a wrong answer.
    """
    if passed:
        return ""
    if exit_status == ExitStatus.MODEL_ERROR:
        return Attempt.FailureLabel.MODEL_PROVIDER
    if exit_status in INFRASTRUCTURE_EXITS:
        return Attempt.FailureLabel.INFRASTRUCTURE
    if final_answer_raw is None or not final_answer_raw.strip():
        return Attempt.FailureLabel.BUDGET_EXHAUSTED if exit_status in LIMIT_EXITS else Attempt.FailureLabel.NO_ANSWER
    if not answer_parsed:
        return Attempt.FailureLabel.UNPARSEABLE_ANSWER
    return Attempt.FailureLabel.WRONG_ANSWER


def scoring_specs(experiments: list[Experiment]) -> list[tuple]:
    """What score_sample needs, keyed by the labels the workspace gives the experiments.

    The noisy numbers of an experiment whose gold is unstable (make_gold) get their tolerance
    widened to cover every value their gold runs printed (runs.suites.gold.scoring_tolerances),
    whatever the suite's policy: under "exclude" the experiment is then left out by `score_answer`,
    and scored so only when the sample has nothing else. Each score records the tolerance it was
    judged with.
    """
    return [
        (experiment_label(number), experiment.gold_result, *scoring_tolerances(experiment))
        for number, experiment in enumerate(experiments, start=1)
    ]


def excluded_labels(experiments: list[Experiment]) -> set[str]:
    """The labels of the experiments the suite's "exclude" policy leaves out of scoring: the
    unstable ones, unless that is every experiment of the sample (a sample nobody can pass must not
    count, so it falls back to widening their tolerance). `experiments` come with paper__suite
    loaded (runs.suites.selectors.sample_experiments)."""
    excluded = {
        experiment_label(number)
        for number, experiment in enumerate(experiments, start=1)
        if experiment.gold_unstable and experiment.paper.suite.unstable_policy == Suite.UnstablePolicy.EXCLUDE
    }
    return excluded if len(excluded) < len(experiments) else set()


def score_answer(*, experiments: list[Experiment], answer) -> SampleScore:
    """score_sample over a sample's experiments with the suite's policy for unstable gold applied.

    Excluded experiments are scored with the others and then dropped from the verdict, rather than
    left out of score_sample: the answer keys them by their position among all the sample's
    experiments ("Experiment 3"), which leaving one out would shift.
    """
    score = score_sample(experiments=scoring_specs(experiments), answer=answer)
    excluded = excluded_labels(experiments)
    if excluded:
        score.experiments = [item for item in score.experiments if item.experiment_id not in excluded]
        score.passed = bool(score.experiments) and all(item.passed for item in score.experiments)
    return score


def score_dict(score: SampleScore, experiments: list[Experiment]) -> dict:
    """SampleScore.to_dict with each experiment's database id next to its label."""
    data = score.to_dict()
    ids = {experiment_label(number): e.exp_id for number, e in enumerate(experiments, start=1)}
    for item in data["experiments"]:
        item["exp_id"] = ids.get(item["experiment_id"])
    return json_safe(data)


_VERDICT_FIELDS = ("status", "reported_score", "reported_passed", "reexecution_score", "reexecution_passed", "passed")


def with_tolerance_ratio(fields: dict, attempt: Attempt | None = None) -> dict:
    """`fields`, an attempt's verdict fields about to be written, with the `tolerance_ratio` and
    the `outcome` they imply (runs.benchmark.tolerance_ratios.attempt_tolerance_ratio,
    runs.analysis.outcomes.attempt_outcome); a field that is not being written is read from
    `attempt`. Every write of a verdict goes through here, so neither ever goes stale."""
    values = {name: fields[name] if name in fields else getattr(attempt, name, None) for name in _VERDICT_FIELDS}
    status = values.pop("status")
    return {
        **fields,
        "tolerance_ratio": attempt_tolerance_ratio(done=status == Attempt.DONE, **values),
        "outcome": outcome_from(fields, attempt),
    }


@dataclass
class Reexecution:
    """The harness's own run of an attempt's final code.

    `passed` is the whole verdict: the public experiments (`score`), the held-out check where the
    sample has one, and no hard-coded gold number. Only the public experiments' score, output and
    errors are ever shown; `held_out_scores` is for staff."""

    score: dict | None
    passed: bool
    error: str = ""
    output: str = ""
    experiment_seconds: float = 0.0
    timings: dict = field(default_factory=dict)
    # What the harness left out of the final patch as outside the task (runs.benchmark.scope), as JSON.
    out_of_scope_edits: list = field(default_factory=list)
    applied: bool = True  # False: the code was refused (a patch that does not apply), nothing ran
    too_large: bool = False  # the final patch was over the limits: refused before anything was read of it
    gpu_seconds: float = 0.0  # GPU-seconds its sandbox held (seconds x GPUs leased)
    outcomes: list[ExperimentOutcome] = field(default_factory=list)  # each experiment's run, unbounded (not stored)
    # None: the sample has no hidden variants, or its public experiments failed (then none run).
    held_out_passed: bool | None = None
    held_out_scores: dict | None = None
    gold_literals: list = field(default_factory=list)

    def stored_fields(self) -> dict:
        """The attempt's fields this verdict writes (both callers: a run's attempts, uploads)."""
        return {
            "reexecution_score": self.score,
            "reexecution_passed": self.passed,
            "reexecution_error": storable_text(self.error or ""),
            "reexecution_output": storable_text(self.output or ""),
            "out_of_scope_edits": self.out_of_scope_edits,
            "held_out_passed": self.held_out_passed,
            "held_out_scores": self.held_out_scores,
            "gold_literals": self.gold_literals,
            "gpu_seconds": self.gpu_seconds,
        }

    def failure_detail(self, *, reported_passed: bool) -> str:
        """Why reported numbers that pass did not make a pass (or why the code was not run at all),
        in the harness's words (nothing of the held-out check's numbers or commands)."""
        if self.too_large:
            return self.error
        if not reported_passed or self.passed:
            return ""
        if self.gold_literals:
            return "the implementation hard-codes a gold number"
        if self.held_out_passed is False:
            return "the public experiments pass but the held-out check does not"
        return "reported numbers pass but the re-executed code does not produce them"


@dataclass(frozen=True)
class ScopedFinalCode:
    """What `final_code_scope` wrote into a workspace: the scoped code, and the masked files and
    their masked functions' names (workspace paths) it was scoped against."""

    scoped: ScopedCode
    masked: dict[str, str]
    functions: dict[str, list[str]]


def scoped_final_code(*, patch: str, workspace: Path) -> tuple[str | None, list[OutOfScopeEdit]]:
    """Apply a final patch (paths a/code/..., b/code/...) to a fresh masked workspace, keeping
    only what the task allows: the masked functions' new bodies, plus new imports and new
    definitions in the files that hold them (runs.benchmark.scope). Every other change is left out and
    returned as an out-of-scope edit. Returns (why the patch is refused or does not apply, or
    None; the out-of-scope edits).

    The patch is applied in memory (runs.benchmark.patches, one parser for agents' and uploaders' patches)
    and only the scoped files are written, through sandbox.fs: nothing of the patch can reach a
    path outside them, a link, or anything but text.
    """
    error, written = final_code_scope(patch=patch, workspace=workspace)
    return error, [] if written is None else written.scoped.out_of_scope


def final_code_scope(*, patch: str, workspace: Path) -> tuple[str | None, ScopedFinalCode | None]:
    """`scoped_final_code`, returning what was scoped against as well as the scoped code."""
    task = json.loads((workspace / "task.json").read_text(encoding="utf-8"))
    functions: dict[str, list[str]] = {}
    for function in task["missing_functions"]:
        functions.setdefault(function["file"], []).append(function["name"])
    masked = {path: _workspace_text(workspace, path) for path in functions}
    masked = {path: text for path, text in masked.items() if text is not None}
    error, scoped = scoped_code(
        patch=patch,
        masked=masked,
        functions=functions,
        read_other=lambda path: _workspace_text(workspace, path),
        workspace_modules=code_modules(code_dir=workspace / CODE_DIR, files=[path.split("/", 1)[-1] for path in functions]),
    )
    if error:
        return error, None
    for path, text in scoped.files.items():
        fs.write_bytes(workspace, path, text.encode("utf-8", "surrogateescape"))
    return None, ScopedFinalCode(scoped=scoped, masked=masked, functions=functions)


def hard_coded_gold(*, written: ScopedFinalCode, experiments: list[Experiment], paper_text: str = "") -> list[dict]:
    """The numeric literals of the agent's code that re-execution runs (the masked bodies and every
    addition kept beside them) that lie within tolerance of one of the sample's gold numbers, each
    judged with the tolerance its number is scored with (runs.benchmark.gold_literals): what a
    sample without hidden variants has in place of a held-out check. Numbers the masked file or the
    paper already holds are not the agent's."""
    gold = [
        number
        for experiment in experiments
        if experiment.gold_result is not None
        for number in gold_numbers_of(
            gold_result=experiment.gold_result, **dict(zip(("rtol", "atol", "number_tolerances"), scoring_tolerances(experiment)))
        )
    ]
    # Whole files: a masked body may return a constant the agent defined beside it.
    files = [
        Implementation(path=path, function="", body=text, stub=f"{written.masked.get(path, '')}\n{paper_text}")
        for path, text in written.scoped.files.items()
        if path in written.functions
    ]
    return [
        {**found.as_dict(), "function": enclosing_definition(written.scoped.files[found.path], found.line)}
        for found in gold_literals_in(implementations=files, gold=gold)
    ]


def code_modules(*, code_dir: Path, files: list[str]) -> set[str]:
    """The module names a paper's own code gives: `.py` files and directories in `code_dir` and in
    the directories of `files` (relative to it; scripts run from there), whose new imports the
    scope rule refuses. `code_dir` is the harness's (a fresh workspace's code/, or the gold code)."""
    names: set[str] = set()
    for directory in {"", *(file.rsplit("/", 1)[0] for file in files if "/" in file)}:
        try:
            with os.scandir(code_dir / directory) as entries:
                for entry in itertools.islice(entries, MAX_WORKSPACE_MODULES):
                    name = entry.name[: -len(".py")] if entry.name.endswith(".py") else entry.name
                    if name.isidentifier() and (entry.is_dir(follow_symlinks=False) or entry.name.endswith(".py")):
                        names.add(name)
        except OSError:
            continue  # the harness built the workspace; a directory it lacks has no modules
    return names


def scoped_code(
    *, patch: str, masked: dict[str, str], functions: dict[str, list[str]], read_other: Callable[[str], str | None] | None,
    workspace_modules: set[str] | frozenset[str] = frozenset(),
) -> tuple[str | None, ScopedCode | None]:
    """The scope rule on a final patch, in memory: `masked` holds the masked files (workspace paths
    "code/...") and `functions` their masked functions' qualified names. `read_other(path)` gives
    any other file's text (None: absent) so its sections are applied and then dropped as out of
    scope; with `read_other=None` those sections are left out unread (a caller without a workspace,
    which then cannot tell whether they apply). `workspace_modules`: the paper's own module names
    (`code_modules`), whose new imports the scope rule refuses. Returns (why the patch
    is refused or does not apply, or None; the scoped code)."""
    try:
        file_patches = parse_patch(patch)
    except PatchError as error:
        return f"the final patch is refused: {error}", None
    before: dict[str, str | None] = {}
    patched: dict[str, str | None] = {}
    for file_patch in file_patches:
        if file_patch.path in masked:
            original = masked[file_patch.path]
        elif read_other is not None:
            original = read_other(file_patch.path)
        else:
            continue
        before[file_patch.path] = original
        try:
            patched[file_patch.path] = apply_file_patch(original, file_patch)
        except PatchError as error:
            return f"the final patch does not apply to {file_patch.path}: {error}", None
    return None, restrict_to_scope(
        masked=masked, functions=functions, patched=patched, before=before, workspace_modules=workspace_modules
    )


def _workspace_text(workspace: Path, path: str) -> str | None:
    """A harness-built workspace's file as text, None when it is absent (or not a regular file)."""
    try:
        data, _ = fs.read_bytes(workspace, path, limit=64 * 2**20)
    except OSError:  # absent, a link or special file, a name too long (a patch may name anything)
        return None
    return data.decode("utf-8", "surrogateescape")


def reexecution_workspace_build(*, sample: Sample, dest: Path, context: str, task: SampleTask) -> None:
    """Build into `dest` (emptied first: a crashed try may have left it) the fresh masked workspace a
    re-execution patches. Raises InfrastructureFailure when it cannot be built."""
    remove_tree(dest)
    try:
        workspace_build(sample=sample, dest=dest, context=context, task=task)
    except (WorkspaceError, OSError) as error:
        raise InfrastructureFailure(f"re-execution workspace could not be built: {error}") from error


def patch_refused_reexecution(*, over_limits: str, experiments: list[Experiment]) -> Reexecution:
    """The verdict on a final patch over the limits (SUBMISSION_MAX_PATCH_BYTES / _LINES): nothing
    of it is applied or run, and it fails, its score marked so that its outcome is patch_too_large
    (runs.analysis.outcomes.patch_refused_as_too_large)."""
    error = f"the final patch is not re-executed: it {over_limits}"
    data = score_dict(score_answer(experiments=experiments, answer={}), experiments)
    data["error"], data[REFUSED_KEY] = error, Attempt.PATCH_TOO_LARGE
    return Reexecution(score=data, passed=False, error=error, applied=False, too_large=True)


def reexecute(
    *, sample: Sample, patch: str, context: str, backend: str, dest: Path, name: str, task: SampleTask | None = None,
    adjust: Callable[[Path], None] | None = None, built: Future | None = None, held_out: bool = True,
    literals: bool = True, over_limits: str | None = None,
) -> Reexecution:
    """Apply `patch` to a fresh masked workspace of `sample`, run its experiments in a fresh sandbox
    and score what they print (`task`: the sample as read already, runs.suites.selectors.sample_task;
    `built`: `reexecution_workspace_build` into `dest` started already, whose end is awaited).
    With `held_out`, when the experiments pass, their hidden variants run next in the same sandbox
    and the verdict needs them too (`held_out_check`); with `literals`, a sample with an experiment
    that has no variant fails instead when its code holds a gold number (`hard_coded_gold`).
    `adjust(workspace)` changes the scoped code before it runs (a transplant puts gold bodies back,
    runs.evaluation.transplants); a ValueError it raises refuses the code like a patch that does not apply.
    Raises InfrastructureFailure when the workspace or sandbox breaks; what the code does (crash,
    timeout, wrong numbers, a patch that does not apply) is the verdict. A patch over the final
    patch limits (`over_limits`: why the agent's was cut when it was recorded; else checked here,
    for a stored upload and limits lowered since) is refused unread: failed, nothing run."""
    timings: dict[str, float] = {}
    task = task or sample_task(sample=sample, context=context)
    experiments = task.experiments
    over_limits = over_limits or patch_problem(patch, trajectory_limits())
    if over_limits:
        return patch_refused_reexecution(over_limits=over_limits, experiments=experiments)
    variants = sample_held_out_checks(experiments=experiments) if held_out else []
    started = time.monotonic()
    if built is not None:
        built.result()  # raises what the build raised
    else:
        reexecution_workspace_build(sample=sample, dest=dest, context=context, task=task)
    timings["workspace"] = time.monotonic() - started  # what the re-execution waited for it

    started = time.monotonic()
    code = _final_code_in_workspace(patch=patch, dest=dest, task=task, variants=variants, literals=literals, adjust=adjust)
    timings["patch"] = time.monotonic() - started
    if code.error:
        score = score_answer(experiments=experiments, answer={})
        return Reexecution(score=score_dict(score, experiments), passed=False, error=code.error, timings=timings, applied=False)

    ran = _experiments_run(sample=sample, backend=backend, dest=dest, name=name, experiments=experiments,
                           variants=variants, timings=timings)
    return _reexecution_verdict(ran=ran, code=code, experiments=experiments, timings=timings)


@dataclass(frozen=True)
class _FinalCode:
    """What `_final_code_in_workspace` made of a final patch."""

    error: str | None  # why the code is refused (nothing runs), or None
    out_of_scope_edits: list  # as JSON
    gold_literals: list  # the gold numbers hard-coded in it (`hard_coded_gold`), as JSON


def _final_code_in_workspace(
    *, patch: str, dest: Path, task: SampleTask, variants: list[HeldOutCheck], literals: bool,
    adjust: Callable[[Path], None] | None,
) -> _FinalCode:
    """`reexecute`'s scoped final code written into the workspace `dest`, looked at for hard-coded
    gold numbers, then changed by `adjust` (a ValueError it raises refuses the code)."""
    experiments = task.experiments
    error, written = final_code_scope(patch=patch, workspace=dest)
    out_of_scope_edits = json_safe([dataclasses.asdict(edit) for edit in written.scoped.out_of_scope]) if written else []
    # A sample without hidden variants gets the next best check: no gold number written into the code.
    # (Every experiment needs a variant for that: one without could be hard-coded freely.)
    unchecked = {experiment.pk for experiment in experiments} - {variant.experiment_id for variant in variants}
    gold_literals = (
        hard_coded_gold(written=written, experiments=experiments, paper_text=task.spec.paper_text)
        if literals and written and unchecked else []
    )
    if not error and adjust is not None:
        try:
            adjust(dest)
        except ValueError as refused:
            error = str(refused)
    return _FinalCode(error=error, out_of_scope_edits=out_of_scope_edits, gold_literals=gold_literals)


@dataclass(frozen=True)
class _ExperimentsRun:
    """What `_experiments_run` ran in the re-execution's sandbox, and how it scored."""

    outcomes: list[ExperimentOutcome]
    score: SampleScore
    held_out_passed: bool | None
    held_out_scores: dict | None
    gpu_seconds: float


def _experiments_run(
    *, sample: Sample, backend: str, dest: Path, name: str, experiments: list[Experiment],
    variants: list[HeldOutCheck], timings: dict[str, float],
) -> _ExperimentsRun:
    """`reexecute`'s experiments run in a fresh sandbox over `dest` and scored, then, when they pass,
    the held-out `variants` in the same sandbox; the sandbox is closed whatever happens. Adds each
    stage's seconds to `timings`."""
    held_out_passed = held_out_scores = None
    started = time.monotonic()
    sandbox = _reexecution_sandbox(sample=sample, backend=backend, dest=dest, name=name)
    timings["sandbox_open"] = time.monotonic() - started
    try:
        outcomes = [run_experiment(sandbox, experiment_spec(experiment)) for experiment in experiments]
        timings["experiments"] = sum(outcome.duration for outcome in outcomes)
        started = time.monotonic()
        score = score_answer(experiments=experiments, answer={
            experiment_label(number): outcome.result
            for number, outcome in enumerate(outcomes, start=1)
            if outcome.result is not None
        })
        timings["scoring"] = time.monotonic() - started
        if variants and score.passed:
            # Only code that passes the public experiments runs the variants: a failed attempt pays nothing.
            started = time.monotonic()
            held_out_passed, held_out_scores, timings["held_out_experiments"] = held_out_check(sandbox, variants)
            timings["held_out"] = time.monotonic() - started
    except SandboxError as error:
        raise InfrastructureFailure(f"re-execution sandbox failed: {error}") from error
    finally:
        closing = time.monotonic()
        sandbox.close()
        timings["sandbox_close"] = time.monotonic() - closing
    return _ExperimentsRun(outcomes=outcomes, score=score, held_out_passed=held_out_passed,
                           held_out_scores=held_out_scores, gpu_seconds=sandbox.gpu_seconds)


def _reexecution_sandbox(*, sample: Sample, backend: str, dest: Path, name: str) -> Sandbox:
    try:
        return paper_sandbox(sample.paper, backend=backend, workspace=dest, name=name, image=sandbox_image(backend))
    except (SandboxError, NotPrepared) as error:
        # NotPrepared: an attempt's harness checked before its agent ran; a submission's re-execution
        # or a transplant is retried after the back-off, time for the operator to prepare the paper.
        raise InfrastructureFailure(f"re-execution sandbox could not be opened: {error}") from error


def _reexecution_verdict(
    *, ran: _ExperimentsRun, code: _FinalCode, experiments: list[Experiment], timings: dict[str, float]
) -> Reexecution:
    """The verdict on code that ran: its public score, the held-out check, no hard-coded gold."""
    failures = [
        f"{experiment_label(number)}: {outcome.error}" for number, outcome in enumerate(ran.outcomes, start=1) if outcome.error
    ]
    return Reexecution(
        score=score_dict(ran.score, experiments),
        passed=ran.score.passed and ran.held_out_passed is not False and not code.gold_literals,
        error="; ".join(failures),
        output=_bounded_outputs(ran.outcomes),
        # The variants' commands are experiments the harness ran too, not harness overhead.
        experiment_seconds=timings["experiments"] + timings.get("held_out_experiments", 0.0),
        timings=timings,
        out_of_scope_edits=code.out_of_scope_edits,
        outcomes=ran.outcomes,
        held_out_passed=ran.held_out_passed,
        held_out_scores=ran.held_out_scores,
        gold_literals=code.gold_literals,
        gpu_seconds=ran.gpu_seconds,
    )


def held_out_check(sandbox, variants: list[HeldOutCheck]) -> tuple[bool, dict, float]:
    """Run each hidden variant in `sandbox` and judge it as its experiment is judged (its own gold,
    the experiment's tolerances, widened where make_gold found its gold unstable; under the suite's
    "exclude" policy an unstable variant does not count unless every one is). Returns whether
    they all pass, for staff only each one's score keyed "<exp_id>.<variant_id>", and the seconds
    their commands took.

    Nothing of a variant reaches the re-execution's shown output or error text: a failing variant
    is one bit of the verdict."""
    scores: dict[str, dict] = {}
    counted: list[bool] = []
    seconds = 0.0
    excluded = [variant.gold_unstable and variant.paper.suite.unstable_policy == Suite.UnstablePolicy.EXCLUDE for variant in variants]
    if all(excluded):
        excluded = [False] * len(variants)
    for variant, left_out in zip(variants, excluded):
        outcome = run_experiment(sandbox, held_out_spec(variant))
        seconds += outcome.duration
        rtol, atol, number_tolerances = scoring_tolerances(variant)
        verdict = score_experiment(gold=variant.gold_result, predicted=outcome.result, rtol=rtol, atol=atol,
                                   number_tolerances=number_tolerances)
        scores[f"{variant.experiment.exp_id}.{variant.variant_id}"] = json_safe(
            {**verdict.to_dict(), "run_error": outcome.error, "excluded": left_out}
        )
        if not left_out:
            counted.append(verdict.passed)
    return all(counted), scores, seconds


def _bounded_outputs(outcomes: list[ExperimentOutcome]) -> str:
    parts = []
    for number, outcome in enumerate(outcomes, start=1):
        text = outcome.output
        if len(text) > MAX_OUTPUT_PER_EXPERIMENT:
            half = MAX_OUTPUT_PER_EXPERIMENT // 2
            text = f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"
        status = outcome.error or "ok"
        parts.append(f"=== {experiment_label(number)} (exit {outcome.exit_code}, {outcome.duration:.2f} s, {status}) ===\n{text}\n")
    output = "".join(parts)
    return output if len(output) <= MAX_REEXECUTION_OUTPUT else output[:MAX_REEXECUTION_OUTPUT] + "\n[... cut ...]\n"


def sandbox_image(backend: str) -> str | None:
    return settings.SANDBOX_IMAGE if backend == Backend.DOCKER else None
