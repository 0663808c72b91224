"""GET /healthz: is this deployment able to do its work? For monitors and load balancers.

Three checks, each reported by name: the database answers a query, Redis answers a ping, and the
oldest job waiting in the evaluation queue is younger than HEALTHZ_QUEUE_MAX_AGE_SECONDS, or some
worker listens to the queue (an older one with none means no worker is taking jobs). 200 when all pass, 503 naming the failing ones otherwise.

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
from rq import Queue, Worker
from rq.job import Job
from rq.utils import now

from autoexperiment_site.abuse import rate_exempt
from runs.evaluation.queue import queue_name

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


def queue_check(*, client: redis.Redis, max_age_seconds: int) -> dict:
    """Length of the evaluation queue, the age of its oldest job (the head: RQ appends at the tail)
    and how many workers listen to it. Failing means jobs wait longer than `max_age_seconds` with no
    worker to take them: a long queue with workers at it is busy, not broken (anyone may lengthen
    it by uploading, and a load balancer must not take the site down for that)."""
    try:
        queue = Queue(queue_name(), connection=client)
        queued = queue.count
        workers = Worker.count(queue=queue)
        oldest_age = None
        if queued:
            jobs = Job.fetch_many(queue.get_job_ids(0, HEAD_PEEK - 1), connection=client)
            enqueued = [job.enqueued_at for job in jobs if job is not None and job.enqueued_at is not None]
            if enqueued:
                oldest_age = max(0.0, (now() - min(enqueued)).total_seconds())
    except Exception as error:  # noqa: BLE001
        return _failure("queue", error)
    result = {
        "ok": oldest_age is None or oldest_age <= max_age_seconds or workers > 0,
        "queued": queued,
        "workers": workers,
        "oldest_age_seconds": None if oldest_age is None else round(oldest_age),
        "max_age_seconds": max_age_seconds,
    }
    if not result["ok"]:
        result["error"] = "oldest queued job is older than max_age_seconds and no worker listens to the queue"
    return result


def health_report() -> dict:
    """Every check by name, and whether all passed."""
    client = redis_client()
    try:
        checks = {"database": database_check(), "redis": redis_check(client=client)}
        if checks["redis"]["ok"]:
            checks["queue"] = queue_check(client=client, max_age_seconds=settings.HEALTHZ_QUEUE_MAX_AGE_SECONDS)
        else:
            checks["queue"] = {"ok": False, "error": "redis is unreachable"}
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
