"""Runs heal with nobody pressing anything: real RQ workers (subprocesses), Redis, Postgres, bubblewrap.

Long-running evaluation workers recover dead workers' attempts and record jobs that failed before
claiming theirs, on their own schedule (runs.evaluation.worker); infrastructure retries wait, doubling.
Transactional: the workers only see committed rows.
"""
import difflib
import html
import os
import re
import signal
import socket
import subprocess
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from django.urls import reverse
from django.utils import timezone
from rq import Worker
from rq.job import JobStatus
from rq.results import Result

from runs.benchmark.masking import function_body_source, replace_function_body
from runs.benchmark.workspace import CODE_DIR
from runs.evaluation.claims import ClaimOutcome, process_gone
from runs.evaluation.harness import attempt_execute
from runs.evaluation.kinds import RUN_ATTEMPT
from runs.evaluation.queue import job_id_for
from runs.evaluation.recovery import attempts_heal
from runs.evaluation.selectors import run_progress, run_waiting_notes
from runs.evaluation.services import run_create
from runs.evaluation.workdirs import attempt_reexecution_dir
from runs.models import Attempt, Run, Sample, Submission
from runs.submissions.reexecution import REEXECUTION
from runs.submissions.services import submission_create
from runs.suites.services import workspace_build
from sandbox.base import WORKSPACE_MOUNT
from tests.evaluation.helpers import claimed_pid, trajectory_files, wait_for
from tests.replay.factories import make_user
from tests.submissions.helpers import OTHER_SAMPLE, SAMPLE, jsonl, record
from tests.submissions.helpers import gold_answer as gold_numbers

pytestmark = pytest.mark.django_db(transaction=True)
# RQ's scheduler keeps times in whole seconds: a job may be put on the queue up to a second early.
SCHEDULER_RESOLUTION = timedelta(seconds=1)


def _page(client, run) -> str:
    """The run page's text, entities decoded."""
    response = client.get(reverse("runs:run_detail", args=[run.pk]))
    assert response.status_code == 200
    return html.unescape(response.content.decode())


def _under_way(run, *, exclude=()):
    """A running attempt of the run whose agent has saved a step."""
    for attempt in run.attempts.filter(status=Attempt.RUNNING).exclude(pk__in=exclude):
        files = trajectory_files(attempt)
        if files and '"steps": [\n  {' in files[-1].read_text():
            return attempt
    return None


@pytest.mark.slow
def test_a_worker_killed_mid_attempt_is_recovered_and_finished_once_with_no_action(tiny_suite, workers, redis_queue, tmp_path):
    gate = tmp_path / "gate"
    gate.touch()
    run = run_create(suite=tiny_suite, agent="gated_gold", n_values=[1], sample_cap=1)
    doomed = workers.start(EVAL_TEST_GATE=str(gate))
    victim = wait_for(lambda: _under_way(run), message="the attempt under way")
    # A long-running worker that heals every second (ATTEMPT_STALE_SECONDS stays at its 60: on
    # this host a dead process is seen at once) and retries after 2 s. Once it is idle, its round
    # at start is over: what follows is its schedule's doing.
    healer = workers.start(burst=False, ATTEMPT_RECOVER_INTERVAL_SECONDS="1", ATTEMPT_RETRY_BACKOFF_SECONDS="2")
    wait_for(lambda: any(w.get_state() == "idle" for w in Worker.all(queue=redis_queue)), message="the healer idle")
    assert Attempt.objects.get(pk=victim.pk).status == Attempt.RUNNING  # alive, so left alone at start

    # Worker and work horse die at once; nobody records anything or presses anything.
    os.kill(doomed.pid, signal.SIGKILL)
    os.kill(claimed_pid(victim.claimed_by), signal.SIGKILL)
    doomed.wait(timeout=30)
    gate.unlink()

    wait_for(lambda: run_progress(run=run).status == "finished", timeout=90, message="the run finished by itself")
    healer.terminate()  # a warm shutdown: its upkeep thread stops with it
    assert workers.wait(healer, timeout=30) == 0

    victim.refresh_from_db()
    assert (victim.status, victim.passed, victim.tries, victim.infra_failures) == (Attempt.DONE, True, 2, 1)
    [failure] = victim.infra_history
    assert "no longer exists" in failure["reason"]
    retry_at = datetime.fromisoformat(failure["retry_at"])
    assert retry_at > datetime.fromisoformat(failure["at"]) and victim.claimed_at >= retry_at - SCHEDULER_RESOLUTION
    # Finished once: the second try's job ran once and succeeded, no third try was ever queued,
    # and the attempt's row holds one result.
    assert [result.return_value for result in redis_queue.fetch_job(RUN_ATTEMPT.job_id(victim.pk, 1)).results()] == ["done"]
    assert redis_queue.fetch_job(f"attempt-{victim.pk}-try-3") is None
    assert run.attempts.count() == 1 and victim.reported_score["passed"] and victim.reexecution_score["passed"]
    assert [p.name for p in trajectory_files(victim)] == [f"attempt-{victim.pk}-try-{n}.json" for n in (1, 2)]


