"""RQ jobs: thin wrappers that take ids and call one service.

Enqueued by runs.evaluation (one job per attempt, on commit); run them with
`python manage.py rqworker` (django-rq).
"""
from rq import get_current_job

from runs.attempts import attempt_execute, reset_connections


def attempt_execute_job(attempt_id: int) -> str:
    """Execute one attempt (a no-op unless it is still queued: duplicates do nothing)."""
    reset_connections()
    job = get_current_job()
    return attempt_execute(attempt_id=attempt_id, job_id=job.id if job is not None else "")


def attempts_recover_job(stale_after: float | None = None) -> int:
    """One round of self-healing (runs.evaluation.attempts_heal). Evaluation workers already run it
    every ATTEMPT_RECOVER_INTERVAL_SECONDS (runs.worker); this is for a deployment that wants it
    from elsewhere too. Returns how many attempts it settled."""
    from runs.evaluation import attempts_heal

    reset_connections()
    report = attempts_heal(stale_after=stale_after)
    return len(report.recovered) + len(report.unstarted) + len(report.reexecutions)
