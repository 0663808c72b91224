"""Attempt execution in this process: both verdicts, labels, claims, patches.

Transactional: the heartbeat thread has its own database connection and must see the attempt.
"""
import json
import threading
from pathlib import Path

import pytest
from django.db import connection

from runs.agents import AGENTS, NoopAgent
from runs.benchmark.patches import unified_diff
from runs.benchmark.text import json_safe
from runs.evaluation.claims import ClaimOutcome, InfrastructureFailure, ModelProviderFailure, claim
from runs.evaluation.harness import BUDGET_SETTINGS, AttemptResult, attempt_agent, attempt_execute, construct_agent
from runs.evaluation.kinds import RUN_ATTEMPT
from runs.evaluation.selectors import run_progress
from runs.evaluation.services import run_create, run_execute_sync, run_retry_failed
from runs.evaluation.verdicts import failure_label, scoped_final_code
from runs.evaluation.workdirs import attempt_reexecution_dir, attempt_workspace_dir
from runs.models import Attempt, Run, Sample, Suite
from runs.suites.environments import NotPrepared
from runs.suites.selectors import sample_experiments, sample_task
from tests.evaluation.agents import GATE_ENV
from tests.evaluation.helpers import gold_answer, trajectory_files, wait_for
from tests.fakes import FakeError, FakeTurn

transactional = pytest.mark.django_db(transaction=True)


def _react_run(suite, fake_llm, **options):
    return run_create(
        suite=suite,
        agent="react",
        model=f"openai-compatible:gpt-4o@{fake_llm.base_url_openai}",
        n_values=[1],
        enqueue=False,
        **options,
    )


@transactional
def test_reported_gold_numbers_without_code_pass_the_report_but_not_the_reexecution(tiny_suite, fake_llm):
    run = _react_run(tiny_suite, fake_llm)
    attempt = run.attempts.order_by("pk").first()
    # The agent copies the right numbers (from a leak, a guess, another run) and implements nothing.
    fake_llm.script([FakeTurn(text="I already know the results.", tool_calls=[("final_answer", {"answer": gold_answer(attempt)})])])

    assert attempt_execute(attempt_id=attempt.pk) == ClaimOutcome.DONE

    attempt.refresh_from_db()
    assert attempt.status == Attempt.DONE and attempt.exit_status == "submitted"
    assert attempt.reported_passed is True  # the answer alone would pass...
    assert attempt.reexecution_passed is False  # ...but the code does not produce it
    assert attempt.mismatch is True and attempt.passed is False
    assert attempt.failure_label == Attempt.WRONG_ANSWER
    assert "re-executed code does not produce" in attempt.failure_detail
    assert attempt.final_patch == ""
    assert "NotImplementedError" in attempt.reexecution_output
    assert "exited with status" in attempt.reexecution_error
    assert attempt.reexecution_score["experiments"][0]["numbers"][0]["reason"] == "missing"
    progress = run_progress(run=run)
    assert (progress.passed, progress.mismatches) == (0, 1)


@transactional
def test_a_missing_api_key_is_a_provider_error_not_retried_and_not_the_models(tiny_suite, monkeypatch):
    run = run_create(suite=tiny_suite, agent="react", model="openai:gpt-4o", n_values=[1], enqueue=False)
    run_execute_sync(run=run)

    for attempt in run.attempts.all():
        assert attempt.status == Attempt.ERROR and attempt.failure_label == Attempt.MODEL_PROVIDER
        assert "OPENAI_API_KEY" in attempt.failure_detail
        assert (attempt.tries, attempt.infra_failures) == (1, 0)  # not retried automatically
        assert attempt.passed is False
    assert run_progress(run=run).status == "failed"
    # Retrying failed attempts is the way to rerun them once the key is configured.
    assert run_retry_failed(run=run, enqueue=False) == 3
    assert set(run.attempts.values_list("status", flat=True)) == {Attempt.QUEUED}


@transactional
def test_provider_errors_during_the_run_are_labelled_model_provider(tiny_suite, fake_llm):
    run = _react_run(tiny_suite, fake_llm)
    attempt = run.attempts.order_by("pk").first()
    fake_llm.script([FakeError(status=401, times=10)])

    attempt_execute(attempt_id=attempt.pk, requeue=False)

    attempt.refresh_from_db()
    assert (attempt.status, attempt.exit_status, attempt.failure_label) == (Attempt.ERROR, "model_error", Attempt.MODEL_PROVIDER)
    assert attempt.reexecution_passed is None  # not scored as the model's result


