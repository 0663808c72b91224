"""Live attempts (runs.evaluation.live): a running attempt's steps reach the database while its agent
works, a try that lost its claim cannot write over the newer try's, and a worker killed mid-attempt
leaves its steps in the database even when its machine (and the trajectory file on it) is gone."""
import os
import signal

import pytest
from django.urls import reverse

from runs.agents.recorder import TrajectoryWriter
from runs.agents.trajectory import Header
from runs.evaluation.claims import Heartbeat, claim
from runs.evaluation.kinds import RUN_ATTEMPT
from runs.evaluation.recovery import attempts_heal
from runs.evaluation.services import run_create
from runs.models import Attempt
from tests.evaluation.helpers import claimed_pid, trajectory_files, wait_for

GATE_THOUGHT = "Wait at the test's gate."


def _thoughts(trajectory) -> list[str]:
    return [step["thought"] for step in (trajectory or {}).get("steps", [])]


def _streamed(run):
    """A running attempt of the run whose stored trajectory (not the file on the worker) holds a step."""
    for attempt in run.attempts.filter(status=Attempt.RUNNING):
        if _thoughts(attempt.trajectory):
            return attempt
    return None


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_running_attempts_steps_reach_the_database_and_outlive_its_killed_worker(tiny_suite, workers, redis_queue, tmp_path, client):
    gate = tmp_path / "gate"
    gate.touch()
    run = run_create(suite=tiny_suite, agent="gated_gold", n_values=[1], sample_cap=1)
    doomed = workers.start(EVAL_TEST_GATE=str(gate), ATTEMPT_LIVE_SECONDS="1")
    # The agent recorded its first step and waits at the gate: the step is in the database already,
    # and the replay's live endpoint counts it.
    victim = wait_for(lambda: _streamed(run), timeout=90, message="the running attempt's step in the database")
    assert _thoughts(victim.trajectory) == [GATE_THOUGHT]
    state = client.get(reverse("replay:live", args=[victim.pk])).json()
    assert state == {"status": "running", "live": True, "steps": 1, "tries": 1}

    # The worker and its work horse die at once, and the machine's disk with them.
    os.kill(doomed.pid, signal.SIGKILL)
    os.kill(claimed_pid(victim.claimed_by), signal.SIGKILL)
    doomed.wait(timeout=30)
    for path in trajectory_files(victim):
        path.unlink()
    gate.unlink()

    attempts_heal()
    victim.refresh_from_db()
    assert (victim.status, victim.tries, victim.infra_failures) == (Attempt.QUEUED, 1, 1)
    assert "no longer exists" in victim.infra_history[0]["reason"]
    assert _thoughts(victim.trajectory) == [GATE_THOUGHT]  # what it had streamed is kept


def _writer(path, sample_id: str) -> TrajectoryWriter:
    return TrajectoryWriter(path, Header(sample_id=sample_id, agent="gold", model=""))


def _step(writer: TrajectoryWriter, thought: str) -> None:
    writer.add_step(writer.new_step(thought=thought))


@pytest.mark.django_db
def test_a_try_that_lost_its_claim_cannot_write_over_the_newer_trys_steps(tiny_suite, tmp_path, django_assert_num_queries):
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1], sample_cap=1, enqueue=False)
    attempt = claim(RUN_ATTEMPT, attempt_id=run.attempts.get().pk)
    heartbeat = Heartbeat(RUN_ATTEMPT, attempt.pk, attempt.tries, interval=600)  # not started: written by hand here
    writer = _writer(tmp_path / "try-1.json", attempt.sample.sample_id)
    heartbeat.stream_trajectory(writer.path)
    _step(writer, "first")
    assert heartbeat.store_trajectory() is True
    assert _thoughts(Attempt.objects.get(pk=attempt.pk).trajectory) == ["first"]
    with django_assert_num_queries(0):  # nothing new in the file: nothing read, nothing written
        assert heartbeat.store_trajectory() is False

    # The try is taken for dead and another one claims the attempt and streams its own steps.
    Attempt.objects.filter(pk=attempt.pk).update(status=Attempt.QUEUED)
    newer = claim(RUN_ATTEMPT, attempt_id=attempt.pk)
    assert newer.tries == 2
    newer_writer = _writer(tmp_path / "try-2.json", attempt.sample.sample_id)
    newer_heartbeat = Heartbeat(RUN_ATTEMPT, newer.pk, newer.tries, interval=600)
    newer_heartbeat.stream_trajectory(newer_writer.path)
    _step(newer_writer, "newer try")
    assert newer_heartbeat.store_trajectory() is True

    _step(writer, "second, of the old try")  # the old try still runs somewhere
    assert heartbeat.store_trajectory() is False
    heartbeat.stream_end()
    assert _thoughts(Attempt.objects.get(pk=attempt.pk).trajectory) == ["newer try"]


@pytest.mark.django_db
def test_with_streaming_off_nothing_is_stored_before_the_end(tiny_suite, tmp_path, settings):
    settings.ATTEMPT_LIVE_SECONDS = 0
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1], sample_cap=1, enqueue=False)
    attempt = claim(RUN_ATTEMPT, attempt_id=run.attempts.get().pk)
    heartbeat = Heartbeat(RUN_ATTEMPT, attempt.pk, attempt.tries, interval=600)
    writer = _writer(tmp_path / "try-1.json", attempt.sample.sample_id)
    heartbeat.stream_trajectory(writer.path)
    _step(writer, "first")
    heartbeat.stream_end()
    assert Attempt.objects.get(pk=attempt.pk).trajectory is None
