"""Per-function verdicts at n >= 2 (runs.evaluation.transplants): each masked function of a failed
attempt re-run alone with the gold bodies of the others, on real workers and real sandboxes."""
from __future__ import annotations

import io
import json

import pytest
from django.apps import apps
from django.conf import settings
from rq import Queue

from runs.agents import gold_bodies_for
from runs.benchmark.execution import ExperimentOutcome
from runs.evaluation.claims import worker_host
from runs.evaluation.harness import attempt_execute
from runs.evaluation.queue import attempts_enqueue, queue_named
from runs.evaluation.recovery import attempts_recover
from runs.evaluation.services import run_create
from runs.evaluation.transplants import TRANSPLANT, diagnosis_of, judge, transplant_execute, transplants_execute_sync, transplants_plan
from runs.evaluation.verdicts import Reexecution
from runs.models import Attempt, Sample, Transplant
from runs.signals import attempt_reexecuted
from tests.evaluation.conftest import PAIR_EACH_FOUR_PERCENT_HIGH
from tests.support import import_builtin_suite

pytestmark = pytest.mark.django_db(transaction=True)

ADAM = "adam-bias-correction"


def _single_attempt_run(suite, *, paper: str | None = None, **options) -> Attempt:
    """A run of one attempt at n = 2 (on `paper`'s first sample), not queued yet."""
    run = run_create(suite=suite, n_values=[2], sample_cap=1, enqueue=False, **options)
    attempts = run.attempts.select_related("sample__paper").order_by("sample__paper__paper_id")
    kept = attempts.filter(sample__paper__paper_id=paper).first() if paper else attempts.first()
    run.attempts.exclude(pk=kept.pk).delete()
    return kept


def _function_names(attempt: Attempt) -> list[str]:
    return [function.name for function in attempt.sample.functions.order_by("func_id")]


def _verdicts(attempt: Attempt) -> dict[str, str]:
    return {t.function.name: t.verdict for t in attempt.transplants.select_related("function")}


def _gold_lines(attempt: Attempt) -> list[str]:
    """The distinctive lines of the gold bodies of the attempt's masked functions."""
    from pathlib import Path

    missing = [{"file": f"code/{f.file}", "name": f.name, "line": f.line_hint} for f in attempt.sample.functions.all()]
    bodies = gold_bodies_for(code_dir=Path(attempt.sample.paper.code_dir), missing_functions=missing)
    return [line.strip() for body in bodies.values() for line in body.splitlines() if len(line.strip()) > 12]


def test_builtin_pairs_on_real_workers_right_wrong_both_wrong_and_none_for_a_pass(db, workers, workspace_root):
    suite = import_builtin_suite("2")
    probe = _single_attempt_run(suite, paper=ADAM, agent="gold")
    first, second = _function_names(probe)
    one_wrong = _single_attempt_run(suite, paper=ADAM, agent="planted_gold", agent_config={"bodies": {second: "mutant"}})
    both_wrong = _single_attempt_run(
        suite, paper=ADAM, agent="planted_gold", agent_config={"bodies": {first: "stub", second: "mutant"}}
    )
    attempts_enqueue(attempts=[probe, one_wrong, both_wrong])

    workers.run(2)

    for attempt in (probe, one_wrong, both_wrong):
        attempt.refresh_from_db()
        assert attempt.status == Attempt.DONE, (attempt.exit_message, workers.logs())
    # A pair that passes together is not judged function by function.
    assert probe.passed and probe.transplants.count() == 0 and probe.function_diagnosis == ""

    assert one_wrong.reexecution_passed is False
    assert _verdicts(one_wrong) == {first: Transplant.Verdict.RIGHT, second: Transplant.Verdict.WRONG}, workers.logs()
    assert one_wrong.function_diagnosis == Attempt.ONE_WRONG
    wrong = one_wrong.transplants.get(function__name=second)
    assert "numbers outside tolerance" in wrong.reason
    assert any(not item["passed"] for item in wrong.score["experiments"])
    assert wrong.sandbox_seconds > 0 and wrong.experiment_seconds > 0
    assert wrong.claimed_by.startswith(worker_host()) and wrong.tries == 1

    assert both_wrong.reexecution_passed is False
    assert _verdicts(both_wrong) == {first: Transplant.Verdict.WRONG, second: Transplant.Verdict.WRONG}
    assert both_wrong.function_diagnosis == Attempt.SEVERAL_WRONG
    stub = both_wrong.transplants.get(function__name=first)
    assert f"NotImplementedError with {first} on the stack" in stub.reason

    # Nothing of a gold body is stored with a transplant.
    stored = " ".join(
        f"{t.reason} {t.score} {t.infra_history}" for t in Transplant.objects.filter(attempt__in=[one_wrong, both_wrong])
    )
    assert not [line for line in _gold_lines(one_wrong) if line in stored]
    # Transplants run once the attempt is recorded, so its own time never includes theirs.
    assert one_wrong.finished_at <= wrong.claimed_at


