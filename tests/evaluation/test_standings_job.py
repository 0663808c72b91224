"""The leaderboard's refresh job on real RQ workers: queued once however many changes, taken by an
evaluation worker from the maintenance queue before any attempt (leaderboard.standings)."""
import pytest

from leaderboard.models import SystemStanding
from leaderboard.selectors import LeaderboardFilters, leaderboard_get
from leaderboard.standings import standings_refresh_schedule
from runs.evaluation.kinds import run_mark_finished
from runs.evaluation.queue import maintenance_queue
from runs.models import Attempt
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