@transactional
def test_budget_exhausted_and_no_answer_labels(tiny_suite, fake_llm):
    run = _react_run(tiny_suite, fake_llm, max_steps=1)
    attempt = run.attempts.order_by("pk").first()
    fake_llm.script([FakeTurn(text="Look around.", tool_calls=[("list_files", {"path": "."})])])

    attempt_execute(attempt_id=attempt.pk, requeue=False)

    attempt.refresh_from_db()
    assert (attempt.status, attempt.exit_status, attempt.failure_label) == (Attempt.DONE, "step_limit", Attempt.BUDGET_EXHAUSTED)
    assert attempt.reported_passed is False and attempt.reexecution_passed is False and attempt.mismatch is False
    assert (attempt.input_tokens, attempt.output_tokens) == (10, 5)


@transactional
def test_the_reexecution_workspace_is_built_fresh_while_the_agent_works(tiny_suite, tmp_path, monkeypatch):
    """Built in the background during the agent's run: masked, untouched by the agent, and what the
    re-execution then patches (the gold bodies the agent wrote pass)."""
    gate = tmp_path / "gate"
    gate.touch()
    monkeypatch.setenv(GATE_ENV, str(gate))  # gated_gold waits at it before writing anything
    run = run_create(suite=tiny_suite, agent="gated_gold", n_values=[1], sample_cap=1, enqueue=False)
    attempt = run.attempts.get()
    outcomes = []

    def execute():
        try:
            outcomes.append(attempt_execute(attempt_id=attempt.pk, requeue=False))
        finally:
            connection.close()

    thread = threading.Thread(target=execute)
    thread.start()
    try:
        built = attempt_reexecution_dir(attempt.pk, 1) / "code" / "stats.py"
        masked = wait_for(lambda: built.is_file() and built.read_text(), message="the re-execution workspace")
        assert "NotImplementedError" in masked
        assert masked == (attempt_workspace_dir(attempt.pk, 1) / "code" / "stats.py").read_text()
    finally:
        gate.unlink()
        thread.join(timeout=120)
    attempt.refresh_from_db()
    assert outcomes == [ClaimOutcome.DONE] and attempt.passed and attempt.reexecution_passed
    assert not attempt_reexecution_dir(attempt.pk, 1).exists()  # removed with the attempt's other directories


@pytest.mark.django_db
def test_a_claimed_attempt_reads_its_task_in_two_queries_with_the_suites_current_policy(tiny_suite, django_assert_num_queries):
    """The claim loads the sample with its paper and suite; the task adds the masked functions and the
    experiments, nothing joined, each experiment carrying the suite as the claim read it."""
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1], sample_cap=1, enqueue=False)
    Suite.objects.filter(pk=tiny_suite.pk).update(unstable_policy=Suite.UnstablePolicy.EXCLUDE)  # after the run's suite was read
    attempt = claim(RUN_ATTEMPT, attempt_id=run.attempts.get().pk)

    with django_assert_num_queries(2) as queries:
        task = sample_task(sample=attempt.sample, context=run.context)
        policies = {experiment.paper.suite.unstable_policy for experiment in task.experiments}

    assert not [query["sql"] for query in queries.captured_queries if '"runs_paper"' in query["sql"]]  # nothing joined
    assert policies == {Suite.UnstablePolicy.EXCLUDE}
    assert [experiment.pk for experiment in task.experiments] == [
        experiment.pk for experiment in sample_experiments(sample=Sample.objects.get(pk=attempt.sample_id))
    ]
    assert [function.name for function in task.spec.masked] == list(
        attempt.sample.functions.order_by("func_id").values_list("name", flat=True)
    )



@transactional
def test_a_run_queues_the_attempts_with_the_most_experiments_first(builtin, redis_queue):
    """Workers that take the longest attempts first end a run on short ones, together; in the suite's
    order the built-in suite's last paper (7 experiments for some samples) would come last."""
    run = run_create(suite=builtin, agent="gold", n_values=[1], attempts_per_sample=2)

    attempts = {attempt.pk: attempt for attempt in run.attempts.select_related("sample")}
    queued = [attempts[int(job_id.split("-attempt-")[1].split("-")[0])] for job_id in redis_queue.job_ids]
    counts = [len(sample_experiments(sample=attempt.sample)) for attempt in queued]

    assert sorted(queued, key=lambda attempt: attempt.pk) == sorted(attempts.values(), key=lambda attempt: attempt.pk)
    assert len(set(counts)) > 1 and counts == sorted(counts, reverse=True)
    by_sample = [attempt.sample_id for attempt in queued]
    assert all(by_sample[i] == by_sample[i + 1] for i in range(0, len(by_sample), 2))  # a sample's k attempts together