def test_each_function_right_alone_but_wrong_together_is_an_interaction_failure(pair_suite, workers):
    attempt = _single_attempt_run(pair_suite, agent="planted_gold", agent_config={"bodies": PAIR_EACH_FOUR_PERCENT_HIGH})
    attempts_enqueue(attempts=[attempt])

    workers.run(1)

    attempt.refresh_from_db()
    assert attempt.status == Attempt.DONE and not attempt.passed, workers.logs()
    relative_error = attempt.reexecution_score["experiments"][0]["numbers"][0]["relative_error"]
    assert relative_error == pytest.approx(0.0816, abs=1e-6)  # 4% twice compounds past the 5% tolerance
    assert _verdicts(attempt) == {"scale_a": Transplant.Verdict.RIGHT, "scale_b": Transplant.Verdict.RIGHT}
    for transplant in attempt.transplants.all():
        number = transplant.score["experiments"][0]["numbers"][0]
        assert number["passed"] and number["relative_error"] == pytest.approx(0.04, abs=1e-6)
    assert attempt.function_diagnosis == Attempt.INTERACTION


def test_a_crash_outside_the_function_is_not_decidable(pair_suite, workspace_root, redis_queue):
    # scale_a returns text: the gold scale_b multiplies it and raises, with scale_a no longer on the stack.
    attempt = _single_attempt_run(pair_suite, agent="planted_gold", agent_config={"bodies": {"scale_a": "return str(x)"}})
    attempt_execute(attempt_id=attempt.pk, requeue=False)
    attempt.refresh_from_db()
    assert attempt.reexecution_passed is False and attempt.function_diagnosis == Attempt.PENDING
    for transplant in attempt.transplants.all():
        assert transplant_execute(transplant_id=transplant.pk, requeue=False) == "done"
    attempt.refresh_from_db()
    assert _verdicts(attempt) == {"scale_a": Transplant.Verdict.NOT_DECIDABLE, "scale_b": Transplant.Verdict.RIGHT}
    reason = attempt.transplants.get(function__name="scale_a").reason
    assert "TypeError in scale_b, outside scale_a" in reason
    assert attempt.function_diagnosis == Attempt.NOT_DECIDED


def test_a_sync_run_judges_its_failed_attempts_in_process(pair_suite, workspace_root):
    from django.core.management import call_command

    call_command("run_eval", "--suite", "pair", "--agent", "planted_gold", "--n", "2", "--sync",
                 "--agent-config", json.dumps({"bodies": PAIR_EACH_FOUR_PERCENT_HIGH}), stdout=io.StringIO())
    attempt = Attempt.objects.get(run__suite=pair_suite)
    assert attempt.job_id == "in-process" and not attempt.passed
    assert _verdicts(attempt) == {"scale_a": Transplant.Verdict.RIGHT, "scale_b": Transplant.Verdict.RIGHT}
    assert {t.job_id for t in attempt.transplants.all()} == {"in-process"}
    assert attempt.function_diagnosis == Attempt.INTERACTION

    call_command("run_eval", "--suite", "pair", "--agent", "planted_gold", "--n", "2", "--sync", "--no-transplants",
                 "--agent-config", json.dumps({"bodies": PAIR_EACH_FOUR_PERCENT_HIGH}), stdout=io.StringIO())
    unjudged = Attempt.objects.filter(run__suite=pair_suite).latest("pk")
    assert not unjudged.passed and unjudged.transplants.count() == 0 and unjudged.function_diagnosis == ""


