"""The leaderboard's refresh job on real RQ workers: queued once however many changes, taken by an
evaluation worker from the maintenance queue before any attempt (leaderboard.standings)."""
import pytest

from leaderboard.models import SystemStanding
from leaderboard.rules import LeaderboardFilters
from leaderboard.selectors import leaderboard_get
from leaderboard.standings import standings_refresh_schedule
from runs.evaluation.kinds import run_mark_finished
from runs.evaluation.queue import maintenance_queue, queue_named
from runs.evaluation.services import run_create
from runs.evaluation.worker import EvaluationWorker
from runs.models import Attempt
from tests.evaluation.helpers import statuses
from tests.leaderboard.factories import build_board_data

pytestmark = pytest.mark.django_db(transaction=True)


def claude():
    return next(row for row in leaderboard_get(filters=LeaderboardFilters()).rows if row.model == "anthropic:claude-3-5-sonnet")


def test_changes_queue_one_job_which_a_worker_runs(workers, redis_queue):
    data = build_board_data()  # system C: Pass@1 2/3 at n = 1
    maintenance = maintenance_queue()
    maintenance.empty()
    Attempt.objects.filter(run=data.run_c, sample=data.samples["s2"]).update(passed=True, reexecution_passed=True)
    for _ in range(3):  # three of the run's attempts settle while no worker is free
        run_mark_finished(run_id=data.run_c.pk)
    assert maintenance.count == 1 and redis_queue.count == 0  # coalesced, and never among the attempts' jobs
    assert claude().stale and claude().by_n[1].pass1 == pytest.approx(2 / 3)

    workers.run(1)
    assert maintenance.count == 0, workers.logs()
    assert not claude().stale and claude().by_n[1].pass1 == 1.0
    assert not SystemStanding.objects.filter(changes__gt=0, refreshed_changes=0).exists()
    # The job let go of its turn as it started: the next change queues the next one.
    assert standings_refresh_schedule() is True and maintenance.count == 1
    maintenance.empty()


# --- pacing: one refresh per interval while attempts wait (runs.evaluation.worker) --------------------


def _dequeued(worker) -> str:
    job, queue = worker.dequeue_job_and_maintain_ttl(None)
    return queue.name


def test_while_paced_waiting_attempts_go_before_the_next_maintenance_job(settings, redis_queue):
    settings.MAINTENANCE_INTERVAL_SECONDS = 60
    worker = EvaluationWorker([redis_queue], connection=redis_queue.connection)
    maintenance, transplant = maintenance_queue(), queue_named(settings.TRANSPLANT_QUEUE)
    for queue in (maintenance, redis_queue, transplant, maintenance, redis_queue, redis_queue):
        queue.enqueue("builtins.print")  # never run: only taken off the queues here

    assert _dequeued(worker) == settings.MAINTENANCE_QUEUE  # nothing taken lately: first
    # Paced now, for every worker of the queue: attempts first, yet the maintenance job before transplants.
    other = EvaluationWorker([redis_queue], connection=redis_queue.connection)
    assert [_dequeued(other), _dequeued(worker), _dequeued(other)] == [redis_queue.name] * 3
    assert _dequeued(worker) == settings.MAINTENANCE_QUEUE
    assert _dequeued(worker) == settings.TRANSPLANT_QUEUE
    assert 55 < redis_queue.connection.ttl(f"autoexperiment:paced:{maintenance.key}") <= 60


def test_unpaced_maintenance_jobs_always_go_first(settings, redis_queue):
    settings.MAINTENANCE_INTERVAL_SECONDS = 0
    worker = EvaluationWorker([redis_queue], connection=redis_queue.connection)
    maintenance = maintenance_queue()
    for queue in (redis_queue, maintenance, redis_queue, maintenance):
        queue.enqueue("builtins.print")
    taken = [_dequeued(worker) for _ in range(4)]
    assert taken == [settings.MAINTENANCE_QUEUE, settings.MAINTENANCE_QUEUE, redis_queue.name, redis_queue.name]


def test_a_busy_run_refreshes_once_per_interval_and_once_more_when_the_queue_empties(tiny_suite, workers, redis_queue):
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1], attempts_per_sample=2)
    assert run.attempts.count() == 6
    maintenance = maintenance_queue()

    # An interval longer than the run: the first refresh is taken at once, the rest of the run's
    # changes wait for the attempts and are coalesced into one job when the queue empties.
    workers.run(1, MAINTENANCE_INTERVAL_SECONDS="600")

    assert statuses(run) == {Attempt.DONE: 6}
    assert maintenance.finished_job_registry.count == 2, workers.logs()
    [row] = leaderboard_get(filters=LeaderboardFilters()).rows
    assert (row.run_ids, row.by_n[1].pass1, row.stale) == ([run.pk], 1.0, False)
