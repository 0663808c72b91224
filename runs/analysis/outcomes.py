"""Why an attempt passed or failed: its outcome, one word the analyses group attempts by.

A done attempt's outcome refines its failure label (runs.evaluation.verdicts.failure_label) with
what re-execution found: edits outside the task that were dropped, and code that could not run or
crashed or timed out when the harness ran it. Every verdict write stores it next to the
tolerance ratio (runs.evaluation.verdicts.with_tolerance_ratio); migration 0010 backfilled the
attempts scored before. An attempt that ended in error (no valid result) shows its failure label
instead (`shown_outcome_expression`).
"""
from __future__ import annotations

from typing import Any

from django.db.models import Case, CharField, F, Value, When

from runs.models import Attempt

# The failure labels that say the attempt's result is not the model's (whatever re-execution found).
_NOT_THE_MODELS = (Attempt.MODEL_PROVIDER, Attempt.NOT_PREPARED, Attempt.INFRASTRUCTURE)
# The failure labels that say the agent gave no usable answer.
_NO_USABLE_ANSWER = (Attempt.BUDGET_EXHAUSTED, Attempt.NO_ANSWER, Attempt.UNPARSEABLE_ANSWER)

OUTCOME_LABELS: dict[str, str] = dict(Attempt.Outcome.choices)

# The fields `attempt_outcome` reads, for callers that load or pass them.
OUTCOME_FIELDS = (
    "status", "failure_label", "passed", "reported_passed", "reexecution_passed", "reexecution_error",
    "reexecution_score", "out_of_scope_edits", "held_out_passed", "gold_literals",
)


def attempt_outcome(
    *, status: str, failure_label: str | None, passed: bool | None, reported_passed: bool | None,
    reexecution_passed: bool | None, reexecution_error: str | None, reexecution_score: Any,
    out_of_scope_edits: Any, held_out_passed: bool | None = None, gold_literals: Any = None,
) -> str:
    """The outcome of an attempt ("" unless it is done).

    The verdict is the leaderboard's (leaderboard.rules.passes_q): `passed` once re-executed,
    the reported verdict until then. A failed attempt's outcome is, first match wins: a provider or
    infrastructure failure label; a final patch over the limits, which the harness refused to
    re-execute (`patch_refused_as_too_large`); the budget ran out, no answer, an unparseable answer; a
    hard-coded gold number in the implementation; the public experiments passed but the held-out
    check did not; edits outside the task dropped by re-execution (the code that ran was not the agent's whole
    change); re-execution failed (the patch did not apply, or an experiment crashed, timed out or
    printed no result); else a wrong answer. Re-execution counts only once it gave a verdict: an
    infrastructure failure of the re-execution leaves its reason in `reexecution_error` without
    one, and is nothing the code did.
    """
    if status != Attempt.DONE:
        return ""
    reexecuted = reexecution_passed is not None
    verdict = bool(passed) if reexecuted else bool(reported_passed)
    if verdict:
        return Attempt.PASSED
    label = failure_label or ""
    if label in _NOT_THE_MODELS:
        return label
    # Before what the answer was: the harness refused to run code this large, so whatever was
    # answered, nothing of the code was checked (and a right answer is no excuse).
    if reexecuted and patch_refused_as_too_large(reexecution_score):
        return Attempt.PATCH_TOO_LARGE
    if label in _NO_USABLE_ANSWER:
        return label
    if reexecuted and isinstance(gold_literals, list) and gold_literals:
        return Attempt.GOLD_LITERAL
    if reexecuted and held_out_passed is False:
        return Attempt.HELD_OUT_FAILED
    if reexecuted and isinstance(out_of_scope_edits, list) and out_of_scope_edits:
        return Attempt.OUT_OF_SCOPE
    if reexecuted and (bool((reexecution_error or "").strip()) or reexecution_crashed(reexecution_score)):
        return Attempt.REEXECUTION_FAILED
    return Attempt.WRONG_ANSWER


# The key of a re-execution score (runs.evaluation.verdicts.patch_refused_reexecution) that says
# the harness refused the final patch as over the limits and ran nothing: written by the harness
# alone, never from an agent's or an uploader's text.
REFUSED_KEY = "refused"


def patch_refused_as_too_large(score: Any) -> bool:
    """Whether a stored re-execution score says the final patch was over the limits, not run."""
    return isinstance(score, dict) and score.get(REFUSED_KEY) == Attempt.PATCH_TOO_LARGE


def reexecution_crashed(score: Any) -> bool:
    """Whether a stored re-execution score (runs.benchmark.scoring.SampleScore.to_dict) says the
    code gave no result: re-execution scores only what the experiments printed on a clean exit
    (runs.benchmark.execution), so an experiment that crashed, timed out or printed nothing is
    scored "no result for this experiment"; a patch that was refused scores with an error for the
    sample. Numbers that are merely wrong carry no error."""
    if not isinstance(score, dict):
        return False
    if score.get("error"):
        return True
    experiments = score.get("experiments")
    return isinstance(experiments, list) and any(isinstance(item, dict) and item.get("error") for item in experiments)


def outcome_from(values: dict, attempt: Any = None) -> str:
    """`attempt_outcome` of `values` (fields about to be written), reading the fields it does not
    hold from `attempt` (None: absent)."""
    return attempt_outcome(**{name: values[name] if name in values else getattr(attempt, name, None) for name in OUTCOME_FIELDS})


def shown_outcome_expression() -> Case:
    """The outcome to show for an attempt, as an ORM expression: a done attempt's outcome, an
    errored attempt's failure label (infrastructure, model_provider, not_prepared), "" otherwise."""
    return Case(
        When(status=Attempt.ERROR, then=F("failure_label")),
        When(status=Attempt.DONE, then=F("outcome")),
        default=Value(""),
        output_field=CharField(),
    )