@pytest.mark.slow
def test_a_work_horse_whose_worker_was_killed_records_it_and_stops(tiny_suite, workers, redis_queue, tmp_path):
    """A horse runs in a process group of its own: nothing kills it with its worker. Left alone it
    would keep its attempt's heartbeat fresh without making progress (and hold its worker's log
    pipe); it notices at its next beat, records the try's failure and exits."""
    gate = tmp_path / "gate"
    gate.touch()  # never opened: the horse must stop by itself
    run = run_create(suite=tiny_suite, agent="gated_gold", n_values=[1], sample_cap=1)
    doomed = workers.start(EVAL_TEST_GATE=str(gate), ATTEMPT_HEARTBEAT_SECONDS="1")
    victim = wait_for(lambda: _under_way(run), message="the attempt under way")
    horse = claimed_pid(victim.claimed_by)

    os.kill(doomed.pid, signal.SIGKILL)  # the worker alone
    doomed.wait(timeout=30)

    wait_for(lambda: process_gone(victim.claimed_by), timeout=30, message="the orphaned horse gone")
    victim.refresh_from_db()
    assert (victim.status, victim.tries, victim.infra_failures, victim.heartbeat_at) == (Attempt.QUEUED, 1, 1, None)
    [failure] = victim.infra_history
    assert failure["reason"].startswith(f"worker died: its work horse {victim.claimed_by} outlived its worker")
    assert redis_queue.fetch_job(RUN_ATTEMPT.job_id(victim.pk, 1)) is not None  # queued again, for any worker
    assert horse != doomed.pid


@pytest.mark.slow
def test_a_worker_that_cannot_reach_the_database_leaves_a_visible_reason(tiny_suite, workers, redis_queue, admin_client):
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1], sample_cap=1)
    url = workers.env()["DATABASE_URL"].rsplit("/", 1)[0] + "/heal_no_such_database"
    workers.run(1, DATABASE_URL=url)  # fails every job before claiming its attempt, and quits

    assert set(run.attempts.values_list("status", "tries", "infra_failures")) == {(Attempt.QUEUED, 0, 0)}
    # Nothing could be written, yet the run page (which reaches the database) says why.
    page = _page(admin_client, run)
    assert page.count('data-waiting="could not start"') == 1
    assert 'database "heal_no_such_database" does not exist' in page

    # A worker that reaches the database records the failures as it starts and retries them after
    # the back-off; being a burst worker, it waits for them rather than quit.
    healthy = workers.start(ATTEMPT_RETRY_BACKOFF_SECONDS="3")
    wait_for(lambda: not run.attempts.filter(infra_failures=0).exists(), timeout=60, message="the failures recorded")
    page = _page(admin_client, run)
    assert 'data-waiting="retrying"' in page and 'does not exist' in page
    workers.wait(healthy, timeout=60)

    for attempt in run.attempts.all():
        assert (attempt.status, attempt.passed, attempt.tries, attempt.infra_failures) == (Attempt.DONE, True, 1, 1)
        [entry] = attempt.infra_history
        assert entry["claimed"] is False and entry["job_id"] == RUN_ATTEMPT.job_id(attempt.pk, 0)
        assert 'database "heal_no_such_database" does not exist' in entry["reason"]
        assert attempt.claimed_at >= datetime.fromisoformat(entry["retry_at"]) - SCHEDULER_RESOLUTION  # not at once
    assert run_waiting_notes(run=run) == {}


