"""What an uploader could build to make the failure analysis slow or make it lie: texts that make
its regular expressions backtrack, status lines and tracebacks printed by the program, fields of
the wrong type, NaN costs, NUL characters, far too many steps."""
import math
import time

import pytest

from runs.analysis.services import attempt_analysis_record
from runs.analysis.trajectories import exceptions_in, message_pattern, program_output, trajectory_facts
from runs.evaluation.services import run_create
from runs.limits import DEFAULT_MAX_TEXT_BYTES
from runs.models import Attempt, AttemptAnalysis, AttemptException, Sample, StepText, Suite
from runs.submissions.services import submission_create, submission_reexecute_sync
from tests.analysis.test_trajectories import TRACEBACK, python, step, trajectory
from tests.replay.factories import make_user
from tests.submissions.helpers import SAMPLE, gold_answer, gold_patch, jsonl, record
from tests.submissions.helpers import trajectory as uploaded_trajectory
from tests.support import require_backend

HEADER = "Traceback (most recent call last):\n"


def filled(unit: str, size: int = DEFAULT_MAX_TEXT_BYTES - 1024) -> str:
    """`unit` repeated to just under the upload limit of one text field."""
    return (unit * (size // len(unit) + 1))[:size]


def seconds_of(function, *args, **kwargs) -> float:
    """The processor time the call takes in this thread: backtracking shows in it, whereas the wall
    time also grows with whatever else the machine runs (the other test workers of pytest -n)."""
    start = time.thread_time()
    function(*args, **kwargs)
    return time.thread_time() - start


# --- slow on purpose ------------------------------------------------------------------------------------

# Each took from half a second (per step) to minutes (per observation) before the patterns were
# made linear; now each takes milliseconds. The bounds leave a slow machine plenty of room.
BACKTRACKING_TEXTS = {
    # The status line searched for everywhere, with a "; " to backtrack to every few characters.
    "status lines without their bracket": filled("[timed out after ; xxxxx"),
    "exit codes without their bracket": filled("[exit code 1; "),
    # 20 tracebacks whose messages are runs of name characters with a word boundary at each one.
    "dotted messages": filled(f"{HEADER}ValueError: {'a.' * 990}\n"),
    "dashed messages": filled(f"{HEADER}ValueError: {'-a' * 990}\n"),
    "numbers with dots": filled(f"{HEADER}ValueError: {'1.' * 990}\n"),
    "unclosed tuples": filled(f"{HEADER}ValueError: {'(1 ,' * 490}\n"),
}


@pytest.mark.parametrize("name", BACKTRACKING_TEXTS)
def test_no_observation_makes_the_analysis_backtrack(name):
    text = BACKTRACKING_TEXTS[name]
    assert seconds_of(program_output, text) < 0.5
    assert seconds_of(exceptions_in, text) < 0.5
    # A whole trajectory at the upload limits (10 MB: 80 steps of two 64 KB texts) of such steps.
    steps = [step("execute_python_script", {"content": "import run"}, text, exit_code=1, traceback=text)] * 80
    assert seconds_of(trajectory_facts, trajectory(*steps), max_steps=1000) < 10


def test_masking_a_long_message_is_linear():
    for unit in ("a.", "-a", "1.", "a/", "0x", "1x", "'a", "(1,", "[1, ", "torch.Size(["):
        assert seconds_of(message_pattern, unit * 1000) < 0.05, unit


def test_the_status_line_is_still_removed_and_only_from_the_end():
    assert program_output("hello\n[exit code 0; 0.1 s; cwd code]") == "hello"
    assert program_output("[exit code 0; 0.1 s; cwd code]\n") == ""
    assert program_output("(no output)\n[timed out after 60 s (the time budget's remainder) and was killed; 60.0 s; cwd .]") == ""
    # A status line the program printed before the real one is its output, not ours.
    assert program_output("[exit code 0; 0.1 s; cwd code]\n[exit code 1; 0.1 s; cwd code]") == "[exit code 0; 0.1 s; cwd code]"
    assert program_output("[exit code 0; 0.1 s; cwd code] and more") == "[exit code 0; 0.1 s; cwd code] and more"


def test_far_too_many_steps_are_counted_but_only_the_first_are_read():
    many = trajectory(*[python("import run", TRACEBACK, exit_code=1)] * 250_000)
    took = time.perf_counter()
    facts = trajectory_facts(many, max_steps=1000)
    assert time.perf_counter() - took < 5
    assert facts.steps == 250_000 and facts.experiment_runs == 1000 and len(facts.exceptions) == 1000


# --- lying -------------------------------------------------------------------------------------------------


def test_a_status_line_printed_by_the_program_does_not_hide_a_crash():
    facts = trajectory_facts(trajectory(
        python("import run", "all good\n[exit code 0; 0.1 s; cwd code]", exit_code=1),
    ))
    assert (facts.first_run_crashed, facts.working_run_step, facts.first_error_step) == (True, None, 1)


def test_a_fake_traceback_in_the_output_counts_as_a_crash_and_its_exception_is_what_it_printed():
    """The program printed a traceback: the analysis cannot tell it from a real one, and the
    exception it records is exactly the printed line (escaped wherever it is shown)."""
    printed = f"{HEADER}  File \"x.py\", line 1\n<script>alert(1)</script>Error: =HYPERLINK(\"http://evil\")\n"
    facts = trajectory_facts(trajectory(python("print(fake)", printed, exit_code=0)))
    assert facts.first_run_crashed is True
    assert [found.exception.message for found in facts.exceptions] == []  # "<script>..." is no exception name
    facts = trajectory_facts(trajectory(python("print(fake)", f"{HEADER}Error: =HYPERLINK(\"http://evil\")", exit_code=0)))
    assert [found.exception.type for found in facts.exceptions] == ["Error"]


@pytest.mark.parametrize("value", ["1", "0", 1.5, True, None, [1], {"code": 1}, float("nan")])
def test_an_exit_code_that_is_no_integer_counts_as_none(value):
    facts = trajectory_facts(trajectory(python("import run", '{"mean": 2.0}', exit_code=value)))
    # The program printed a result and no traceback: with no exit code to go by, it worked.
    assert (facts.first_run_crashed, facts.working_run_step) == (False, 1)


@pytest.mark.parametrize("cost", [float("nan"), float("inf"), -1.0, "0.5", True, None, [0.5]])
def test_a_cost_or_duration_that_is_no_finite_number_counts_as_zero(cost):
    facts = trajectory_facts(trajectory(
        python("import run", TRACEBACK, exit_code=1, cost=cost, duration=cost),
        python("import run", '{"mean": 2.0}', cost=0.25, duration=2.0),
    ))
    assert facts.cost_to_working == pytest.approx(0.25) and facts.seconds_to_working == pytest.approx(2.0)
    assert math.isfinite(facts.cost_to_working) and math.isfinite(facts.seconds_to_working)


@pytest.mark.parametrize("document", [
    None, [], "steps", {"steps": "many"}, {"steps": [None, 3, "x", [], {"tool": 7, "arguments": [1], "observation": {"a": 1}}]},
    {"steps": [{"tool": "bash", "arguments": {"command": ["python", "x.py"]}, "observation": None, "exit_code": []}]},
])
def test_documents_of_the_wrong_shape_never_raise(document):
    facts = trajectory_facts(document)
    assert facts.steps == (len(document["steps"]) if isinstance(document, dict) and isinstance(document["steps"], list) else 0)


# --- stored rows -------------------------------------------------------------------------------------------


@pytest.fixture
def attempt(tiny_suite):
    return run_create(suite=tiny_suite, agent="noop", n_values=[1], enqueue=False).attempts.order_by("pk").first()


@pytest.mark.django_db
def test_the_snippet_markers_and_markup_in_a_step_are_stored_as_text(attempt):
    """Postgres refuses NUL in text and JSON alike, so an upload never stores one; the search's
    hit markers (\x02, \x03) and markup can be stored, and are only text."""
    nasty = f"\x02\x03{HEADER}ValueError: bad <b>value</b> \x02 3\x03\n"
    Attempt.objects.filter(pk=attempt.pk).update(trajectory=trajectory(
        python("import run", nasty, exit_code=1, thought="<script>thinking</script>", traceback=nasty),
    ), reexecution_output=nasty)

    assert attempt_analysis_record([attempt.pk]) == 1

    assert AttemptAnalysis.objects.get(attempt=attempt).first_error_step == 1
    assert set(AttemptException.objects.filter(attempt=attempt).values_list("exception_type", "pattern")) == {
        ("ValueError", "bad <b>value</b> \x02 <n>\x03")}
    assert "<script>thinking</script>" in StepText.objects.get(attempt=attempt, step=1).text


@pytest.mark.slow
@pytest.mark.django_db
def test_an_attempt_of_250_000_steps_stores_the_analysis_of_the_first_ones(attempt, settings):
    settings.TRAJECTORY_MAX_STEPS = 50
    Attempt.objects.filter(pk=attempt.pk).update(trajectory=trajectory(*[step("list_files", {}, "a.py")] * 250_000))
    took = time.perf_counter()
    attempt_analysis_record([attempt.pk])
    assert time.perf_counter() - took < 30
    assert AttemptAnalysis.objects.get(attempt=attempt).steps == 250_000
    assert StepText.objects.filter(attempt=attempt).count() == 50


@pytest.mark.django_db
@pytest.mark.parametrize("agent", ["gold", "mutant"])
def test_a_gold_baselines_errors_and_exceptions_never_quote_the_code_its_public_replay_hides(tiny_suite, agent):
    """A read of the gold file can fail or print a traceback that quotes it; the explorer and the
    system page show the first error's line and the exceptions to anyone."""
    attempt = run_create(suite=tiny_suite, agent=agent, n_values=[1], enqueue=False).attempts.order_by("pk").first()
    secret = "zqgoldsecret"
    Attempt.objects.filter(pk=attempt.pk).update(trajectory=trajectory(
        step("inspect_file_lines", {"path": "m.py"}, f"1: return {secret}(values)\n2: # {HEADER}KeyError: {secret}",
             error=True),
        step("write_file", {"path": "m.py", "content": f"{HEADER}ValueError: {secret}"}, "wrote m.py"),
        python("import run", TRACEBACK, exit_code=1),
    ))

    # A suite whose gold numbers are public: a private suite's gold baseline shows none of its output (runs.analysis.public).
    Suite.objects.filter(pk=attempt.run.suite_id).update(gold_public=True)
    attempt_analysis_record([attempt.pk])

    analysis = AttemptAnalysis.objects.get(attempt=attempt)
    assert (analysis.steps, analysis.first_error_step, analysis.first_error_line) == (3, 1, "tool error")
    assert (analysis.experiment_runs, analysis.first_run_step, analysis.first_run_crashed) == (1, 3, True)
    messages = list(AttemptException.objects.filter(attempt=attempt).values_list("step", "message"))
    assert messages == [(3, "ValueError: expected 3 values, got 4")]
    assert not StepText.objects.filter(attempt=attempt, text__contains=secret).exists()


# --- after re-execution ------------------------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db
def test_re_executing_an_upload_refreshes_its_outcome_and_analysis(builtin, workspace_root, claims_in_the_test_transaction):
    """A cheat (the gold numbers reported, nothing implemented) is scored "passed" on upload; the
    real re-execution (bubblewrap) crashes, and the outcome and the re-execution's exceptions follow."""
    require_backend("bubblewrap")
    sample = Sample.objects.get(sample_id=SAMPLE)
    data = jsonl(record(SAMPLE, 0, final_answer=gold_answer(sample), final_patch="", trajectory=uploaded_trajectory(SAMPLE)))
    submission = submission_create(data=data, filename="cheat.jsonl", uploader=make_user(), reexecute=True, enqueue=False)
    cheat = submission.run.attempts.get()
    assert (cheat.outcome, cheat.reexecution_passed) == (Attempt.PASSED, None)
    assert AttemptAnalysis.objects.get(attempt=cheat).steps == 1
    assert not AttemptException.objects.filter(attempt=cheat).exists()

    submission_reexecute_sync(submission=submission)

    cheat.refresh_from_db()
    assert cheat.reexecution_passed is False and cheat.mismatch is True
    assert (cheat.outcome, cheat.failure_label) == (Attempt.REEXECUTION_FAILED, Attempt.WRONG_ANSWER)
    assert AttemptException.objects.filter(attempt=cheat, step=None, exception_type="NotImplementedError").exists()
    assert AttemptAnalysis.objects.get(attempt=cheat).steps == 1  # the trajectory's facts are kept


@pytest.mark.slow
@pytest.mark.django_db
def test_re_executing_an_upload_without_an_answer_keeps_its_outcome_in_step_with_its_verdict(
    builtin, workspace_root, tmp_path, claims_in_the_test_transaction
):
    require_backend("bubblewrap")
    patch = gold_patch(Sample.objects.get(sample_id=SAMPLE), tmp_path)
    data = jsonl(record(SAMPLE, 0, final_answer=None, final_patch=patch))
    submission = submission_create(data=data, filename="honest.jsonl", uploader=make_user(), reexecute=True, enqueue=False)
    honest = submission.run.attempts.get()
    before = honest.outcome

    submission_reexecute_sync(submission=submission)

    honest.refresh_from_db()
    # The code works, but nothing was reported: the verdict stays a failure, and so does the outcome.
    assert honest.reexecution_passed is True and honest.passed is False
    assert before == honest.outcome == honest.failure_label == Attempt.NO_ANSWER
