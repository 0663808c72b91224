"""RQ jobs for submissions: thin wrappers that take ids and call one service."""
from rq import get_current_job

from runs.evaluation.jobs import reset_connections
from runs.submissions.reexecution import attempt_reexecute


def attempt_reexecute_job(attempt_id: int) -> str:
    """Re-execute one submitted attempt (a no-op unless it still lacks a verdict and is unclaimed)."""
    reset_connections()
    job = get_current_job()
    return attempt_reexecute(attempt_id=attempt_id, job_id=job.id if job is not None else "")
