"""Split from runs.attempts: TODO docstring."""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime, timedelta

import django_rq
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from runs.benchmark.text import storable_text
from runs.models import Attempt

logger = logging.getLogger(__name__)


@dataclass
class FailedJob:
    """An evaluation job in RQ's failed registry."""

    job_id: str
    reason: str  # the last line of what it raised ("failed" when RQ kept nothing)
    worker: str  # the RQ worker that ran it, "" when unknown
    failed_at: str  # ISO time, "" when unknown


def failure_recorded(history: list, failure: FailedJob) -> bool:
    """Whether an attempt's infra_history ends with `failure` (runs.evaluation.
    attempts_record_unstarted writes each failure of a job that never claimed its attempt once)."""
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


def failed_jobs_get(*, job_ids: Iterable[str] | None = None, cleanup: bool = True) -> dict[str, FailedJob]:
    """The evaluation queue's failed jobs among `job_ids` (all of them when None), by id. With
    `cleanup`, RQ first moves abandoned jobs (those of dead workers) from the started to the failed
    registry. Empty when Redis is unreachable: the heartbeat still finds dead workers."""
    try:
        queue = evaluation_queue()
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


JOB_FUNCTION = "runs.evaluation.jobs.attempt_execute_job"


# RQ kills a job that runs longer than this beyond the agent's own time budget (re-execution,
# workspaces); the harness's budgets should always end an attempt first.
JOB_TIMEOUT_MARGIN_SECONDS = 3600


LIVE_JOB_STATUSES = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED}


def queue_name() -> str:
    return getattr(settings, "EVALUATION_QUEUE", "default")


def evaluation_queue():
    """The RQ queue attempts are enqueued on (settings.EVALUATION_QUEUE, default "default")."""
    return django_rq.get_queue(queue_name())


def job_id_for(attempt: Attempt) -> str:
    return f"attempt-{attempt.pk}-try-{attempt.tries + 1}"


def attempts_enqueue(*, attempts: Iterable[Attempt], delay: float = 0) -> None:
    """Enqueue one job per attempt once the current transaction commits (at once outside one).
    With a `delay` (seconds) the jobs are scheduled: RQ's scheduler, which every long-running
    evaluation worker runs (runs.evaluation.worker), puts them on the queue when it is up."""
    pending = [(attempt.pk, job_id_for(attempt), _job_timeout(attempt), delay) for attempt in attempts]
    if pending:
        transaction.on_commit(lambda: _enqueue_now(pending))


def _job_timeout(attempt: Attempt) -> int:
    return int(attempt.run.max_seconds) + JOB_TIMEOUT_MARGIN_SECONDS


def _enqueue_now(pending: list[tuple[int, str, int, float]]) -> int:
    queue = evaluation_queue()
    return sum(
        job_enqueue_replacing(
            queue, JOB_FUNCTION, attempt_id, job_id=job_id, timeout=timeout, delay=delay,
            description=f"attempt {attempt_id} ({job_id})",
        )
        for attempt_id, job_id, timeout, delay in pending
    )


def job_enqueue_replacing(queue, function: str, argument, *, job_id: str, timeout: int, description: str, delay: float = 0) -> bool:
    """Enqueue `function(argument)` as job `job_id`, scheduled `delay` seconds later when positive
    (RQ's scheduler, which every long-running evaluation worker runs, puts it on the queue then).
    A live job of that id is left alone (False); a finished or failed one, which never claimed its
    attempt, is replaced."""
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
    }
    if delay > 0:
        queue.enqueue_in(timedelta(seconds=delay), function, argument, **options)
    else:
        queue.enqueue(function, argument, **options)
    return True


def live_job(job_id: str) -> bool:
    try:
        job = Job.fetch(job_id, connection=evaluation_queue().connection)
    except NoSuchJobError:
        return False
    return job.get_status(refresh=True) in LIVE_JOB_STATUSES


def cancel_jobs(job_ids: list[str]) -> None:
    """Best effort: take the jobs of cancelled attempts off the queue (their claim fails anyway)."""
    try:
        queue = evaluation_queue()
        for job_id in job_ids:
            job = queue.fetch_job(job_id)
            if job is not None and job.get_status(refresh=True) in (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED):
                job.cancel()
    except Exception:
        logger.warning("could not remove cancelled jobs from the queue", exc_info=True)
