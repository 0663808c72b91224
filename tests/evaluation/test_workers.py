"""Runs on real RQ workers (burst mode, subprocesses), real Redis, real bubblewrap sandboxes.

Workers are separate processes, so these tests are transactional: every row they need is committed.
"""
import os
import signal
import time
from pathlib import Path

import pytest
from django.utils import timezone
from rq.job import Job

from leaderboard.rules import LeaderboardFilters
from leaderboard.selectors import leaderboard_get
from runs.agents.llm import Usage, cost
from runs.evaluation.claims import max_infra_retries
from runs.evaluation.kinds import RUN_ATTEMPT
from runs.evaluation.queue import deployment_meta, job_id_for
from runs.evaluation.recovery import attempts_recover
from runs.evaluation.selectors import run_progress
from runs.evaluation.services import run_cancel, run_create, run_resume, run_retry_failed
from runs.models import Attempt
from tests.evaluation.helpers import claimed_pid, gold_answer, statuses, trajectory_files, wait_for
from tests.fakes import FakeTurn
from tests.support import in_fresh_django

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def _assert_scored_and_passed(attempt: Attempt) -> None:
    assert attempt.status == Attempt.DONE, (attempt.pk, attempt.status, attempt.infra_history)
    assert attempt.exit_status == "submitted"
    assert attempt.reported_passed is True and attempt.reexecution_passed is True
    assert attempt.passed is True and attempt.mismatch is False and attempt.failure_label == ""
    assert attempt.reported_score["passed"] and attempt.reexecution_score["passed"]
    numbers = [n for e in attempt.reported_score["experiments"] for n in e["numbers"]]
    assert numbers and all(n["relative_error"] is not None for n in numbers)
    assert attempt.final_patch.startswith("--- a/code/")
    assert attempt.trajectory["header"]["exit_status"] == "submitted"
    assert attempt.experiment_seconds > 0 and attempt.harness_seconds is not None
    assert attempt.finished_at is not None and attempt.claimed_at is not None


def test_a_gold_run_completes_on_two_workers(tiny_suite, workers, workspace_root):
    """The machinery, on the tiny suite: both workers take attempts, each is scored and passed,
    reported and re-executed, and the leaderboard refreshed. That gold passes every built-in n=1
    sample is tests/agents/test_baselines.py's sweep's; that it does so through the harness on a
    sample of each built-in paper, tests/evaluation/test_run_eval.py's."""
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1])
    assert run.attempts.count() == 3

    workers.run(2)

    run.refresh_from_db()
    attempts = list(run.attempts.select_related("sample"))
    for attempt in attempts:
        _assert_scored_and_passed(attempt)
        assert attempt.tries == 1 and attempt.infra_failures == 0
        assert [p.name for p in trajectory_files(attempt)] == [f"attempt-{attempt.pk}-try-1.json"]
    progress = run_progress(run=run)
    assert (progress.status, progress.passed, progress.total, progress.remaining) == ("finished", 3, 3, 0)
    assert run.finished_at is not None
    # The leaderboard's numbers were brought up to date by the refresh jobs the attempts queued, which
    # the same workers took from the maintenance queue: nobody refreshed them by hand.
    [row] = leaderboard_get(filters=LeaderboardFilters()).rows
    assert (row.run_ids, row.by_n[1].pass1, row.by_n[1].samples, row.stale) == ([run.pk], 1.0, 3, False)
    assert row.date == run.finished_at
    # Workspaces are removed after each attempt; only the trajectories stay.
    assert sorted(p.name for p in workspace_root.iterdir()) == ["trajectories"]


def test_react_agent_through_the_fake_llm_on_a_worker(tiny_suite, workers, fake_llm):
    run = run_create(
        suite=tiny_suite,
        agent="react",
        model=f"openai-compatible:gpt-4o@{fake_llm.base_url_openai}",
        n_values=[1],
        max_steps=10,
    )
    # Each sample masks one function; the scripted model writes back the gold file, runs the
    # experiments and reports their numbers. Which sample a request is about is read from its task.
    plans = {}
    for attempt in run.attempts.select_related("sample__paper"):
        function = attempt.sample.functions.get()
        source = (Path(attempt.sample.paper.code_dir) / function.file).read_text()
        plans[f": `{function.name}`"] = (f"code/{function.file}", source, gold_answer(attempt))

    def reply(request):
        task = request["messages"][1]["content"]
        path, source, answer = next(plan for key, plan in plans.items() if key in task)
        turn = sum(1 for m in request["messages"] if m["role"] == "assistant")
        if turn == 0:
            return FakeTurn(text="Restore the function.", tool_calls=[("write_file", {"path": path, "content": source})])
        if turn == 1:
            return FakeTurn(text="Run the experiments.", tool_calls=[("command_line", {"command": "bash refsol.sh"})])
        return FakeTurn(text="Submit.", tool_calls=[("final_answer", {"answer": answer})])

    fake_llm.script([reply] * 9)
    workers.run(1)

    for attempt in run.attempts.all():
        _assert_scored_and_passed(attempt)
        assert len(attempt.trajectory["steps"]) == 3
        assert (attempt.input_tokens, attempt.output_tokens) == (30, 15)
        assert attempt.cost == pytest.approx(cost("gpt-4o", Usage(30, 15))) and attempt.cost > 0