def test_a_submitted_attempt_is_judged_once_the_harness_re_executed_it(pair_suite, tmp_path, workspace_root):
    from runs.submissions.services import submission_create, submission_reexecute_sync
    from tests.submissions.helpers import HEADER, gold_patch, jsonl, record

    sample = Sample.objects.get(paper__suite=pair_suite)
    patch = gold_patch(sample, tmp_path, bodies=PAIR_EACH_FOUR_PERCENT_HIGH)
    data = jsonl(record(sample.sample_id, 0, final_answer={"Experiment 1": {"value": 60.0}}, final_patch=patch),
                 header={**HEADER, "suite": "pair"})
    submission = submission_create(data=data, uploader=None, reexecute=True, enqueue=False)
    submission_reexecute_sync(submission=submission)
    attempt = submission.run.attempts.get()
    assert attempt.reported_passed and attempt.reexecution_passed is False and attempt.mismatch
    assert _verdicts(attempt) == {"scale_a": Transplant.Verdict.RIGHT, "scale_b": Transplant.Verdict.RIGHT}
    assert attempt.function_diagnosis == Attempt.INTERACTION


# The agent's scale_a, run next to the gold scale_b in its transplant, reads the gold file and prints it:
# once as the experiment's value, once dressed as a traceback whose names spell the gold line.
LEAKING_SCALE_A = {
    "exfiltrate_as_value": (
        "import json\nsource = open('scale.py').read()\n"
        "print(json.dumps({'value': source[source.index('def scale_b'):]}))\nraise SystemExit(0)"
    ),
    "exfiltrate_as_traceback": (
        "import sys\nsource = open('scale.py').read()\nline = source[source.rindex('return x * 3'):].splitlines()[0]\n"
        "word = ''.join(c if c.isalnum() else '_' for c in line)\n"
        "print('Traceback (most recent call last):\\n  File \"/work/code/scale.py\", line 1, in ' + word"
        " + '\\n' + word + 'Error: ' + line, file=sys.stderr)\nraise SystemExit(1)"
    ),
    "exfiltrate_as_frame_name": (
        "import sys\nsource = open('scale.py').read()\nline = source[source.rindex('return x * 3'):].splitlines()[0]\n"
        "word = ''.join(c if c.isalnum() else '_' for c in line)\n"
        "print('Traceback (most recent call last):\\n  File \"/work/code/run.py\", line 1, in ' + word"
        " + '\\nValueError: no', file=sys.stderr)\nraise SystemExit(1)"
    ),
}


@pytest.mark.parametrize("trick", sorted(LEAKING_SCALE_A))
def test_an_agent_reading_the_gold_code_in_its_transplant_cannot_get_it_stored(pair_suite, workspace_root, trick):
    attempt = _single_attempt_run(pair_suite, agent="planted_gold", agent_config={"bodies": {"scale_a": LEAKING_SCALE_A[trick]}})
    attempt_execute(attempt_id=attempt.pk, requeue=False)
    attempt.refresh_from_db()
    assert attempt.reexecution_passed is False
    transplants_execute_sync(attempt_id=attempt.pk)
    transplant = attempt.transplants.get(function__name="scale_a")
    assert transplant.status == Transplant.Status.DONE and transplant.verdict in (Transplant.Verdict.WRONG, Transplant.Verdict.NOT_DECIDABLE)
    stored = json.dumps([transplant.reason, transplant.score, transplant.infra_history])
    for fragment in ("x * 3.0", "x___3_0", "Triples", "def scale_b"):
        assert fragment not in stored, (fragment, stored)