def test_infrastructure_retries_are_scheduled_later_each_time(tiny_suite, redis_queue, settings, admin_client):
    settings.ATTEMPT_RETRY_BACKOFF_SECONDS = 20
    settings.ATTEMPT_RETRY_BACKOFF_MAX_SECONDS = 30
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1], enqueue=False)
    Run.objects.filter(pk=run.pk).update(agent="unregistered")  # every try fails in the harness
    attempt = run.attempts.order_by("pk").first()

    for delay in (20, 30):  # 20 s, then 40 s capped at 30 s
        started = timezone.now()
        assert attempt_execute(attempt_id=attempt.pk, job_id="in-test") == ClaimOutcome.REQUEUED
        attempt.refresh_from_db()
        job = redis_queue.fetch_job(job_id_for(attempt))
        assert job.get_status() == JobStatus.SCHEDULED and redis_queue.count == 0  # nothing to run at once
        waits = (redis_queue.scheduled_job_registry.get_scheduled_time(job) - started).total_seconds()
        assert delay - 1 <= waits <= delay + 1
        note = run_waiting_notes(run=run)[attempt.pk]
        assert note.label == "retrying" and delay - 5 < note.retry_in <= delay
        assert "is not registered" in note.reason
        shown = re.search(r'data-waiting="retrying">retrying in (\d+\.\d) s<', _page(admin_client, run))
        assert shown and delay - 5 < float(shown[1]) <= delay

    attempt_execute(attempt_id=attempt.pk, job_id="in-test")  # out of retries
    attempt.refresh_from_db()
    assert (attempt.status, attempt.failure_label) == (Attempt.ERROR, Attempt.INFRASTRUCTURE)
    assert run_waiting_notes(run=run) == {}



def test_reexecutions_of_submissions_heal_too(builtin_suite, redis_queue, settings):
    """A submission's re-execution whose worker died, and one whose job failed before claiming its
    attempt, are queued again after the back-off by a round of self-healing."""
    settings.ATTEMPT_RETRY_BACKOFF_SECONDS = 20
    uploader = make_user()
    data = jsonl(record(SAMPLE, 0), record(OTHER_SAMPLE, 0))
    submission = submission_create(data=data, filename="r.jsonl", uploader=uploader, reexecute=True)
    died, unstarted = submission.run.attempts.order_by("pk")
    assert sorted(redis_queue.job_ids) == sorted(REEXECUTION.job_id(a.pk, 0) for a in (died, unstarted))
    for job_id in redis_queue.job_ids:  # taken off the queue by workers
        redis_queue.remove(job_id)
    # One was claimed by a work horse that is gone now; the other's job failed before its claim.
    gone = subprocess.Popen(["true"])
    gone.wait()
    Attempt.objects.filter(pk=died.pk).update(
        tries=1, heartbeat_at=timezone.now(), claimed_by=f"{socket.gethostname()}:{gone.pid}", job_id=REEXECUTION.job_id(died.pk, 0)
    )
    failed_job = redis_queue.fetch_job(REEXECUTION.job_id(unstarted.pk, 0))
    # As RQ's worker records a failure (Worker.handle_job_failure).
    failed_job.set_status(JobStatus.FAILED)
    Result.create_failure(failed_job, 600, "Traceback ...\nOperationalError: the database is gone", worker_name="far-away")
    redis_queue.failed_job_registry.add(failed_job, exc_string="OperationalError: the database is gone")

    report = attempts_heal()

    assert sorted(report.settled("reexecution")) == sorted([died.pk, unstarted.pk])
    died.refresh_from_db()
    unstarted.refresh_from_db()
    assert "no longer exists" in died.reexecution_error and "the database is gone" in unstarted.reexecution_error
    for attempt, job_id in ((died, REEXECUTION.job_id(died.pk, 1)), (unstarted, REEXECUTION.job_id(unstarted.pk, 0))):
        assert (attempt.infra_failures, attempt.heartbeat_at) == (1, None)
        job = redis_queue.fetch_job(job_id)
        assert job.get_status() == JobStatus.SCHEDULED
        waits = (redis_queue.scheduled_job_registry.get_scheduled_time(job) - timezone.now()).total_seconds()
        assert 15 < waits <= 20
    assert redis_queue.count == 0
    assert attempts_heal().settled("reexecution") == []  # settled once


