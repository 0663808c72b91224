"""RQ jobs: thin wrappers that take ids and call one service.

Enqueued by runs.evaluation (one job per attempt, on commit); run them with
`python manage.py rqworker` (django-rq).
"""
from django.db import close_old_connections
from rq import get_current_job

from runs.evaluation.harness import attempt_execute
from runs.evaluation.recovery import attempts_heal


def attempt_execute_job(attempt_id: int) -> str:
    """Execute one attempt (a no-op unless it is still queued: duplicates do nothing)."""
    reset_connections()
    job = get_current_job()
    return attempt_execute(attempt_id=attempt_id, job_id=job.id if job is not None else "")


def attempts_recover_job(stale_after: float | None = None) -> int:
    """One round of self-healing (runs.evaluation.recovery.attempts_heal). Evaluation workers already run it
    every ATTEMPT_RECOVER_INTERVAL_SECONDS (runs.evaluation.worker); this is for a deployment that wants it
    from elsewhere too. Returns how many attempts it settled."""
    reset_connections()
    report = attempts_heal(stale_after=stale_after)
    return len(report.recovered) + len(report.unstarted) + len(report.reexecutions)


def reset_connections() -> None:
    """Before a job: drop database connections a forked work horse inherited or that went stale."""
    close_old_connections()
