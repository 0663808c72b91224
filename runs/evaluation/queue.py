"""The evaluation queue on RQ: job ids, enqueueing, and what RQ's failed registry knows.

Everything a deployment keeps in Redis is named after settings.DEPLOYMENT_ID: its queues (so RQ's
registries and scheduler locks), its job ids, its own keys (`redis_key`), and each job's meta says
which deployment enqueued it (`foreign_job`), so deployments sharing one Redis never touch each
other's work. One job per attempt and try, its id from the kind of work
(`<deployment>-attempt-<id>-try-<n>` for a run's attempt), so enqueueing an attempt whose job is live does nothing and a finished or failed job is
replaced. Jobs are enqueued when the current transaction commits, never before a worker can see
the attempt; a delayed retry is scheduled with `enqueue_in`, for RQ's scheduler to put on the
queue. `failed_jobs_get` reads the failed registry, which recovery uses to find dead workers and
jobs that failed before claiming their attempt; when Redis is unreachable it is empty."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import django_rq
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rq import Queue, Worker
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus
from rq.utils import now

from runs.benchmark.text import storable_text
from runs.evaluation.kinds import RUN_ATTEMPT, WorkKind
from runs.models import Attempt, Paper

logger = logging.getLogger(__name__)


@dataclass
class FailedJob:
    """An evaluation job in RQ's failed registry."""

    job_id: str
    reason: str  # the last line of what it raised ("failed" when RQ kept nothing)
    worker: str  # the RQ worker that ran it, "" when unknown
    failed_at: str  # ISO time, "" when unknown


def failure_recorded(history: list, failure: FailedJob) -> bool:
    """Whether an attempt's infra_history ends with `failure` (runs.evaluation.claims.record_unstarted
    writes each failure of a job that never claimed its attempt once)."""
    last = history[-1] if history else {}
    return last.get("job_id") == failure.job_id and (not failure.failed_at or last.get("at") == failure.failed_at)


def retry_in_seconds(entry: dict) -> float | None:
    """Seconds until the retry an infra_history entry scheduled is due (0 once due); None when it
    scheduled none."""
    retry_at = entry.get("retry_at")
    if not retry_at:
        return None
    return max(0.0, (datetime.fromisoformat(retry_at) - timezone.now()).total_seconds())


# Fetching each failed job costs two round trips: past this many the rest get a generic reason.
FAILED_JOB_DETAILS_LIMIT = 200


def failed_jobs_get(
    *, job_ids: Iterable[str] | None = None, cleanup: bool = True, queue: Queue | None = None
) -> dict[str, FailedJob]:
    """The failed jobs of `queue` (the evaluation queue by default) among
    `job_ids` (all of them when None), by id. With
    `cleanup`, RQ first moves abandoned jobs (those of dead workers) from the started to the failed
    registry. Empty when Redis is unreachable: the heartbeat still finds dead workers."""
    try:
        queue = queue or evaluation_queue()
        if cleanup:
            queue.started_job_registry.cleanup()
        registry = queue.failed_job_registry
        if job_ids is None:
            ids = registry.get_job_ids()
        else:
            wanted = sorted(set(job_ids))
            with queue.connection.pipeline(transaction=False) as pipeline:
                for job_id in wanted:
                    pipeline.zscore(registry.key, job_id)
                scores = pipeline.execute() if wanted else []
            ids = [job_id for job_id, score in zip(wanted, scores) if score is not None]
        failed = {}
        for number, job_id in enumerate(ids):
            if number >= FAILED_JOB_DETAILS_LIMIT:
                failed[job_id] = FailedJob(job_id, "failed (see RQ's failed registry)", "", "")
                continue
            job = queue.fetch_job(job_id)
            result = job.latest_result() if job is not None else None
            text = ((result.exc_string if result is not None else "") or "").strip().splitlines()
            when = result.created_at if result is not None else (job.ended_at if job is not None else None)
            failed[job_id] = FailedJob(
                job_id=job_id,
                reason=storable_text(text[-1].strip()[:2000]) if text else "failed",
                worker=storable_text(job.worker_name or "") if job is not None else "",
                failed_at=when.isoformat() if when is not None else "",
            )
        return failed
    except Exception:
        logger.warning("RQ's failed registry could not be read (recovery goes by heartbeats only)", exc_info=True)
        return {}


# The job meta key listing the modules its work horse will import (WorkKind.preload).
PRELOAD_META = "preload"
# The job meta key naming the deployment that enqueued it: a worker runs only its own deployment's jobs.
DEPLOYMENT_META = "deployment"