def test_judge_blames_a_helper_the_agent_added_and_keeps_no_message(tmp_path):
    (tmp_path / "scale.py").write_text("def scale_a(x):\n    return x\n\n\ndef scale_b(x):\n    return x\n")

    def crashed(output: str) -> Reexecution:
        outcome = ExperimentOutcome(exp_id=0, result=None, error="exited with status 1", output=output, exit_code=1,
                                    timed_out=False, duration=0.1)
        return Reexecution(score={"experiments": [{"experiment_id": "Experiment 1", "passed": False}]}, passed=False,
                           outcomes=[outcome])

    in_helper = (
        'Traceback (most recent call last):\n  File "/work/code/run.py", line 5, in <module>\n'
        '  File "/work/code/scale.py", line 9, in _agent_helper\n    secret = gold_line()\nValueError: the secret 42\n'
    )
    verdict, reason = judge(crashed(in_helper), function_file="scale.py", function_name="scale_a", code_dir=tmp_path)
    assert verdict == Transplant.Verdict.WRONG and reason == "Experiment 1: ValueError with scale_a on the stack"
    in_gold = in_helper.replace("_agent_helper", "scale_b")
    verdict, reason = judge(crashed(in_gold), function_file="scale.py", function_name="scale_a", code_dir=tmp_path)
    assert verdict == Transplant.Verdict.NOT_DECIDABLE and reason == "Experiment 1: ValueError in scale_b, outside scale_a"
    timed_out = Reexecution(score={"experiments": [{"experiment_id": "Experiment 1", "passed": False}]}, passed=False,
                            outcomes=[ExperimentOutcome(0, None, "timed out after 60 s", "", -9, True, 60.0)])
    assert judge(timed_out, function_file="scale.py", function_name="scale_a", code_dir=tmp_path) == (
        Transplant.Verdict.NOT_DECIDABLE, "Experiment 1: timed out after 60 s"
    )
    # The agent's patch is the agent's text: the reason names the refusal in the harness's words only.
    refused = Reexecution(score=None, passed=False, error="the final patch is refused: not a diff near 'SECRET'", applied=False)
    assert judge(refused, function_file="scale.py", function_name="scale_a", code_dir=tmp_path) == (
        Transplant.Verdict.NOT_DECIDABLE, "the agent's code could not be transplanted: its final patch is refused or does not apply"
    )
    # An exit without a traceback (os._exit, sys.exit) is the function's doing; its status is the agent's to choose.
    verdict, reason = judge(crashed("partial output\n"), function_file="scale.py", function_name="scale_a", code_dir=tmp_path)
    assert verdict == Transplant.Verdict.WRONG and reason == "Experiment 1: ended without a result and without a traceback with scale_a transplanted"
    # A traceback whose exception is not a builtin's: named by the harness, not by the status or the output.
    custom = in_gold.replace("ValueError: the secret 42", "SecretError42: the secret 42")
    assert judge(crashed(custom), function_file="scale.py", function_name="scale_a", code_dir=tmp_path) == (
        Transplant.Verdict.NOT_DECIDABLE, "Experiment 1: an exception in scale_b, outside scale_a"
    )
    # A body that prints the public numbers passes the experiments beside the gold bodies; the
    # hidden variants it fails make it wrong, not right alone.
    public_only = Reexecution(score={"passed": True, "experiments": [{"experiment_id": "Experiment 1", "passed": True}]},
                              passed=False, held_out_passed=False,
                              outcomes=[ExperimentOutcome(0, {"score": 1.0}, None, "", 0, False, 0.1)])
    assert judge(public_only, function_file="scale.py", function_name="scale_a", code_dir=tmp_path) == (
        Transplant.Verdict.WRONG, "passes the experiments but not their held-out check, with the gold bodies of the other masked functions"
    )


def _replay_text(client, attempt: Attempt, section_id: str) -> str:
    from django.urls import reverse

    html = client.get(reverse("replay:attempt", args=[attempt.pk])).content.decode()
    start = html.index(f'<section id="{section_id}"')
    return html[start : html.index("</section>", start)]


# Run next to the gold scale_b in its transplant, the agent's scale_a reads it and prints seven of its
# bytes as the experiment's number; its own scale_b ("x * 3.5") is wrong, so it is not the gold one.
BYTES_AS_NUMBER = {
    "scale_a": (
        "import json\nsource = open('scale.py').read()\nchunk = source[source.rindex('x * 3'):][:7].encode()\n"
        "print(json.dumps({'value': float(int.from_bytes(chunk, 'big'))}))\nraise SystemExit(0)"
    ),
    "scale_b": "return x * 3.5",
}


