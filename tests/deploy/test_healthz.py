"""/healthz's queue and workers checks against the real Redis: the age of the oldest queued job
decides, what the database holds as waiting is counted, and only workers that beat listen."""
from datetime import timedelta

import pytest
from rq import Queue, Worker
from rq.utils import now, utcformat

from runs.evaluation.queue import WORKER_STALE_SECONDS, queue_name
from runs.evaluation.services import run_create
from tests.support import redis_test_url

pytestmark = pytest.mark.django_db


@pytest.fixture
def queue(settings, redis_client):
    settings.RQ_QUEUES = {queue_name(): {"URL": redis_test_url(), "DEFAULT_TIMEOUT": 60}}
    redis_client.flushdb()
    yield Queue(queue_name(), connection=redis_client)
    redis_client.flushdb()


@pytest.fixture
def worker(queue):
    """A worker registered on the queue, as a live one is (it never takes a job here)."""
    worker = Worker([queue], connection=queue.connection)
    worker.register_birth()
    yield worker
    worker.register_death()


def enqueue_aged(queue: Queue, *, seconds: int) -> None:
    """A job nobody works on, enqueued `seconds` ago (no worker listens on the test Redis database)."""
    job = queue.enqueue("os.getpid")
    job.enqueued_at = now() - timedelta(seconds=seconds)
    job.save()


def test_a_job_waiting_too_long_makes_the_site_unhealthy(client, settings, queue):
    settings.HEALTHZ_QUEUE_MAX_AGE_SECONDS = 3600
    enqueue_aged(queue, seconds=2 * 3600)
    enqueue_aged(queue, seconds=10)
    response = client.get("/healthz")
    assert response.status_code == 503
    report = response.json()
    assert report["failing"] == ["queue", "workers"]
    check = report["checks"]["queue"]
    assert check["queued"] == 2 and check["max_age_seconds"] == 3600
    assert 2 * 3600 <= check["oldest_age_seconds"] < 2 * 3600 + 60
    assert "older than" in check["error"]


def test_a_queue_younger_than_the_threshold_is_healthy(client, settings, queue, worker):
    settings.HEALTHZ_QUEUE_MAX_AGE_SECONDS = 3600
    enqueue_aged(queue, seconds=600)
    queue.connection.rpush(queue.key, "job-that-was-deleted")  # an id whose job is gone is skipped
    response = client.get("/healthz")
    assert response.status_code == 200, response.json()
    assert response.json()["checks"]["queue"]["queued"] == 2
    assert 600 <= response.json()["checks"]["queue"]["oldest_age_seconds"] < 660
    assert client.post("/healthz").status_code == 405


def test_an_old_backlog_with_a_worker_at_it_is_busy_not_unhealthy(client, settings, queue):
    """Anyone can lengthen the queue by uploading; a monitor must not take the site out for that."""
    from rq import Worker

    settings.HEALTHZ_QUEUE_MAX_AGE_SECONDS = 3600
    enqueue_aged(queue, seconds=2 * 3600)
    worker = Worker([queue], connection=queue.connection)
    worker.register_birth()
    try:
        response = client.get("/healthz")
        assert response.status_code == 200, response.json()
        check = response.json()["checks"]["queue"]
        assert check["workers"] == 1 and check["oldest_age_seconds"] >= 2 * 3600
    finally:
        worker.register_death()


def test_a_dead_workers_registration_does_not_count_as_a_worker_listening(client, queue, worker):
    """RQ keeps a SIGKILLed worker's registration for minutes: only a worker that beats listens."""
    response = client.get("/healthz")
    assert response.status_code == 200, response.json()
    assert response.json()["checks"]["workers"] == {"ok": True, "live": 1, "registered": 1, "stale_after_seconds": WORKER_STALE_SECONDS}

    queue.connection.hset(worker.key, "last_heartbeat", utcformat(now() - timedelta(seconds=WORKER_STALE_SECONDS + 5)))
    response = client.get("/healthz")
    assert response.status_code == 503
    report = response.json()
    assert report["failing"] == ["workers"]
    assert report["checks"]["workers"]["live"] == 0 and report["checks"]["workers"]["registered"] == 1
    assert report["checks"]["queue"]["workers"] == 0

    worker.heartbeat()
    assert client.get("/healthz").status_code == 200


def test_the_work_the_database_holds_as_waiting_is_counted_whatever_redis_holds(client, queue, worker, builtin):
    """Redis restarted or flushed holds no job: the database still says what waits (the workers'
    healing queues it again, runs.evaluation.recovery.attempts_requeue_lost)."""
    run = run_create(suite=builtin, agent="gold", n_values=[1], sample_cap=1, enqueue=False)
    report = client.get("/healthz").json()
    assert report["checks"]["queue"]["queued"] == 0
    assert report["checks"]["queue"]["waiting"] == {"attempt": run.attempts.count(), "reexecution": 0, "transplant": 0}
    assert run.attempts.count() == 4