def test_a_job_delivered_twice_is_executed_once(tiny_suite, workers, redis_queue):
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1])
    attempt = run.attempts.order_by("pk").first()
    job_id = job_id_for(attempt)
    # At-least-once delivery gone wrong three ways: the same job id pushed again, and two more jobs
    # for the same attempt (as a second enqueue after a lost acknowledgement would make).
    redis_queue.push_job_id(job_id)
    for duplicate in ("duplicate-a", "duplicate-b"):
        redis_queue.enqueue(RUN_ATTEMPT.job_function, attempt.pk, job_id=duplicate, meta=deployment_meta())

    workers.run(2)

    attempt.refresh_from_db()
    _assert_scored_and_passed(attempt)
    assert attempt.tries == 1  # claimed once
    assert len(trajectory_files(attempt)) == 1  # the agent ran once
    outcomes = sorted(
        result.return_value
        for job in (job_id, "duplicate-a", "duplicate-b")
        for result in Job.fetch(job, connection=redis_queue.connection).results()
    )
    assert outcomes.count("done") == 1
    assert set(outcomes) == {"done", "skipped"} and len(outcomes) >= 3
    assert run_progress(run=run).passed == 3


def _caught_mid_attempt(run):
    """The running attempt once its agent has saved a step (so the attempt is under way)."""

    def running():
        attempt = run.attempts.filter(status=Attempt.RUNNING).first()
        if attempt is None:
            return None
        files = trajectory_files(attempt)
        return attempt if files and '"steps": [\n  {' in files[-1].read_text() else None

    return wait_for(running, message="an attempt under way")