@pytest.mark.slow
def test_a_transplants_numbers_are_for_staff_alone(pair_suite, workspace_root, client):
    """The byte leak: a transplant's printed numbers carried the gold code's bytes to every visitor."""
    from tests.replay.factories import make_user

    attempt = _single_attempt_run(pair_suite, agent="planted_gold", agent_config={"bodies": BYTES_AS_NUMBER})
    attempt_execute(attempt_id=attempt.pk, requeue=False)
    transplants_execute_sync(attempt_id=attempt.pk)
    attempt.refresh_from_db()
    leaked = float(int.from_bytes(b"x * 3.0", "big"))  # the gold scale_b's bytes
    transplant = attempt.transplants.get(function__name="scale_a")
    assert transplant.score["experiments"][0]["numbers"][0]["predicted"] == leaked  # the attack worked
    spellings = [repr(leaked), f"{leaked:.6g}", str(int(leaked))]  # stored as JSON, it reads back as an integer
    anonymous = _replay_text(client, attempt, "functions")
    assert "Wrong" in anonymous and not [spelling for spelling in spellings if spelling in anonymous]
    client.force_login(make_user())
    assert not [spelling for spelling in spellings if spelling in _replay_text(client, attempt, "functions")]
    client.force_login(make_user(username="staff-member", is_staff=True))
    staff = _replay_text(client, attempt, "functions")
    assert str(int(leaked)) in staff


@pytest.mark.slow
def test_functions_that_exit_the_process_are_wrong_and_their_status_is_not_shown(pair_suite, workspace_root, client):
    exiting = "import os\nos._exit(42)"
    attempt = _single_attempt_run(pair_suite, agent="planted_gold", agent_config={"bodies": {"scale_a": exiting, "scale_b": exiting}})
    attempt_execute(attempt_id=attempt.pk, requeue=False)
    transplants_execute_sync(attempt_id=attempt.pk)
    attempt.refresh_from_db()
    assert _verdicts(attempt) == {"scale_a": Transplant.Verdict.WRONG, "scale_b": Transplant.Verdict.WRONG}
    assert attempt.function_diagnosis == Attempt.SEVERAL_WRONG
    reasons = [t.reason for t in attempt.transplants.order_by("function__func_id")]
    assert reasons == [f"Experiment 1: ended without a result and without a traceback with {name} transplanted"
                       for name in ("scale_a", "scale_b")]
    assert "42" not in _replay_text(client, attempt, "functions")


def test_a_given_up_transplant_keeps_only_the_kind_of_its_failure():
    """The rest of an infrastructure failure may name what the agent's code left in the workspace."""
    from runs.evaluation.transplants import TRANSPLANT

    failure = "re-execution sandbox failed: PermissionError: [Errno 13] '/workspace/code/return_x___3_0'"
    assert TRANSPLANT.released_fields(None, failure, False)["reason"] == (
        "the transplant could not run (infrastructure failure): re-execution sandbox failed"
    )
    assert TRANSPLANT.released_fields(None, "'/workspace/x * 3.0': gone", False)["reason"] == (
        "the transplant could not run (infrastructure failure)"
    )
    assert TRANSPLANT.released_fields(None, failure, True) == {"status": Transplant.Status.QUEUED}


def test_diagnosis_of_verdicts():
    right, wrong, undecided = Transplant.Verdict.RIGHT, Transplant.Verdict.WRONG, Transplant.Verdict.NOT_DECIDABLE
    assert diagnosis_of([right, right]) == Attempt.INTERACTION
    assert diagnosis_of([right, wrong]) == Attempt.ONE_WRONG
    assert diagnosis_of([wrong, undecided, wrong]) == Attempt.SEVERAL_WRONG
    assert diagnosis_of([undecided, wrong]) == Attempt.NOT_DECIDED  # the other might be wrong too
    assert diagnosis_of([right, undecided]) == Attempt.NOT_DECIDED


def _failed_pair_attempt(suite, **options) -> Attempt:
    attempt = _single_attempt_run(suite, agent="gold", **options)
    Attempt.objects.filter(pk=attempt.pk).update(status=Attempt.DONE, reexecution_passed=False, passed=False)
    return attempt