def _gated_gold_patch(sample, scratch) -> str:
    """The gold patch of `sample`, each restored body holding its experiment on its first call until
    the test lets it go: it creates `paused` in the workspace's code/, then waits for `release`
    there, which the test writes through the try's re-execution directory on the host. A
    re-execution that stays under way until it is killed, without a timed pause, and still passes."""
    workspace = scratch / "gated-workspace"
    workspace_build(sample=sample, dest=workspace)
    gate = f"{WORKSPACE_MOUNT}/{CODE_DIR}"
    parts = []
    for function in sample.functions.order_by("func_id"):
        masked = (workspace / CODE_DIR / function.file).read_text(encoding="utf-8")
        body = function_body_source((Path(sample.paper.code_dir) / function.file).read_text(encoding="utf-8"),
                                    function.name, line_hint=function.line_hint)
        indent = body[: len(body) - len(body.lstrip())]
        # Once per experiment process, however often the function is called.
        pause = (
            f"{indent}globals().get('_released') or (open('{gate}/paused', 'w').close(), "
            f"[__import__('time').sleep(0.05) for _ in iter(lambda: __import__('os').path.exists('{gate}/release'), True)], "
            "globals().update(_released=True))\n"
        )
        restored = replace_function_body(masked, function.name, pause + body)
        parts.append("".join(difflib.unified_diff(
            masked.splitlines(keepends=True), restored.splitlines(keepends=True),
            fromfile=f"a/{CODE_DIR}/{function.file}", tofile=f"b/{CODE_DIR}/{function.file}",
        )))
    return "".join(parts)


@pytest.mark.slow
def test_a_worker_killed_during_a_submissions_reexecution_is_recovered_exactly_once(builtin_suite, workers, redis_queue, tmp_path):
    """A submission's re-execution goes through the same claim, heartbeat, fence and recovery as a
    run's attempt: its worker and work horse killed mid-re-execution, a long-running worker heals it
    on its schedule, re-executes it once more and the submission ends verified."""
    sample = Sample.objects.get(sample_id=SAMPLE)
    patch = _gated_gold_patch(sample, tmp_path)
    data = jsonl(record(SAMPLE, 0, final_answer=gold_numbers(sample), final_patch=patch))
    submission = submission_create(data=data, filename="slow.jsonl", uploader=make_user(), reexecute=True)
    [victim] = submission.run.attempts.all()

    doomed = workers.start()
    victim = wait_for(
        lambda: Attempt.objects.filter(pk=victim.pk, heartbeat_at__isnull=False).exclude(claimed_by="").first(),
        message="the re-execution under way",
    )
    healer = workers.start(burst=False, ATTEMPT_RECOVER_INTERVAL_SECONDS="1", ATTEMPT_RETRY_BACKOFF_SECONDS="2")
    wait_for(lambda: any(w.get_state() == "idle" for w in Worker.all(queue=redis_queue)), message="the healer idle")
    assert Attempt.objects.get(pk=victim.pk).heartbeat_at is not None  # alive, so left alone at start

    os.kill(doomed.pid, signal.SIGKILL)
    os.kill(claimed_pid(victim.claimed_by), signal.SIGKILL)
    doomed.wait(timeout=30)

    # The healer's second try: let its experiments go once they are held.
    second_try_code = attempt_reexecution_dir(victim.pk, 2, prefix="submission-") / CODE_DIR
    wait_for(lambda: (second_try_code / "paused").exists(), timeout=60, message="the second try's experiments held")
    (second_try_code / "release").touch()
    wait_for(lambda: Submission.objects.get(pk=submission.pk).status == Submission.Status.VERIFIED, timeout=120,
             message="the submission verified by itself")
    healer.terminate()
    assert workers.wait(healer, timeout=30) == 0

    victim.refresh_from_db()
    assert (victim.tries, victim.infra_failures, victim.heartbeat_at) == (2, 1, None)
    assert victim.reexecution_passed is True and victim.passed is True and victim.mismatch is False
    [failure] = victim.infra_history
    assert failure["kind"] == "reexecution" and "no longer exists" in failure["reason"] and failure["try"] == 1
    # Recovered once: the second try's job ran once and wrote the verdict; no third try was queued.
    assert [r.return_value for r in redis_queue.fetch_job(REEXECUTION.job_id(victim.pk, 1)).results()] == ["done"]
    assert redis_queue.fetch_job(f"reexecute-attempt-{victim.pk}-try-3") is None
