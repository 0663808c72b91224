"""GET /healthz: is this deployment able to do its work? For monitors and load balancers.

Four checks, each reported by name: the database answers a query, Redis answers a ping, the
oldest job waiting in the evaluation queue is younger than HEALTHZ_QUEUE_MAX_AGE_SECONDS or some
worker listens to the queue (an older one with none means no worker is taking jobs), and some live
worker listens (one whose registration beats: a killed worker's stays behind for minutes). 200 when
all pass, 503 naming the failing ones otherwise. The queue check also reports what the database
holds as waiting, per kind of work: the truth the workers' healing rebuilds the queue from when
Redis lost it (runs.evaluation.recovery.attempts_requeue_lost).

The body is public, so a failure is reported by its exception class only; the message (host
names, user names, ports) goes to the log.
"""
from __future__ import annotations

import logging
import time

import redis
from django.conf import settings
from django.db import connection
from django.http import JsonResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_safe
from rq import Queue
from rq.job import Job
from rq.utils import now

from autoexperiment_site.abuse import rate_exempt
from runs.evaluation.kinds import work_kinds
from runs.evaluation.queue import WORKER_STALE_SECONDS, queue_name, workers_listening

logger = logging.getLogger(__name__)

# A monitor polls this every few seconds: a dead Redis must not hold a server thread for long.
REDIS_TIMEOUT_SECONDS = 2
# Ids at the head of the queue whose job hash has gone (deleted, expired) are skipped, up to this many.
HEAD_PEEK = 10


def _failure(name: str, error: Exception) -> dict:
    logger.warning("health check %s failed: %r", name, error)
    return {"ok": False, "error": type(error).__name__}


def database_check() -> dict:
    """One query on the default database."""
    started = time.monotonic()
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as error:  # noqa: BLE001 - any failure is the answer
        return _failure("database", error)
    return {"ok": True, "ms": round((time.monotonic() - started) * 1000, 1)}


def redis_client() -> redis.Redis:
    """A client for the evaluation queue's Redis, with short timeouts (django-rq's has none)."""
    url = settings.RQ_QUEUES[queue_name()]["URL"]
    return redis.Redis.from_url(
        url, socket_connect_timeout=REDIS_TIMEOUT_SECONDS, socket_timeout=REDIS_TIMEOUT_SECONDS
    )


def redis_check(*, client: redis.Redis) -> dict:
    started = time.monotonic()
    try:
        client.ping()
    except Exception as error:  # noqa: BLE001
        return _failure("redis", error)
    return {"ok": True, "ms": round((time.monotonic() - started) * 1000, 1)}


def waiting_counts() -> dict[str, int] | None:
    """How much work of each kind (runs.evaluation.kinds) the database holds as waiting for a job to
    take it; None when the database cannot say (its own check reports why)."""
    try:
        return {kind.name: kind.model.objects.filter(kind.waiting()).count() for kind in work_kinds()}
    except Exception as error:  # noqa: BLE001
        logger.warning("health check: waiting work could not be counted: %r", error)
        return None


def _queue_state(name: str, client: redis.Redis) -> tuple[int, int, float | None]:
    """(jobs queued, live workers listening, age in seconds of the oldest job or None) of queue `name`."""
    queue = Queue(name, connection=client)
    queued = queue.count
    workers, _ = workers_listening(queue)
    oldest_age = None
    if queued:
        jobs = Job.fetch_many(queue.get_job_ids(0, HEAD_PEEK - 1), connection=client)
        enqueued = [job.enqueued_at for job in jobs if job is not None and job.enqueued_at is not None]
        if enqueued:
            oldest_age = max(0.0, (now() - min(enqueued)).total_seconds())
    return queued, workers, oldest_age


def queue_check(*, client: redis.Redis, max_age_seconds: int) -> dict:
    """Length of the evaluation queue, the age of its oldest job (the head: RQ appends at the tail),
    how many live workers listen to it, what the database holds as waiting, and the same of the GPU
    queue. Failing means jobs wait longer than `max_age_seconds` with no worker to take them (for
    the GPU queue: no worker with GPUs): a long queue with workers at it is busy, not broken (anyone
    may lengthen it by uploading, and a load balancer must not take the site down for that)."""
    waiting = waiting_counts()
    try:
        queued, workers, oldest_age = _queue_state(queue_name(), client)
        gpu_queued, gpu_workers, gpu_oldest_age = _queue_state(settings.GPU_QUEUE, client)
    except Exception as error:  # noqa: BLE001
        return _failure("queue", error)
    stuck = oldest_age is not None and oldest_age > max_age_seconds and not workers
    gpu_stuck = gpu_oldest_age is not None and gpu_oldest_age > max_age_seconds and not gpu_workers
    result = {
        "ok": not stuck and not gpu_stuck,
        "queued": queued,
        "waiting": waiting,
        "workers": workers,
        "oldest_age_seconds": None if oldest_age is None else round(oldest_age),
        "max_age_seconds": max_age_seconds,
        "gpu": {"queued": gpu_queued, "workers": gpu_workers,
                "oldest_age_seconds": None if gpu_oldest_age is None else round(gpu_oldest_age)},
    }
    if stuck:
        result["error"] = "oldest queued job is older than max_age_seconds and no worker listens to the queue"
    elif gpu_stuck:
        result["error"] = "work that needs a GPU waits longer than max_age_seconds and no worker with GPUs (WORKER_GPUS) listens"
    return result


def workers_check(*, client: redis.Redis) -> dict:
    """The workers listening to the evaluation queue: failing when none is live (none has beaten
    within WORKER_STALE_SECONDS), whatever registrations dead ones left."""
    try:
        live, registered = workers_listening(Queue(queue_name(), connection=client))
    except Exception as error:  # noqa: BLE001
        return _failure("workers", error)
    result = {"ok": live > 0, "live": live, "registered": registered, "stale_after_seconds": WORKER_STALE_SECONDS}
    if not live:
        result["error"] = "no live worker listens to the queue"
    return result


def health_report() -> dict:
    """Every check by name, and whether all passed."""
    client = redis_client()
    try:
        checks = {"database": database_check(), "redis": redis_check(client=client)}
        if checks["redis"]["ok"]:
            checks["queue"] = queue_check(client=client, max_age_seconds=settings.HEALTHZ_QUEUE_MAX_AGE_SECONDS)
            checks["workers"] = workers_check(client=client)
        else:
            checks["queue"] = {"ok": False, "error": "redis is unreachable"}
            checks["workers"] = {"ok": False, "error": "redis is unreachable"}
    finally:
        client.close()
    failing = [name for name, check in checks.items() if not check["ok"]]
    return {"status": "fail" if failing else "ok", "failing": failing, "checks": checks}


@never_cache
@rate_exempt
@require_safe
def healthz(request):
    report = health_report()
    return JsonResponse(report, status=503 if report["failing"] else 200)