def test_the_runs_app_connects_the_transplant_planner_when_ready():
    """Connected by RunsConfig.ready, not as a side effect of importing the module: a process that
    has not imported runs.evaluation.transplants yet still plans transplants."""
    runs_app = apps.get_app_config("runs")
    assert attempt_reexecuted.disconnect(dispatch_uid="runs.evaluation.transplants")
    try:
        assert not attempt_reexecuted.has_listeners()
        runs_app.ready()
        assert attempt_reexecuted.has_listeners()
        runs_app.ready()  # a second call connects nothing twice
        assert len(attempt_reexecuted.receivers) == 1
    finally:
        runs_app.ready()


def test_a_run_can_switch_transplants_off(pair_suite, redis_queue):
    attempt = _failed_pair_attempt(pair_suite, transplants=False)
    assert transplants_plan(attempt_id=attempt.pk) == []
    attempt.refresh_from_db()
    assert attempt.transplants.count() == 0 and attempt.function_diagnosis == ""


def test_cancelling_the_run_settles_its_queued_transplants_as_not_judged(pair_suite, redis_queue):
    from runs.evaluation.services import run_cancel

    attempt = _failed_pair_attempt(pair_suite)
    planned = transplants_plan(attempt_id=attempt.pk)
    transplant_queue = queue_named(settings.TRANSPLANT_QUEUE)
    assert len(transplant_queue.job_ids) == 2
    run_cancel(run=attempt.run)
    assert transplant_queue.job_ids == []
    for transplant in planned:
        transplant.refresh_from_db()
        assert (transplant.status, transplant.verdict, transplant.reason) == (
            Transplant.Status.GIVEN_UP, Transplant.Verdict.NOT_DECIDABLE, "not judged: the run was cancelled"
        )
        assert transplant_execute(transplant_id=transplant.pk) == "skipped"
    attempt.refresh_from_db()
    assert attempt.function_diagnosis == Attempt.NOT_DECIDED


def test_transplants_go_on_their_own_queue_which_workers_take_last(pair_suite, redis_queue):
    from runs.evaluation.worker import EvaluationWorker

    attempt = _failed_pair_attempt(pair_suite)
    planned = transplants_plan(attempt_id=attempt.pk)
    assert len(planned) == 2
    transplant_queue = queue_named(settings.TRANSPLANT_QUEUE)
    assert sorted(transplant_queue.job_ids) == sorted(TRANSPLANT.job_id(t.pk, 0) for t in planned)
    assert redis_queue.job_ids == []  # never ahead of attempts on the evaluation queue
    worker = EvaluationWorker([redis_queue], connection=redis_queue.connection)
    assert worker.queue_names() == [settings.MAINTENANCE_QUEUE, redis_queue.name, settings.TRANSPLANT_QUEUE]


def test_a_transplant_of_a_dead_worker_is_recovered_then_given_up_as_not_decidable(pair_suite, redis_queue, settings):
    settings.ATTEMPT_MAX_INFRA_RETRIES = 1
    attempt = _failed_pair_attempt(pair_suite)
    victim, other = transplants_plan(attempt_id=attempt.pk)
    Transplant.objects.filter(pk=other.pk).update(status=Transplant.Status.DONE, verdict=Transplant.Verdict.RIGHT)

    def held_by_a_dead_process():
        Transplant.objects.filter(pk=victim.pk).update(
            status=Transplant.Status.RUNNING, tries=victim.tries + 1, claimed_by=f"{worker_host()}:999999999", job_id="gone"
        )
        victim.refresh_from_db()

    held_by_a_dead_process()
    recovered = attempts_recover(kinds=None)
    assert [(r.kind, r.attempt_id, r.outcome) for r in recovered] == [("transplant", victim.pk, "requeued")]
    victim.refresh_from_db()
    assert victim.status == Transplant.Status.QUEUED and victim.infra_history[-1]["kind"] == "transplant"
    assert TRANSPLANT.job_id(victim.pk, victim.tries + 1 - 1) in Queue(settings.TRANSPLANT_QUEUE, connection=redis_queue.connection).job_ids

    held_by_a_dead_process()
    attempts_recover()
    victim.refresh_from_db()
    assert victim.status == Transplant.Status.GIVEN_UP and victim.verdict == Transplant.Verdict.NOT_DECIDABLE
    assert victim.reason.startswith("the transplant could not run (infrastructure failure): worker died")
    attempt.refresh_from_db()
    assert attempt.function_diagnosis == Attempt.NOT_DECIDED


