"""Deployments sharing one Redis database: each owns its queues, job ids and keys, and a worker never
runs another deployment's job. Real RQ workers (subprocesses), real Redis, real bubblewrap.

The other deployment's worker here even shares our database: the worst case, where taking one of
our jobs would visibly run one of our attempts."""
import pytest
from django.conf import settings
from rq import Queue
from rq.job import Job, JobStatus

from runs.evaluation.kinds import RUN_ATTEMPT
from runs.evaluation.queue import evaluation_queue
from runs.evaluation.services import run_create
from runs.models import Attempt
from tests.evaluation.helpers import statuses

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.slow]


def test_a_worker_of_another_deployment_on_our_redis_leaves_our_jobs_alone(tiny_suite, workers, redis_queue):
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1])
    attempts = list(run.attempts.all())
    ours = sorted(RUN_ATTEMPT.job_id(attempt.pk, 0) for attempt in attempts)
    assert sorted(redis_queue.job_ids) == ours
    assert all(job_id.startswith(f"{settings.DEPLOYMENT_ID}-") for job_id in ours)

    workers.run(1, DEPLOYMENT_ID="another-deployment")
    assert statuses(run) == {Attempt.QUEUED: len(attempts)}, workers.logs()
    assert sorted(redis_queue.job_ids) == ours  # still waiting for our workers

    workers.run(1)
    assert statuses(run) == {Attempt.DONE: len(attempts)}, workers.logs()
    # What the two deployments left in Redis: every queue named after its deployment.
    names = {queue.name for queue in Queue.all(connection=redis_queue.connection)}
    assert names and all(name.startswith((f"{settings.DEPLOYMENT_ID}.", "another-deployment.")) for name in names), names


def test_a_job_of_another_deployment_on_our_queue_is_refused_and_logged(tiny_suite, workers, redis_queue):
    run = run_create(suite=tiny_suite, agent="gold", n_values=[1])
    attempt = run.attempts.first()
    redis_queue.empty()  # our own jobs gone: only the intruder's is left for the worker
    intruder = redis_queue.enqueue(RUN_ATTEMPT.job_function, attempt.pk, job_id="intruder-attempt-1",
                                   meta={"deployment": "intruder"})

    workers.run(1)

    intruder = Job.fetch(intruder.id, connection=redis_queue.connection)
    assert intruder.get_status() == JobStatus.FAILED
    assert "enqueued by deployment 'intruder'" in intruder.latest_result().exc_string
    assert "refused: job intruder-attempt-1" in workers.logs()
    attempt.refresh_from_db()
    assert attempt.job_id != intruder.id  # never claimed by the intruder's job


def test_each_deployment_id_names_its_queues_and_job_ids(settings):
    from runs.evaluation.queue import redis_key

    assert evaluation_queue().name == settings.EVALUATION_QUEUE == f"{settings.DEPLOYMENT_ID}.default"
    assert settings.MAINTENANCE_QUEUE.startswith(f"{settings.DEPLOYMENT_ID}.")
    assert RUN_ATTEMPT.job_id(7, 0) == f"{settings.DEPLOYMENT_ID}-attempt-7-try-1"
    assert redis_key("lock") == f"autoexperiment:{settings.DEPLOYMENT_ID}:lock"