@transactional
def test_concurrent_deliveries_of_one_attempt_execute_it_once(tiny_suite):
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1], enqueue=False)
    attempt = run.attempts.order_by("pk").first()
    outcomes = []
    start = threading.Barrier(3)

    def deliver():
        try:
            start.wait()
            outcomes.append(attempt_execute(attempt_id=attempt.pk, requeue=False))
        finally:
            connection.close()

    threads = [threading.Thread(target=deliver) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    assert sorted(outcomes) == [ClaimOutcome.DONE, ClaimOutcome.SKIPPED, ClaimOutcome.SKIPPED]
    attempt.refresh_from_db()
    assert attempt.passed and attempt.tries == 1 and len(trajectory_files(attempt)) == 1
    # Once done, a late delivery is a no-op as well.
    assert attempt_execute(attempt_id=attempt.pk) == ClaimOutcome.SKIPPED


@transactional
def test_infrastructure_failures_in_process_are_bounded(tiny_suite, settings):
    settings.SANDBOX_IMAGE = "autoexperiment-missing:test"
    settings.ATTEMPT_MAX_INFRA_RETRIES = 1
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1], sandbox_backend="docker", enqueue=False)
    run_execute_sync(run=run)
    for attempt in run.attempts.all():
        assert (attempt.status, attempt.failure_label, attempt.tries, attempt.infra_failures) == (
            Attempt.ERROR, Attempt.INFRASTRUCTURE, 2, 2,
        )


# --- pure functions ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("exit_status", "raw", "parsed", "passed", "label"),
    [
        ("submitted", '{"a": 1}', True, True, ""),
        ("submitted", '{"a": 1}', True, False, Attempt.WRONG_ANSWER),
        ("submitted", "the loss is low", False, False, Attempt.UNPARSEABLE_ANSWER),
        ("submitted", None, False, False, Attempt.NO_ANSWER),
        ("submitted", "  ", False, False, Attempt.NO_ANSWER),
        ("step_limit", None, False, False, Attempt.BUDGET_EXHAUSTED),
        ("time_limit", None, False, False, Attempt.BUDGET_EXHAUSTED),
        ("cost_limit", None, False, False, Attempt.BUDGET_EXHAUSTED),
        ("model_error", None, False, False, Attempt.MODEL_PROVIDER),
        ("sandbox_error", '{"a": 1}', True, False, Attempt.INFRASTRUCTURE),
        ("harness_error", None, False, False, Attempt.INFRASTRUCTURE),
    ],
)
def test_failure_labels(exit_status, raw, parsed, passed, label):
    assert failure_label(exit_status=exit_status, final_answer_raw=raw, answer_parsed=parsed, passed=passed) == label


def test_json_safe_makes_scores_and_trajectories_storable():
    value = {"a": float("nan"), "b": [float("inf"), -float("inf"), "x\x00y"], 3: {"c": 1.5}}
    assert json_safe(value) == {"a": "NaN", "b": ["Infinity", "-Infinity", "xy"], "3": {"c": 1.5}}
    json.dumps(json_safe(value), allow_nan=False)


def test_json_safe_bounds_depth_and_drops_what_postgres_refuses():
    deep: list = []
    for _ in range(5000):  # a model's tool arguments can nest this deep
        deep = [deep]
    stored = json_safe({"args": deep, "name": "bad\udcffname", "raw": b"x", "set": {1}})
    text = json.dumps(stored, allow_nan=False)
    assert "nested deeper than 100 levels" in text and "\\udcff" not in text
    assert stored["name"] == "bad\ufffdname" and stored["raw"] == "b'x'"


def test_printed_json_nested_too_deeply_is_no_result():
    from runs.benchmark.execution import printed_result

    assert printed_result("{" + '"a": ' * 1 + "[" * 100_000 + "]" * 100_000 + "}\n") is None
    assert printed_result('{"x": 1}\n' + "[" * 100_000) == {"x": 1}