def deployment_meta(**meta) -> dict:
    """A job's meta: `meta` and this deployment's id (settings.DEPLOYMENT_ID)."""
    return {DEPLOYMENT_META: settings.DEPLOYMENT_ID, **meta}


def foreign_job(job: Job) -> str | None:
    """The deployment that enqueued `job` when it is not this one ("unknown" when it says none)."""
    owner = (job.meta or {}).get(DEPLOYMENT_META)
    return None if owner == settings.DEPLOYMENT_ID else str(owner or "unknown")


def redis_key(name: str) -> str:
    """This deployment's Redis key `name` (locks, markers): deployments sharing a Redis never share one."""
    return f"autoexperiment:{settings.DEPLOYMENT_ID}:{name}"

LIVE_JOB_STATUSES = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED}


def queue_name() -> str:
    return settings.EVALUATION_QUEUE


def evaluation_queue():
    """The RQ queue runs' attempts and submissions' re-executions are enqueued on (settings.EVALUATION_QUEUE)."""
    return django_rq.get_queue(queue_name())


def queue_named(name: str):
    """The RQ queue `name` on the evaluation queue's Redis (every queue the workers take is there)."""
    evaluation = evaluation_queue()
    if name == evaluation.name:
        return evaluation
    return Queue(name, connection=evaluation.connection, serializer=evaluation.serializer)


def kind_queue(kind: WorkKind):
    """The RQ queue `kind`'s jobs go on (WorkKind.queue_name)."""
    return queue_named(kind.queue_name())


def kind_failed_jobs(kind: WorkKind, *, job_ids: Iterable[str], cleanup: bool = True) -> dict[str, FailedJob]:
    """failed_jobs_get over both queues a job of `kind` may have been on: its own, and the GPU queue
    (work on a paper that needs a GPU, runs.evaluation.queue.enqueue)."""
    job_ids = list(job_ids)
    failed: dict[str, FailedJob] = {}
    for name in dict.fromkeys([kind.queue_name(), settings.GPU_QUEUE]):
        failed |= failed_jobs_get(job_ids=job_ids, cleanup=cleanup, queue=queue_named(name))
    return failed


def maintenance_queue():
    """settings.MAINTENANCE_QUEUE: quick upkeep jobs every evaluation worker takes before its next
    attempt (runs.evaluation.worker)."""
    return queue_named(settings.MAINTENANCE_QUEUE)


def job_id_for(attempt: Attempt) -> str:
    """The id of the job that executes a run's attempt's next try."""
    return RUN_ATTEMPT.job_id(attempt.pk, attempt.tries)


def attempts_enqueue(*, attempts: Iterable[Attempt], delay: float = 0) -> None:
    """Enqueue a job for each of a run's attempts (see enqueue)."""
    enqueue(RUN_ATTEMPT, attempts=attempts, delay=delay)


def enqueue(kind: WorkKind, *, attempts: Iterable[Attempt], delay: float = 0) -> None:
    """Enqueue one job of `kind` per attempt once the current transaction commits (at once outside
    one): a worker must never be handed an attempt it cannot see yet. With a `delay` (seconds) the
    jobs are scheduled: RQ's scheduler, which every long-running evaluation worker runs
    (runs.evaluation.worker), puts them on the queue when it is up.

    Each attempt's `queued_at` is stamped now (in the caller's transaction, and on the instances,
    which a caller may save after): the healing leaves work queued a moment ago to its job, which
    may not be in Redis yet (runs.evaluation.recovery.attempts_requeue_lost)."""
    attempts = list(attempts)
    needing_gpu = _needing_gpu(kind, [attempt.pk for attempt in attempts])
    pending = [
        (
            attempt.pk, kind.job_id(attempt.pk, attempt.tries), kind.job_timeout(attempt), kind.preload(attempt),
            settings.GPU_QUEUE if attempt.pk in needing_gpu else kind.queue_name(),
        )
        for attempt in attempts
    ]
    if pending:
        queued_at = timezone.now()
        for attempt in attempts:
            attempt.queued_at = queued_at
        kind.model.objects.filter(pk__in=[pk for pk, *_ in pending]).update(queued_at=queued_at)
        transaction.on_commit(lambda: _enqueue_now(kind, pending, delay))


def _needing_gpu(kind: WorkKind, pks: list[int]) -> set[int]:
    """Those of `pks` whose paper needs a GPU: their jobs go on settings.GPU_QUEUE, which only
    workers with GPUs take (one query, whatever their number)."""
    if not pks:
        return set()
    return set(kind.model.objects.filter(
        pk__in=pks, **{f"{kind.sample_field}__paper__gpu": Paper.Gpu.REQUIRED}
    ).values_list("pk", flat=True))


