"""Why a done attempt passed or failed (runs.analysis.outcomes), and that every verdict write stores it."""
import pytest

from runs.analysis.outcomes import OUTCOME_LABELS, attempt_outcome, shown_outcome_expression
from runs.evaluation.verdicts import with_tolerance_ratio
from runs.models import Attempt

CRASHED_SCORE = {"passed": False, "error": None, "experiments": [{"experiment_id": "Experiment 1", "error": "no result for this experiment"}]}
WRONG_SCORE = {"passed": False, "error": None, "experiments": [{"experiment_id": "Experiment 1", "error": None}]}
EDIT = [{"path": "code/other.py", "reason": "outside the masked functions", "diff": "+x"}]

BASE = {
    "status": Attempt.DONE, "failure_label": Attempt.WRONG_ANSWER, "passed": False, "reported_passed": False,
    "reexecution_passed": False, "reexecution_error": "", "reexecution_score": WRONG_SCORE, "out_of_scope_edits": [],
}


@pytest.mark.parametrize(("changes", "outcome"), [
    ({"passed": True, "reported_passed": True, "reexecution_passed": True, "failure_label": ""}, Attempt.PASSED),
    # Not re-executed (an upload waiting for it): the reported verdict decides.
    ({"reported_passed": True, "reexecution_passed": None, "failure_label": ""}, Attempt.PASSED),
    # Re-execution's infrastructure failure left a reason but no verdict: nothing the code did.
    ({"reexecution_passed": None, "reexecution_score": None, "reexecution_error": "re-execution could not run"}, Attempt.WRONG_ANSWER),
    ({"failure_label": Attempt.MODEL_PROVIDER, "reexecution_error": "x", "out_of_scope_edits": EDIT}, Attempt.MODEL_PROVIDER),
    ({"failure_label": Attempt.INFRASTRUCTURE, "reexecution_error": "x"}, Attempt.INFRASTRUCTURE),
    ({"failure_label": Attempt.BUDGET_EXHAUSTED, "reexecution_error": "x", "out_of_scope_edits": EDIT}, Attempt.BUDGET_EXHAUSTED),
    ({"failure_label": Attempt.NO_ANSWER, "reexecution_error": "x"}, Attempt.NO_ANSWER),
    ({"failure_label": Attempt.UNPARSEABLE_ANSWER, "reexecution_score": CRASHED_SCORE}, Attempt.UNPARSEABLE_ANSWER),
    ({"out_of_scope_edits": EDIT, "reexecution_error": "Experiment 1: exited with status 1"}, Attempt.OUT_OF_SCOPE),
    ({"reexecution_error": "Experiment 1: timed out after 60 s"}, Attempt.REEXECUTION_FAILED),
    ({"reexecution_error": "the final patch does not apply to code/a.py: hunk 1"}, Attempt.REEXECUTION_FAILED),
    # A crash recorded in the score only (written before the error was kept).
    ({"reexecution_score": CRASHED_SCORE}, Attempt.REEXECUTION_FAILED),
    # Reported numbers pass, the re-executed code crashes: the code's failure.
    ({"reported_passed": True, "reexecution_error": "Experiment 1: exited with status 1"}, Attempt.REEXECUTION_FAILED),
    # The public experiments pass; the hidden variants do not (out-of-scope edits came with it).
    ({"reported_passed": True, "held_out_passed": False, "out_of_scope_edits": EDIT}, Attempt.HELD_OUT_FAILED),
    # A gold number written into the code outranks what else went wrong with the code.
    ({"gold_literals": [{"literal": "0.8123"}], "out_of_scope_edits": EDIT, "reexecution_error": "x"}, Attempt.GOLD_LITERAL),
    ({"gold_literals": [{"literal": "0.8123"}], "failure_label": Attempt.NO_ANSWER}, Attempt.NO_ANSWER),
    ({"held_out_passed": True}, Attempt.WRONG_ANSWER),
    ({}, Attempt.WRONG_ANSWER),
    ({"status": Attempt.ERROR, "failure_label": Attempt.INFRASTRUCTURE}, ""),
    ({"status": Attempt.QUEUED}, ""),
])
def test_outcome_precedence(changes, outcome):
    assert attempt_outcome(**{**BASE, **changes}) == outcome


def test_every_outcome_has_a_label():
    assert set(OUTCOME_LABELS) == {value for value, _ in Attempt.Outcome.choices}


def test_a_verdict_write_adds_the_outcome_reading_what_it_does_not_write_from_the_attempt():
    attempt = Attempt(status=Attempt.DONE, failure_label=Attempt.WRONG_ANSWER, reported_passed=True, out_of_scope_edits=EDIT)
    fields = with_tolerance_ratio({"reexecution_passed": False, "passed": False, "reexecution_error": ""}, attempt)
    assert fields["outcome"] == Attempt.OUT_OF_SCOPE
    fields = with_tolerance_ratio({"reexecution_passed": True, "passed": True, "failure_label": ""}, attempt)
    assert fields["outcome"] == Attempt.PASSED
    assert with_tolerance_ratio({"status": Attempt.ERROR, "failure_label": Attempt.MODEL_PROVIDER})["outcome"] == ""


@pytest.mark.django_db
def test_the_shown_outcome_is_the_failure_label_of_an_errored_attempt(tiny_suite):
    from runs.evaluation.services import run_create

    run = run_create(suite=tiny_suite, agent="noop", n_values=[1], enqueue=False)
    first, second, third = run.attempts.order_by("pk")
    Attempt.objects.filter(pk=first.pk).update(status=Attempt.ERROR, failure_label=Attempt.INFRASTRUCTURE)
    Attempt.objects.filter(pk=second.pk).update(status=Attempt.DONE, failure_label=Attempt.NO_ANSWER, outcome=Attempt.NO_ANSWER)
    shown = dict(run.attempts.annotate(shown=shown_outcome_expression()).values_list("pk", "shown"))
    assert shown == {first.pk: Attempt.INFRASTRUCTURE, second.pk: Attempt.NO_ANSWER, third.pk: ""}


@pytest.mark.django_db
def test_the_backfill_migration_sets_the_outcome_of_done_attempts(tiny_suite):
    import importlib

    from django.apps import apps

    from runs.evaluation.services import run_create

    run = run_create(suite=tiny_suite, agent="noop", n_values=[1], enqueue=False)
    first, second, third = run.attempts.order_by("pk")
    Attempt.objects.filter(pk=first.pk).update(
        status=Attempt.DONE, failure_label=Attempt.WRONG_ANSWER, reexecution_passed=False, reexecution_error="Experiment 1: timed out"
    )
    Attempt.objects.filter(pk=second.pk).update(status=Attempt.DONE, passed=True, reported_passed=True, reexecution_passed=True)
    Attempt.objects.filter(pk=third.pk).update(status=Attempt.ERROR, failure_label=Attempt.INFRASTRUCTURE)

    importlib.import_module("runs.migrations.0010_backfill_outcome").backfill(apps, None)

    outcomes = dict(run.attempts.values_list("pk", "outcome"))
    assert outcomes == {first.pk: Attempt.REEXECUTION_FAILED, second.pk: Attempt.PASSED, third.pk: ""}