MASKED_MODULE = 'def f(x):\n    """Doubles x."""\n    raise NotImplementedError\n\n\ny = 2\n'
IMPLEMENTED = MASKED_MODULE.replace("    raise NotImplementedError\n", "    return 2 * x\n")


def _workspace(tmp_path: Path) -> Path:
    """A built workspace in miniature: code/pkg/mod.py with the masked function f."""
    (tmp_path / "code" / "pkg").mkdir(parents=True)
    (tmp_path / "code" / "pkg" / "mod.py").write_text(MASKED_MODULE)
    (tmp_path / "code" / "run.py").write_text("-- not a header\nprint('{}')\n")
    (tmp_path / "TASK.md").write_text("task\n")
    (tmp_path / "task.json").write_text(json.dumps({"missing_functions": [{"file": "code/pkg/mod.py", "name": "f", "line": 1}]}))
    return tmp_path


def test_a_final_patch_keeps_only_the_masked_functions(tmp_path):
    workspace = _workspace(tmp_path)
    run_py = (workspace / "code/run.py").read_text()
    patch = (
        unified_diff("code/pkg/mod.py", MASKED_MODULE, IMPLEMENTED)
        # A removed line "-- not a header" appears as "--- not a header" in the hunk: not a file header.
        + unified_diff("code/run.py", run_py, "print('{\"loss\": 0.1}')\n")
        + unified_diff("code/new.py", None, "z = 1\n")
    )
    error, out_of_scope = scoped_final_code(patch=patch, workspace=workspace)
    assert error is None
    assert (workspace / "code/pkg/mod.py").read_text() == IMPLEMENTED
    assert (workspace / "code/run.py").read_text() == run_py  # the experiment script is not the agent's to edit
    assert not (workspace / "code/new.py").exists()
    assert sorted(edit.path for edit in out_of_scope) == ["code/new.py", "code/run.py"]


def test_a_deleted_masked_file_keeps_its_stubs(tmp_path):
    workspace = _workspace(tmp_path)
    patch = unified_diff("code/pkg/mod.py", MASKED_MODULE, None)
    error, out_of_scope = scoped_final_code(patch=patch, workspace=workspace)
    assert error is None and [edit.path for edit in out_of_scope] == ["code/pkg/mod.py"]
    assert (workspace / "code/pkg/mod.py").read_text() == MASKED_MODULE


@pytest.mark.parametrize(
    "target",
    ["TASK.md", "code/../TASK.md", "/etc/passwd", "other/file.py"],
)
def test_a_patch_outside_code_is_refused(tmp_path, target):
    workspace = _workspace(tmp_path)
    patch = f"--- a/{target}\n+++ b/{target}\n@@ -1 +1 @@\n-task\n+pwned\n".replace("a//", "/").replace("b//", "/")
    error, _ = scoped_final_code(patch=patch, workspace=workspace)
    assert error and error.startswith("the final patch is refused: line 1")
    assert (workspace / "TASK.md").read_text() == "task\n"


def test_a_patch_through_a_symlink_writes_nothing(tmp_path):
    workspace = _workspace(tmp_path / "ws")
    outside = tmp_path / "outside"
    outside.mkdir()
    (workspace / "code" / "link").symlink_to(outside)
    patch = unified_diff("code/link/evil.py", None, "x = 1\n")
    error, out_of_scope = scoped_final_code(patch=patch, workspace=workspace)
    assert error is None and [edit.path for edit in out_of_scope] == ["code/link/evil.py"]
    assert list(outside.iterdir()) == []


def test_a_patch_that_does_not_apply_is_reported(tmp_path):
    workspace = _workspace(tmp_path)
    patch = unified_diff("code/pkg/mod.py", "something else entirely\n", "x = 2\n")
    error, _ = scoped_final_code(patch=patch, workspace=workspace)
    assert error.startswith("the final patch does not apply to code/pkg/mod.py")


def test_binary_changes_are_refused(tmp_path):
    workspace = _workspace(tmp_path)
    error, _ = scoped_final_code(patch="Binary files a/code/data.bin and b/code/data.bin differ\n", workspace=workspace)
    assert error and "binary" in error.lower()


