"""Writes of the leaderboard: verifier selections."""
from __future__ import annotations

import logging
from dataclasses import dataclass

from django.db import transaction

from leaderboard.models import VerifierSelection
from leaderboard.rules import attempt_verdict
from runs.agents.llm import model_from_name
from runs.agents.verifier import Candidate, VerifierChoice, select_oracle, select_with_model
from runs.benchmark.workspace import WorkspaceError, task_document
from runs.models import Attempt, Run, Sample
from runs.signals import results_changed_send
from runs.suites.selectors import workspace_spec

logger = logging.getLogger(__name__)

ORACLE = VerifierSelection.ORACLE


@dataclass
class SelectionReport:
    """What run_select_with_verifier did: samples it chose for, already had, and could not choose for."""

    selected: int = 0
    existing: int = 0
    single: int = 0  # fewer than two done attempts: nothing to choose between
    cost: float | None = 0.0
    fallbacks: int = 0


def _task(sample: Sample, context: str) -> tuple[dict, str | None]:
    """The task.json content and the paper.md text of the sample's workspace under `context`: what
    the agents were given, from the same builder. Raises WorkspaceError when the paper's gold code
    is not on this server (the task's lines are those of the masked code)."""
    if not sample.paper.code_dir:
        raise WorkspaceError(
            f"paper {sample.paper.paper_id} has no gold code on this server, so the task the agents of sample "
            f"{sample.sample_id} were given cannot be rebuilt for the verifier"
        )
    document = task_document(workspace_spec(sample=sample, context=context))
    return document.task, document.context_text


def _candidate(attempt: Attempt) -> Candidate:
    answer = attempt.parsed_answer if attempt.parsed_answer is not None else attempt.final_answer_raw
    outputs = {"re-execution": attempt.reexecution_output} if attempt.reexecution_output else None
    return Candidate(patch=attempt.final_patch or None, answer=answer, outputs=outputs)


def run_select_with_verifier(*, run: Run, verifier: str, replace: bool = False) -> SelectionReport:
    """For each sample where `run` has two or more done attempts, let `verifier` pick one and store it.

    `verifier` is "oracle" (a passing attempt when there is one, by the leaderboard's verdict) or a
    model spec (`provider:model`, see runs.agents.llm) used as the paper's model-as-verifier.
    Samples that already have a selection by this verifier are kept unless `replace`. Each
    selection is saved as soon as it is made, so a model failure (ModelError, raised) loses none
    of the earlier ones. Raises ValueError for a malformed model spec, and WorkspaceError when a
    model verifier cannot rebuild a sample's task (its paper's gold code is not on this server).
    """
    verifier = verifier.strip()
    model = None if verifier == ORACLE else model_from_name(verifier)
    report = SelectionReport()
    existing = set(
        VerifierSelection.objects.filter(run=run, verifier=verifier).values_list("sample_id", flat=True)
    )
    for sample_pk, candidates in _done_attempts_by_sample(run).items():
        if len(candidates) < 2:
            report.single += 1
            continue
        if sample_pk in existing and not replace:
            report.existing += 1
            continue
        choice = _choose(run=run, candidates=candidates, model=model)
        _selection_save(run=run, verifier=verifier, candidates=candidates, choice=choice)
        report.selected += 1
        report.fallbacks += int(choice.fallback)
        if report.cost is not None:
            report.cost = None if choice.cost is None else report.cost + choice.cost
    if report.selected:
        results_changed_send(run_ids=[run.pk])
    logger.info("verifier %s on run %s: %s", verifier, run.pk, report)
    return report


def _done_attempts_by_sample(run: Run) -> dict[int, list[Attempt]]:
    """The run's done attempts by sample (pk), each sample's in index order."""
    attempts = (
        Attempt.objects.filter(run=run, status=Attempt.DONE)
        .select_related("sample__paper")
        .defer("trajectory")
        .order_by("sample_id", "index")
    )
    by_sample: dict[int, list[Attempt]] = {}
    for attempt in attempts:
        by_sample.setdefault(attempt.sample_id, []).append(attempt)
    return by_sample


def _choose(*, run: Run, candidates: list[Attempt], model) -> VerifierChoice:
    """One sample's choice among `candidates`: by the oracle (`model` None) or by `model`."""
    if model is None:
        # A re-executed pass first: the default leaderboard counts no other (an upload's reported
        # pass is chosen only where no attempt passed re-executed, for the view that shows them).
        reexecuted = [a.reexecution_passed is not None and bool(a.passed) for a in candidates]
        passed = reexecuted if any(reexecuted) else [attempt_verdict(a) for a in candidates]
        return select_oracle(candidates=[_candidate(a) for a in candidates], passed=passed)
    task, paper = _task(candidates[0].sample, run.context)
    return select_with_model(model=model, task=task, candidates=[_candidate(a) for a in candidates], paper=paper)


def _selection_save(*, run: Run, verifier: str, candidates: list[Attempt], choice: VerifierChoice) -> None:
    with transaction.atomic():
        VerifierSelection.objects.update_or_create(
            run=run,
            sample=candidates[0].sample,
            verifier=verifier,
            defaults={
                "attempt": candidates[choice.index],
                "candidates": len(candidates),
                "reasoning": choice.reasoning,
                "fallback": choice.fallback,
                "input_tokens": choice.usage.input_tokens,
                "output_tokens": choice.usage.output_tokens,
                "cost": choice.cost,
            },
        )
