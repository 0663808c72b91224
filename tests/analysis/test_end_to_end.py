"""One attempt through the real harness path (claim, agent, re-execution, fenced write) leaves
its analysis rows and its outcome.

Transactional: the heartbeat thread has its own database connection and must see the attempt.
"""
import pytest

from runs.evaluation.claims import ClaimOutcome
from runs.evaluation.harness import attempt_execute
from runs.evaluation.services import run_create
from runs.models import Attempt, AttemptAnalysis, AttemptException, StepText
from tests.evaluation.helpers import gold_answer
from tests.fakes import FakeTurn


@pytest.mark.django_db(transaction=True)
def test_a_scripted_attempt_leaves_its_analysis(tiny_suite, fake_llm, workspace_root):
    run = run_create(
        suite=tiny_suite, agent="react", model=f"openai-compatible:gpt-4o@{fake_llm.base_url_openai}", n_values=[1], enqueue=False
    )
    attempt = run.attempts.order_by("pk").first()
    fake_llm.script([
        FakeTurn(text="Try the data first.", tool_calls=[
            ("execute_python_script", {"path": "check.py", "content": "raise ValueError('bad value 3')\n"})]),
        FakeTurn(text="Now print something.", tool_calls=[
            ("execute_python_script", {"path": "check.py", "content": "print('{\"ok\": 1}')\n"})]),
        FakeTurn(text="I know the results.", tool_calls=[("final_answer", {"answer": gold_answer(attempt)})]),
    ])

    assert attempt_execute(attempt_id=attempt.pk) == ClaimOutcome.DONE

    attempt.refresh_from_db()
    # The reported numbers pass but nothing was implemented: the re-executed code crashes.
    assert attempt.mismatch is True and attempt.outcome == Attempt.REEXECUTION_FAILED
    analysis = AttemptAnalysis.objects.get(attempt=attempt)
    assert (analysis.steps, analysis.experiment_runs) == (3, 2)
    assert (analysis.first_run_step, analysis.first_run_crashed, analysis.working_run_step) == (1, True, 2)
    assert analysis.first_error_step == 1 and analysis.first_error_line == "ValueError: bad value 3"
    assert analysis.seconds_to_working is not None and analysis.cost_to_working is not None
    exceptions = set(AttemptException.objects.filter(attempt=attempt).values_list("step", "exception_type", "pattern"))
    assert (1, "ValueError", "bad value <n>") in exceptions
    assert (None, "NotImplementedError", "") in exceptions  # from the re-execution output
    assert StepText.objects.filter(attempt=attempt).count() == 3