@pytest.mark.parametrize("backend", ["bubblewrap", "docker"])
def test_code_removed_by_an_earlier_experiment_fails_the_next_one_not_the_sandbox(tmp_path, backend):
    from runs.benchmark.execution import run_experiment
    from runs.benchmark.workspace import ExperimentSpec
    from sandbox import open_sandbox
    from tests.support import require_backend

    require_backend(backend)
    (tmp_path / "code").mkdir()
    vandal = ExperimentSpec(1, "removes its own directory", "mv /workspace/code /workspace/gone; exit 3", {}, 30)
    next_one = ExperimentSpec(2, "prints a result", "echo '{\"x\": 1}'", {}, 30)
    with open_sandbox(backend, tmp_path, name=f"test-vandal-{tmp_path.name}") as box:
        first, second = run_experiment(box, vandal), run_experiment(box, next_one)
    assert first.exit_code == 3 and first.error == "exited with status 3"
    assert second.result is None and "code/ is no longer a directory" in second.error


class SeededNoopAgent(NoopAgent):
    """noop, declaring that it takes a seed per attempt as mutant does: the harness goes by what an
    agent declares, not by its name."""

    name = "seeded_noop"
    seeded_per_attempt = True

    def __init__(self, *, seed: int = 0, **settings):
        super().__init__(**settings)
        self.seed = seed


def test_the_harness_gives_an_agent_what_it_declares(tiny_suite, monkeypatch):
    monkeypatch.setitem(AGENTS, "seeded_noop", SeededNoopAgent)
    run = run_create(suite=tiny_suite, agent="seeded_noop", n_values=[1], attempts_per_sample=2, sample_seed=7, max_seconds=60,
                     enqueue=False)
    attempts = list(run.attempts.filter(sample=run.attempts.first().sample).order_by("index"))
    agents = [attempt_agent(attempt, sample_task(sample=attempt.sample, context=run.context), {"missing_functions": []})
              for attempt in attempts]
    assert [agent.seed for agent in agents] == [7000, 7001]
    # The run's budgets it has settings for: noop has a time limit, neither steps nor cost.
    assert all(agent.config.max_seconds == 60 for agent in agents)
    with pytest.raises(InfrastructureFailure, match=r"^agent 'noop' could not be configured: no setting 'colour'; the settings "):
        construct_agent("noop", {"max_steps": 5, "colour": "blue"}, optional=BUDGET_SETTINGS)


def test_the_harness_reads_a_runs_settings_in_the_version_they_were_stored_in(tiny_suite, monkeypatch):
    from runs.agents import settings as agent_settings

    run = run_create(suite=tiny_suite, agent="noop", n_values=[1], agent_config={"command_timeout": 30}, enqueue=False)
    assert run.agent_config_version == agent_settings.AGENT_CONFIG_VERSION
    attempt = run.attempts.first()
    task = sample_task(sample=attempt.sample, context=run.context)
    # A made-up version 2 that renamed the setting: the run stored at version 1 still builds its agent.
    monkeypatch.setattr(agent_settings, "AGENT_CONFIG_VERSION", 2)
    monkeypatch.setattr(agent_settings, "_MIGRATIONS", {1: lambda old: {"command_timeout": old["command_timeout"] * 2}})
    assert attempt_agent(attempt, task, {"missing_functions": []}).config.command_timeout == 60
    # Settings stored by a newer version than the worker's are an infrastructure failure that says so.
    Run.objects.filter(pk=run.pk).update(agent_config_version=3)
    attempt = Attempt.objects.select_related("run").get(pk=attempt.pk)
    with pytest.raises(InfrastructureFailure, match=r"^agent 'noop' could not be configured: agent settings of version 3"):
        attempt_agent(attempt, task, {"missing_functions": []})


def test_a_try_that_ended_before_its_agent_ran_leaves_what_an_earlier_try_wrote():
    earlier = Attempt(status=Attempt.RUNNING, exit_status="time_limit", trajectory={"steps": []}, passed=False, mismatch=False)
    missing = NotPrepared("paper p: run manage.py build_environment")
    written = AttemptResult.not_prepared(missing).update_fields(earlier)
    assert written.keys() == {"status", "exit_message", "failure_label", "failure_detail", "finished_at", "timings",
                              "harness_seconds", "experiment_seconds", "tolerance_ratio", "outcome"}
    assert (written["status"], written["failure_label"], written["failure_detail"]) == (Attempt.ERROR, Attempt.NOT_PREPARED, str(missing))
    # A model that cannot be reached says how the agent's run would have ended, nothing of a verdict.
    written = AttemptResult.model_unavailable(ModelProviderFailure("no key")).update_fields(earlier)
    assert written["exit_status"] == "model_error" and "passed" not in written and "trajectory" not in written
