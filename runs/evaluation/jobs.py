"""RQ jobs: thin wrappers that take ids and call one service.

Enqueued by runs.evaluation.queue (one job per attempt and try, on commit); run them with
`python manage.py evaluation_worker` (django-rq's rqworker on this deployment's queues).
"""
from django.db import close_old_connections
from rq import get_current_job

from runs.evaluation.claims import ClaimOutcome
from runs.evaluation.harness import attempt_execute
from runs.evaluation.transplants import transplant_execute


def attempt_execute_job(attempt_id: int) -> ClaimOutcome:
    """Execute one attempt (a no-op unless it is still queued: duplicates do nothing)."""
    reset_connections()
    job = get_current_job()
    return attempt_execute(attempt_id=attempt_id, job_id=job.id if job is not None else "")


def transplant_execute_job(transplant_id: int) -> ClaimOutcome:
    """Judge one masked function alone (a no-op unless the transplant is still queued)."""
    reset_connections()
    job = get_current_job()
    return transplant_execute(transplant_id=transplant_id, job_id=job.id if job is not None else "")


def reset_connections() -> None:
    """Before a job: drop database connections a forked work horse inherited or that went stale."""
    close_old_connections()