def test_the_sweep_removes_the_workspaces_of_dead_transplant_tries_only(pair_suite, redis_queue, workspace_root):
    import os

    from runs.evaluation.recovery import leftovers_sweep
    from runs.evaluation.workdirs import attempt_reexecution_dir

    attempt = _failed_pair_attempt(pair_suite)
    live, dead = transplants_plan(attempt_id=attempt.pk)
    Transplant.objects.filter(pk=live.pk).update(status=Transplant.Status.RUNNING, tries=1)
    Transplant.objects.filter(pk=dead.pk).update(status=Transplant.Status.DONE, tries=1)
    directories = {t.pk: attempt_reexecution_dir(t.pk, 1, prefix="transplant-") for t in (live, dead)}
    for directory in directories.values():
        (directory / "code").mkdir(parents=True)
        os.utime(directory, (0, 0))  # made long before the sweep looks

    removed = leftovers_sweep()

    assert not directories[dead.pk].exists() and f"directory {directories[dead.pk]}" in removed
    assert directories[live.pk].is_dir()


def test_a_function_the_workspace_does_not_mask_is_refused_rather_than_judged_on_all_gold(pair_suite, tmp_path):
    from pathlib import Path
    from types import SimpleNamespace

    from runs.evaluation.transplants import gold_restored_except
    from runs.suites.services import workspace_build

    sample = Sample.objects.get(paper__suite=pair_suite)
    workspace_build(sample=sample, dest=tmp_path / "ws")
    stranger = SimpleNamespace(file="scale.py", name="scale_c")
    with pytest.raises(ValueError, match="scale.py:scale_c is not one of the workspace's masked functions"):
        gold_restored_except(tmp_path / "ws", code_dir=Path(sample.paper.code_dir), kept=stranger, functions=sample.functions.all())
    assert "raise NotImplementedError" in (tmp_path / "ws" / "code" / "scale.py").read_text()  # nothing put back


def test_the_run_page_sums_up_its_transplants_apart_from_the_attempts_time(pair_suite, redis_queue, admin_client):
    attempt = _failed_pair_attempt(pair_suite)
    judged, waiting = transplants_plan(attempt_id=attempt.pk)
    Transplant.objects.filter(pk=judged.pk).update(status=Transplant.Status.DONE, verdict=Transplant.Verdict.WRONG, sandbox_seconds=2.5)
    page = admin_client.get(f"/runs/{attempt.run_id}/").content.decode()
    assert "wrong 1; 1 waiting; 2.5 s of sandbox time, not counted in the attempts' time" in page
    assert "· Being judged" in page
    assert 'id="auto-refresh"' in page  # it keeps itself up to date while some wait

    switched_off = _failed_pair_attempt(pair_suite, transplants=False)
    assert "switched off for this run" in admin_client.get(f"/runs/{switched_off.run_id}/").content.decode()


def test_each_implementation_against_gold_is_computed_once_per_try_and_again_after_a_re_import(pair_suite, workspace_root):
    from pathlib import Path

    from django.utils import timezone

    from runs.models import Suite
    from runs.replay.functions import attempt_implementations

    attempt = _single_attempt_run(pair_suite, agent="planted_gold", agent_config={"bodies": PAIR_EACH_FOUR_PERCENT_HIGH})
    attempt_execute(attempt_id=attempt.pk, requeue=False)

    def gold_text() -> str:
        loaded = Attempt.objects.select_related("run__suite", "sample__paper").get(pk=attempt.pk)
        return " ".join(segment["t"] for function in attempt_implementations(attempt=loaded).functions
                        for row in function.rows for segment in row.gold or [])

    assert "3.0" in gold_text()
    gold_file = Path(attempt.sample.paper.code_dir) / "scale.py"
    gold_file.write_text(gold_file.read_text().replace("x * 3.0", "x * 3.5"))
    assert "3.5" not in gold_text()  # the same try's view comes from the cache
    Suite.objects.filter(pk=pair_suite.pk).update(imported_at=timezone.now())
    assert "3.5" in gold_text()