def test_worker_killed_mid_attempt_leaves_the_run_resumable(tiny_suite, workers, tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    run = run_create(suite=tiny_suite, agent="gated_gold", n_values=[1])
    worker = workers.start(EVAL_TEST_GATE=str(gate))
    victim = _caught_mid_attempt(run)

    # The machine is lost: worker and work horse die at once, nothing gets to record anything.
    os.kill(worker.pid, signal.SIGKILL)
    os.kill(claimed_pid(victim.claimed_by), signal.SIGKILL)
    worker.wait(timeout=30)
    gate.unlink()

    assert statuses(run) == {Attempt.RUNNING: 1, Attempt.QUEUED: 2}
    assert run_progress(run=run).status == "running"
    # On this host a dead process could be seen at once; a lost machine is known only by its
    # silence. Pretend the worker ran elsewhere: until its heartbeat is stale, it may be alive.
    Attempt.objects.filter(pk=victim.pk).update(claimed_by=f"lost-machine:{claimed_pid(victim.claimed_by)}")
    assert run_resume(run=run, stale_after=3600).recovered == 0
    wait_for(
        lambda: Attempt.objects.get(pk=victim.pk).heartbeat_at < timezone.now() - timezone.timedelta(seconds=3),
        timeout=30,
        message="a stale heartbeat",
    )
    report = run_resume(run=run, stale_after=3)
    assert (report.recovered, report.enqueued) == (1, 1)  # the other two still have their jobs
    victim.refresh_from_db()
    assert victim.status == Attempt.QUEUED and victim.infra_failures == 1
    assert "no heartbeat" in victim.infra_history[0]["reason"]
    assert victim.trajectory["header"]["exit_status"] == "running"  # the partial trajectory is kept
    assert len(victim.trajectory["steps"]) == 1

    workers.run(1)

    attempts = list(run.attempts.all())
    assert len(attempts) == 3 and len({(a.sample_id, a.index) for a in attempts}) == 3
    for attempt in attempts:
        _assert_scored_and_passed(attempt)
        assert attempt.tries == (2 if attempt.pk == victim.pk else 1)
    assert len(trajectory_files(victim)) == 2  # the dead try's file and the finished one
    progress = run_progress(run=run)
    assert (progress.status, progress.passed, progress.total) == ("finished", 3, 3)


def test_killed_work_horse_is_recovered_through_the_failed_registry(tiny_suite, workers, tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    run = run_create(suite=tiny_suite, agent="gated_gold", n_values=[1])
    worker = workers.start(EVAL_TEST_GATE=str(gate))
    victim = _caught_mid_attempt(run)

    # Only the work horse dies (OOM killer, a segfault); the worker reports the job failed and goes on.
    os.kill(claimed_pid(victim.claimed_by), signal.SIGKILL)
    gate.unlink()
    workers.wait(worker)
    assert statuses(run) == {Attempt.RUNNING: 1, Attempt.DONE: 2}

    recovered = attempts_recover(stale_after=3600)  # found by the registry, long before any heartbeat check
    assert [r.attempt_id for r in recovered] == [victim.pk]
    assert "failed registry" in recovered[0].reason and "terminated unexpectedly" in recovered[0].reason

    workers.run(1)  # the recovery enqueued the attempt's next try
    victim.refresh_from_db()
    _assert_scored_and_passed(victim)
    assert (victim.tries, victim.infra_failures) == (2, 1)
    assert run_progress(run=run).passed == 3


def test_cancel_stops_new_attempts_and_keeps_finished_ones(tiny_suite, workers, tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    run = run_create(suite=tiny_suite, agent="gated_gold", n_values=[1])
    worker = workers.start(EVAL_TEST_GATE=str(gate))
    running = _caught_mid_attempt(run)

    assert run_cancel(run=run) == 2
    gate.unlink()
    workers.wait(worker)

    running.refresh_from_db()
    _assert_scored_and_passed(running)  # the attempt under way finished and kept its result
    others = run.attempts.exclude(pk=running.pk)
    assert set(others.values_list("status", flat=True)) == {Attempt.CANCELLED}
    assert set(others.values_list("tries", flat=True)) == {0}  # never claimed
    assert all(not trajectory_files(attempt) for attempt in others)
    progress = run_progress(run=run)
    assert (progress.status, progress.passed, progress.cancelled) == ("cancelled", 1, 2)
    kept = (running.finished_at, running.tries, running.reported_score)

    report = run_resume(run=run)
    assert (report.uncancelled, report.enqueued) == (2, 2)
    workers.run(1)
    running.refresh_from_db()
    assert (running.finished_at, running.tries, running.reported_score) == kept
    assert run_progress(run=run).passed == 3


def test_infrastructure_failures_are_retried_then_labelled_not_counted(tiny_suite, workers, redis_queue):
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1], sandbox_backend="docker")
    workers.run(1, SANDBOX_IMAGE="autoexperiment-missing:test")  # the sandbox cannot open

    tries = max_infra_retries() + 1
    for attempt in run.attempts.all():
        assert attempt.status == Attempt.ERROR and attempt.failure_label == Attempt.INFRASTRUCTURE
        assert (attempt.tries, attempt.infra_failures) == (tries, tries)
        assert [entry["try"] for entry in attempt.infra_history] == list(range(1, tries + 1))
        assert all("sandbox could not be opened" in entry["reason"] for entry in attempt.infra_history)
        assert attempt.passed is False and attempt.reported_passed is None  # never the model's result
    progress = run_progress(run=run)
    assert (progress.status, progress.passed, progress.infrastructure_errors) == ("failed", 0, 3)

    assert run_retry_failed(run=run) == 3
    assert set(run.attempts.values_list("status", "infra_failures")) == {(Attempt.QUEUED, 0)}
    assert redis_queue.count == 3


def test_a_worker_sweeps_the_leftovers_of_dead_tries_when_it_starts(tiny_suite, workers, workspace_root, tmp_path):
    """What a killed worker left (a try's workspace full of agent debris, a bubblewrap mount point)
    is removed when a worker starts; what belongs to a running try is spared."""
    import tempfile

    from runs.evaluation.workdirs import attempt_reexecution_dir, attempt_sandbox_name, attempt_workspace_dir

    run = run_create(suite=tiny_suite, agent="gold", n_values=[1], enqueue=False)
    dead, alive = list(run.attempts.order_by("pk"))[:2]
    Attempt.objects.filter(pk=dead.pk).update(status=Attempt.DONE, tries=1)
    Attempt.objects.filter(pk=alive.pk).update(status=Attempt.RUNNING, tries=2, heartbeat_at=timezone.now())
    dead_workspace = attempt_workspace_dir(dead.pk, 1)
    (dead_workspace / "code" / "deep" / "deeper").mkdir(parents=True)
    os.mkfifo(dead_workspace / "code" / "fifo")
    (dead_workspace / "code" / "link").symlink_to(tmp_path)
    live_workspace = attempt_reexecution_dir(alive.pk, 2)
    live_workspace.mkdir()
    dead_mount = Path(tempfile.mkdtemp(prefix=f"autoexperiment-sandbox-{attempt_sandbox_name(dead.pk, 1)}-"))
    live_mount = Path(tempfile.mkdtemp(prefix=f"autoexperiment-sandbox-{attempt_sandbox_name(alive.pk, 2)}-"))
    # Another deployment's (same names, another database): never ours to sweep.
    foreign_mount = Path(tempfile.mkdtemp(prefix=f"autoexperiment-sandbox-0badc0de-{attempt_sandbox_name(dead.pk, 1).split('-', 1)[1]}-"))
    # Made a minute ago, all of them: what is spared is spared for being live or foreign, not for
    # being younger than the sweep's clock margin (a worker starts in less than that).
    made = time.time() - 60
    for directory in (dead_workspace, live_workspace, dead_mount, live_mount, foreign_mount):
        os.utime(directory, (made, made))
    try:
        workers.run(1)  # an empty queue: the worker starts, sweeps, and quits
        assert not dead_workspace.exists() and not dead_mount.exists()
        assert live_workspace.is_dir() and live_mount.is_dir() and foreign_mount.is_dir()
        assert tmp_path.is_dir()  # the link was removed, not followed
    finally:
        for directory in (dead_mount, live_mount, foreign_mount):
            if directory.exists():
                directory.rmdir()


def test_a_worker_imports_the_llm_sdk_a_job_needs_before_forking_its_horse(tiny_suite, redis_queue):
    gold = run_create(suite=tiny_suite, agent="gold", n_values=[1])
    react = run_create(suite=tiny_suite, agent="react", model="openai-compatible:gpt-4o@http://127.0.0.1:9/v1", n_values=[1])

    def preloads(run) -> set[tuple[str, ...]]:
        jobs = [Job.fetch(job_id_for(attempt), connection=redis_queue.connection) for attempt in run.attempts.all()]
        return {tuple(job.meta.get("preload", ())) for job in jobs}

    assert preloads(gold) == {()}  # a baseline needs no SDK, and its worker never loads one
    assert preloads(react) == {("runs.agents.llm.openai_chat",)}
    # What the worker does with it before forking (EvaluationWorker.execute_job), in a fresh
    # interpreter: the adapter and its SDK are imported; a module that is not an adapter is not.
    lines = in_fresh_django("""
import sys
from runs.evaluation.worker import preload
print(sorted(name for name in ("openai", "anthropic", "json.tool") if name in sys.modules))
preload(["json.tool", "runs.agents.llm.openai_chat"])
print(sorted(name for name in ("openai", "anthropic", "json.tool") if name in sys.modules))
""")
    assert lines[-2:] == ["[]", "['openai']"]


def test_a_worker_masks_and_scopes_an_example_before_forking_its_horses():
    """What masking and the scope rule do on their first use in a process (tokenize's expressions
    compiled, among others) is done once in the worker, inherited by every work horse; the example
    it uses goes through cleanly (a refused patch would be logged)."""
    lines = in_fresh_django("""
import io, logging, tokenize
log = io.StringIO()
logging.getLogger("runs.evaluation.worker").addHandler(logging.StreamHandler(log))
compiled = tokenize._compile.cache_info().currsize
import runs.evaluation.worker
print(tokenize._compile.cache_info().currsize > compiled, repr(log.getvalue()))
""")
    assert lines[-1] == "True ''"


def test_a_worker_leaving_ends_its_pubsub_thread_when_the_reply_to_unsubscribe_comes_first(redis_queue):
    """The worker's command channel is read by a thread that waits up to a minute for a message. The
    reply to UNSUBSCRIBE must end it even when the thread reads that reply before the worker goes on
    (here the worker is held back a moment after sending): else the worker waits on the thread."""
    from runs.evaluation.worker import EvaluationWorker

    worker = EvaluationWorker([redis_queue], connection=redis_queue.connection)
    worker.subscribe()
    send_unsubscribe = worker.pubsub.unsubscribe

    def unsubscribe_then_pause(*args):
        send_unsubscribe(*args)
        time.sleep(0.3)  # the thread reads the reply meanwhile

    worker.pubsub.unsubscribe = unsubscribe_then_pause
    worker.unsubscribe()

    assert not worker.pubsub_thread.is_alive()
