"""Services that restart under a run in progress, with nobody doing anything: each run ends with
every attempt done exactly once.

Real supervised workers (the Procfile's `manage.py supervised_worker`, subprocesses), a Redis and a
Postgres of the test's own (tests.evaluation.throwaway) that are flushed, restarted with nothing
kept, or restarted with every connection dropped, a worker SIGKILLed during each fault, bubblewrap.
Short intervals (healing every second, a grace of a second for just-queued work, beats every
second); scripts/bench_heal.py measures the same faults with the defaults.
"""
import json
import os
import signal
import time

import psycopg
import pytest
from rq.job import JobStatus

from runs.evaluation.kinds import RUN_ATTEMPT
from runs.evaluation.queue import evaluation_queue, workers_listening
from runs.evaluation.services import run_create
from runs.models import Attempt
from tests.evaluation.helpers import claimed_pid, trajectory_files, wait_for
from tests.evaluation.throwaway import parent_pid
from tests.support import shared_database_url

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]

QUICK = {"ATTEMPT_RECOVER_INTERVAL_SECONDS": "1", "ATTEMPT_LOST_JOB_GRACE_SECONDS": "1", "ATTEMPT_HEARTBEAT_SECONDS": "1"}


def _completed_tries(attempt_id: int) -> int:
    """How many tries of an attempt ran to their end (their trajectory says when it ended): one, for
    an attempt done exactly once, whatever tries its dead workers left unfinished."""
    return sum(
        1 for path in trajectory_files(Attempt(pk=attempt_id))
        if json.loads(path.read_text())["header"].get("ended_at")
    )


def _under_way(attempt_id: int) -> bool:
    """Whether an attempt's latest try saved its agent's first step (the gated agent then waits)."""
    files = trajectory_files(Attempt(pk=attempt_id))
    return bool(files) and '"steps": [\n  {' in files[-1].read_text()


def _kill_worker_of(claimed_by: str) -> int:
    """SIGKILL the RQ worker whose work horse holds a claim (its supervisor starts another)."""
    worker = parent_pid(claimed_pid(claimed_by))
    os.kill(worker, signal.SIGKILL)
    return worker


def test_a_run_survives_redis_flushed_then_restarted_empty_with_a_worker_killed_during_each(
    tiny_suite, workers, tmp_path, throwaway_redis
):
    gate = tmp_path / "gate"
    gate.touch()
    run = run_create(suite=tiny_suite, agent="gated_gold", n_values=[1])
    env = {**QUICK, "REDIS_URL": throwaway_redis.url, "EVAL_TEST_GATE": str(gate)}
    workers.start_supervised(**env)
    workers.start_supervised(**env)

    def running(exclude=()):
        return list(run.attempts.filter(status=Attempt.RUNNING).exclude(pk__in=exclude).order_by("pk"))

    first, survivor = wait_for(lambda: len(running()) == 2 and running(), timeout=120, message="two attempts under way")
    [waiting] = run.attempts.filter(status=Attempt.QUEUED)

    # Redis flushed: the waiting attempt's job is gone; a worker dies with it.
    evaluation_queue().connection.flushall()
    _kill_worker_of(first.claimed_by)
    # Its supervisor ends its horse and starts a worker, which heals as it starts: the dead
    # worker's attempt and the one whose job was lost are queued again; it takes one of them.
    held = wait_for(lambda: running(exclude=[survivor.pk]), timeout=120, message="the restarted worker under way")[0]
    assert held.tries == 1 or held.pk == first.pk

    # Redis restarted, empty; the other worker dies while it is down.
    throwaway_redis.stop()
    _kill_worker_of(survivor.claimed_by)
    time.sleep(1)
    throwaway_redis.start()

    gate.unlink()
    wait_for(lambda: not run.attempts.filter(status__in=[Attempt.QUEUED, Attempt.RUNNING]).exists(), timeout=180,
             message=f"the run finished by itself\n{workers.logs()}")
    attempts = list(run.attempts.order_by("pk"))
    for attempt in attempts:
        assert (attempt.status, attempt.passed) == (Attempt.DONE, True), (attempt.pk, attempt.infra_history)
        assert _completed_tries(attempt.pk) == 1  # done exactly once
        assert attempt.infra_failures == attempt.tries - 1 and attempt.job_lost_at is None
    # The killed workers' attempts were tried again; the one whose job Redis lost ran once, on a job
    # that only the healing could have given it.
    assert sorted(a.tries for a in attempts if a.pk in (first.pk, survivor.pk)) == [2, 2]
    assert Attempt.objects.get(pk=waiting.pk).tries == 1
    # Both workers listen again, as /healthz counts them: the one that lived through the restart
    # registered itself again.
    assert wait_for(lambda: workers_listening(evaluation_queue())[0] == 2, timeout=30, message="two live workers")


def _attempts(url: str, run_id: int) -> dict[int, dict]:
    with psycopg.connect(url, autocommit=True) as connection:
        rows = connection.execute(
            "SELECT id, status, tries, infra_failures, passed, claimed_by, infra_history FROM runs_attempt WHERE run_id = %s",
            (run_id,),
        ).fetchall()
    fields = ("id", "status", "tries", "infra_failures", "passed", "claimed_by", "infra_history")
    return {row[0]: dict(zip(fields, row)) for row in rows}


def test_a_run_survives_postgres_restarted_with_a_worker_killed_meanwhile(tiny_suite, workers, redis_queue, tmp_path, throwaway_postgres):
    gate = tmp_path / "gate"
    gate.touch()
    run = run_create(suite=tiny_suite, agent="gated_gold", n_values=[1])  # its jobs on the tests' Redis
    database = throwaway_postgres.copy_database(shared_database_url(), "restarted")
    env = {**QUICK, "DATABASE_URL": database, "EVAL_TEST_GATE": str(gate)}
    workers.start_supervised(**env)
    workers.start_supervised(**env)

    def at_the_gate():
        """The running attempts whose agent saved its first step: done with the database until the gate opens."""
        running = [a for a in _attempts(database, run.pk).values() if a["status"] == Attempt.RUNNING]
        return sorted((a for a in running if _under_way(a["id"])), key=lambda a: a["id"])

    doomed, survivor = wait_for(lambda: len(at_the_gate()) == 2 and at_the_gate(), timeout=120, message="two attempts under way")

    throwaway_postgres.stop()  # every connection dropped
    _kill_worker_of(doomed["claimed_by"])
    time.sleep(2)
    throwaway_postgres.start()

    gate.unlink()
    wait_for(lambda: all(a["status"] == Attempt.DONE for a in _attempts(database, run.pk).values()), timeout=180,
             message=f"the run finished by itself\n{workers.logs()}")
    attempts = _attempts(database, run.pk)
    for attempt in attempts.values():
        assert attempt["passed"] is True
        assert _completed_tries(attempt["id"]) == 1, (attempt, workers.logs())  # done exactly once
        assert attempt["infra_failures"] == attempt["tries"] - 1
    assert attempts[doomed["id"]]["tries"] == 2
    # The attempt whose worker lived through the restart wrote its result on a new connection.
    assert attempts[survivor["id"]]["tries"] == 1, attempts[survivor["id"]]["infra_history"]
    assert redis_queue.fetch_job(RUN_ATTEMPT.job_id(survivor["id"], 0)).get_status() == JobStatus.FINISHED