def _enqueue_now(kind: WorkKind, pending: list[tuple[int, str, int, tuple[str, ...], str]], delay: float) -> int:
    try:
        queues = {name: queue_named(name) for name in {entry[-1] for entry in pending}}
        return sum(
            job_enqueue_replacing(
                queues[queue], kind.job_function, attempt_id, job_id=job_id, timeout=timeout, delay=delay,
                description=f"{kind.name} {attempt_id} ({job_id})", preload=preload,
            )
            for attempt_id, job_id, timeout, preload, queue in pending
        )
    except Exception as error:
        kind.enqueue_failed([attempt_id for attempt_id, *_ in pending], error)  # raises, unless the kind reports it
        return 0


def job_enqueue_replacing(
    queue, function: str, argument, *, job_id: str, timeout: int, description: str, delay: float = 0,
    preload: tuple[str, ...] = (),
) -> bool:
    """Enqueue `function(argument)` as job `job_id`, scheduled `delay` seconds later when positive
    (RQ's scheduler, which every long-running evaluation worker runs, puts it on the queue then).
    A live job of that id is left alone (False); a finished or failed one, which never claimed its
    attempt, is replaced. `preload`: modules the worker imports before forking the job's horse
    (runs.evaluation.worker)."""
    existing = queue.fetch_job(job_id)
    if existing is not None:
        if existing.get_status(refresh=True) in LIVE_JOB_STATUSES:
            return False
        existing.delete()
    options = {
        "job_id": job_id,
        "job_timeout": timeout,
        "result_ttl": 24 * 3600,
        "failure_ttl": 7 * 24 * 3600,
        "description": description,
        "meta": deployment_meta(**({PRELOAD_META: list(preload)} if preload else {})),
    }
    if delay > 0:
        queue.enqueue_in(timedelta(seconds=delay), function, argument, **options)
    else:
        queue.enqueue(function, argument, **options)
    return True


def job_statuses(queue, job_ids: list[str]) -> dict[str, str | None]:
    """The RQ status of each of `job_ids` on `queue`'s Redis, by id: None where Redis holds no such
    job (never enqueued, expired, or lost with a Redis restart or flush). One round trip per 1,000
    ids; the status field alone is read (a job hash that a worker's heartbeat re-created after a
    flush holds no status: no job)."""
    statuses: dict[str, str | None] = {}
    for start in range(0, len(job_ids), 1000):
        chunk = job_ids[start:start + 1000]
        with queue.connection.pipeline(transaction=False) as pipeline:
            for job_id in chunk:
                pipeline.hget(queue.job_class.key_for(job_id), "status")
            values = pipeline.execute()
        statuses.update(
            (job_id, value.decode() if isinstance(value, bytes) else value) for job_id, value in zip(chunk, values)
        )
    return statuses


# A long-running evaluation worker refreshes its RQ registration this often (runs.evaluation.worker);
# RQ itself refreshes it at least every 30 s (its job_monitoring_interval) while a job runs, and
# whenever it looks for the next job.
WORKER_BEAT_SECONDS = 5
# A registration not refreshed for this long is a dead worker's (SIGKILLed, or its machine lost):
# RQ keeps it for minutes (its worker_ttl), so counting registrations counts the dead.
WORKER_STALE_SECONDS = 60


def workers_listening(queue) -> tuple[int, int]:
    """(live, registered): the workers registered on `queue`, and those of them that beat within
    WORKER_STALE_SECONDS."""
    registered = Worker.all(queue=queue)
    live = [
        worker for worker in registered
        if worker.last_heartbeat is not None and (now() - worker.last_heartbeat).total_seconds() < WORKER_STALE_SECONDS
    ]
    return len(live), len(registered)


def live_job(job_id: str) -> bool:
    try:
        job = Job.fetch(job_id, connection=evaluation_queue().connection)
    except NoSuchJobError:
        return False
    return job.get_status(refresh=True) in LIVE_JOB_STATUSES


def cancel_jobs(job_ids: list[str], *, queue=None) -> None:
    """Best effort: take the jobs of cancelled attempts off the queue (the evaluation queue unless
    `queue` is given; their claim fails anyway)."""
    try:
        queue = queue or evaluation_queue()
        for job_id in job_ids:
            job = queue.fetch_job(job_id)
            if job is not None and job.get_status(refresh=True) in (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED):
                job.cancel()
    except Exception:
        logger.warning("could not remove cancelled jobs from the queue", exc_info=True)
