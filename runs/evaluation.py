"""Evaluation runs: create, enqueue, cancel, retry, resume, or execute in-process.

Plain functions with keyword-only arguments; views, jobs and management commands call these. One
RQ job per attempt, enqueued when the transaction that queued the attempt commits (a worker must
never be handed an attempt it cannot see yet). Job ids are `attempt-<id>-try-<n>`, n being the try
the job will make, so enqueueing an attempt that already has a live job does nothing; the claim in
`runs.attempts.attempt_execute` makes any duplicate that slips through a no-op.
"""
from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import timedelta

import django_rq
from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rq.exceptions import NoSuchJobError
from rq.job import Job, JobStatus

from runs.agents import AGENTS
from runs.attempts import (
    LOST,
    FailedJob,
    InfrastructureFailure,
    Recovered,
    attempt_execute,
    attempts_recover,
    construct_agent,
    failed_jobs_get,
    failure_recorded,
    max_infra_retries,
    retry_delay_seconds,
    retry_in_seconds,
    run_mark_finished,
)
from runs.limits import trajectory_limits
from runs.models import Attempt, Run, Suite
from runs.sampling import DEFAULT_CAP
from runs.selectors import sample_experiments
from runs.services import samples_ensure
from runs.workspace import CONTEXT_CONDITIONS

logger = logging.getLogger(__name__)

JOB_FUNCTION = "runs.jobs.attempt_execute_job"
# RQ kills a job that runs longer than this beyond the agent's own time budget (re-execution,
# workspaces); the harness's budgets should always end an attempt first.
JOB_TIMEOUT_MARGIN_SECONDS = 3600
LIVE_JOB_STATUSES = {JobStatus.QUEUED, JobStatus.STARTED, JobStatus.DEFERRED, JobStatus.SCHEDULED}


class RunError(ValueError):
    """A run that cannot be created as asked (unknown agent, no samples, no gold results...)."""


def queue_name() -> str:
    return getattr(settings, "EVALUATION_QUEUE", "default")


def evaluation_queue():
    """The RQ queue attempts are enqueued on (settings.EVALUATION_QUEUE, default "default")."""
    return django_rq.get_queue(queue_name())


def job_id_for(attempt: Attempt) -> str:
    return f"attempt-{attempt.pk}-try-{attempt.tries + 1}"


# --- enqueueing ----------------------------------------------------------------------------------


def attempts_enqueue(*, attempts: Iterable[Attempt], delay: float = 0) -> None:
    """Enqueue one job per attempt once the current transaction commits (at once outside one).
    With a `delay` (seconds) the jobs are scheduled: RQ's scheduler, which every long-running
    evaluation worker runs (runs.worker), puts them on the queue when it is up."""
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


def _live_job(job_id: str) -> bool:
    try:
        job = Job.fetch(job_id, connection=evaluation_queue().connection)
    except NoSuchJobError:
        return False
    return job.get_status(refresh=True) in LIVE_JOB_STATUSES


def _cancel_jobs(job_ids: list[str]) -> None:
    """Best effort: take the jobs of cancelled attempts off the queue (their claim fails anyway)."""
    try:
        queue = evaluation_queue()
        for job_id in job_ids:
            job = queue.fetch_job(job_id)
            if job is not None and job.get_status(refresh=True) in (JobStatus.QUEUED, JobStatus.DEFERRED, JobStatus.SCHEDULED):
                job.cancel()
    except Exception:
        logger.warning("could not remove cancelled jobs from the queue", exc_info=True)


# --- runs ----------------------------------------------------------------------------------------


def run_create(
    *,
    suite: Suite,
    agent: str,
    n_values: list[int],
    attempts_per_sample: int = 1,
    model: str = "",
    agent_config: dict | None = None,
    context: str = "full",
    sample_seed: int = 0,
    sample_cap: int = DEFAULT_CAP,
    max_steps: int = 50,
    max_seconds: float = 1800.0,
    max_cost: float = 1.0,
    sandbox_backend: str | None = None,
    description: str = "",
    created_by=None,
    enqueue: bool = True,
) -> Run:
    """Create a run with one queued attempt per sample and index (k per sample) and, unless
    `enqueue` is False (in-process runs), enqueue their jobs when the transaction commits.

    The samples are the suite's, for each n, at most `sample_cap` per paper drawn with
    `sample_seed` (created if they do not exist yet). Raises RunError when the agent is unknown,
    a model-based agent has no model, or no sample with gold results is left.
    """
    from sandbox import BACKENDS

    if agent not in AGENTS:
        raise RunError(f"unknown agent {agent!r}; known agents: {', '.join(sorted(AGENTS))}")
    if getattr(AGENTS[agent], "needs_model", True) and not model:
        raise RunError(f"agent {agent!r} needs a model (--model provider:name)")
    if context not in CONTEXT_CONDITIONS:
        raise RunError(f"context must be one of {', '.join(CONTEXT_CONDITIONS)}")
    n_values = sorted(set(n_values))
    if not n_values or any(n < 1 for n in n_values):
        raise RunError("n values must be at least 1 (e.g. 1,2)")
    if attempts_per_sample < 1 or sample_cap < 1:
        raise RunError("k and the sample cap must be at least 1")
    if max_steps < 1 or not max_seconds > 0 or not max_cost > 0:
        raise RunError("budgets must be positive")
    step_limit = trajectory_limits().steps
    if max_steps > step_limit:
        raise RunError(f"max steps is {max_steps:,}; a trajectory holds at most {step_limit:,} steps (TRAJECTORY_MAX_STEPS)")
    backend = {"bwrap": "bubblewrap"}.get(sandbox_backend or "", sandbox_backend) or settings.SANDBOX_BACKEND
    if backend not in BACKENDS:
        raise RunError(f"sandbox backend must be one of {', '.join(BACKENDS)}")
    _check_agent_settings(agent, agent_config or {}, max_steps=max_steps, max_seconds=max_seconds, max_cost=max_cost)

    with transaction.atomic():
        samples = samples_ensure(suite=suite, n_values=n_values, seed=sample_seed, cap=sample_cap)
        if not samples:
            raise RunError(f"suite {suite.name} has no samples for n={n_values} (papers without gold code have none)")
        for sample in samples:
            experiments = sample_experiments(sample=sample)
            if not experiments:
                raise RunError(f"sample {sample.sample_id} has no experiments to score")
            missing = [e.exp_id for e in experiments if e.gold_result is None]
            if missing:
                raise RunError(f"sample {sample.sample_id}: experiments {missing} have no gold result (run make_gold)")
        run = Run.objects.create(
            suite=suite,
            agent=agent,
            agent_config=agent_config or {},
            model=model,
            context=context,
            n_values=n_values,
            sample_seed=sample_seed,
            sample_cap=sample_cap,
            attempts_per_sample=attempts_per_sample,
            max_steps=max_steps,
            max_seconds=max_seconds,
            max_cost=max_cost,
            sandbox_backend=backend,
            description=description,
            created_by=created_by,
        )
        attempts = Attempt.objects.bulk_create(
            [Attempt(run=run, sample=sample, index=index) for sample in samples for index in range(attempts_per_sample)]
        )
        for attempt in attempts:
            attempt.run = run
        if enqueue:
            attempts_enqueue(attempts=attempts)
    return run


def _check_agent_settings(agent: str, config: dict, **budgets) -> None:
    """Build the agent once as the workers will (without gold bodies), so that a misspelt or
    invalid setting fails here rather than as an infrastructure error in every attempt."""
    settings_ = {**budgets, **config}
    if getattr(AGENTS[agent], "needs_gold_bodies", False):
        settings_["gold_bodies"] = {}
    try:
        construct_agent(agent, settings_, optional=tuple(budgets))
    except InfrastructureFailure as error:
        raise RunError(str(error)) from None


@transaction.atomic
def run_cancel(*, run: Run) -> int:
    """Stop a run: its queued attempts become cancelled (a worker's claim then skips them), their
    jobs leave the queue. Running attempts finish and, like finished ones, keep their results.
    Returns how many attempts were cancelled."""
    now = timezone.now()
    Run.objects.filter(pk=run.pk, cancelled_at__isnull=True).update(cancelled_at=now)
    queued = list(run.attempts.filter(status=Attempt.QUEUED).select_related("run"))
    cancelled = Attempt.objects.filter(pk__in=[a.pk for a in queued], status=Attempt.QUEUED).update(
        status=Attempt.CANCELLED, finished_at=now
    )
    job_ids = [job_id_for(attempt) for attempt in queued]
    transaction.on_commit(lambda: _cancel_jobs(job_ids))
    transaction.on_commit(lambda: run_mark_finished(run_id=run.pk))
    run.refresh_from_db()
    return cancelled


def runs_set_hidden(*, runs: Iterable[Run], hidden: bool) -> int:
    """Hide runs (and so their attempts and submission) from everyone but their owner and staff,
    or show them again (see runs.visibility). Who may do it is the caller's check. Returns how many."""
    return Run.objects.filter(pk__in=[run.pk for run in runs]).update(hidden=hidden)


@transaction.atomic
def run_retry_failed(*, run: Run, enqueue: bool = True) -> int:
    """Queue again the attempts that ended without a valid result (status error: infrastructure
    or model provider failures), with a fresh allowance of infrastructure retries. Attempts the
    model failed (wrong, no or unparseable answer, budget exhausted) are its results and are not
    retried. Returns how many were re-queued."""
    failed = list(run.attempts.select_for_update().filter(status=Attempt.ERROR))
    for attempt in failed:
        attempt.status = Attempt.QUEUED
        attempt.infra_failures = 0
        attempt.failure_label = ""
        attempt.failure_detail = ""
        attempt.finished_at = None
        attempt.save(update_fields=["status", "infra_failures", "failure_label", "failure_detail", "finished_at"])
        attempt.run = run
    if failed:
        Run.objects.filter(pk=run.pk).update(finished_at=None)
        if enqueue:
            attempts_enqueue(attempts=failed)
    run.refresh_from_db()
    return len(failed)


@dataclass
class ResumeReport:
    recovered: int  # running attempts whose worker had died
    uncancelled: int  # cancelled attempts queued again
    enqueued: int  # queued attempts that had no live job and got one


def run_resume(*, run: Run, stale_after: float | None = None, enqueue: bool = True) -> ResumeReport:
    """Continue an interrupted (or cancelled) run.

    Running attempts whose worker died are recovered (re-queued, or ended as infrastructure errors
    when out of retries; see runs.attempts.attempts_recover), cancelled attempts are queued again,
    and every queued attempt without a live RQ job gets one. Attempts that are done keep their
    results, so after a resume each attempt still has exactly one.
    """
    recovered = [r for r in attempts_recover(run=run, stale_after=stale_after, requeue=False) if r.outcome != LOST]
    with transaction.atomic():
        uncancelled = run.attempts.filter(status=Attempt.CANCELLED).update(status=Attempt.QUEUED, finished_at=None)
        queued = list(run.attempts.filter(status=Attempt.QUEUED).select_related("run"))
        Run.objects.filter(pk=run.pk).update(cancelled_at=None, **({"finished_at": None} if queued else {}))
        enqueued = 0
        if enqueue:
            without_job = [attempt for attempt in queued if not _live_job(job_id_for(attempt))]
            attempts_enqueue(attempts=without_job)
            enqueued = len(without_job)
    run.refresh_from_db()
    return ResumeReport(recovered=len(recovered), uncancelled=uncancelled, enqueued=enqueued)


# --- self-healing --------------------------------------------------------------------------------


@dataclass
class HealReport:
    unstarted: list[int]  # attempts whose job had failed before claiming them, now recorded
    recovered: list[Recovered]  # running attempts of dead workers, and overrunning ones
    reexecutions: list[int]  # submitted attempts whose re-execution's worker or job died


def attempts_heal(*, stale_after: float | None = None) -> HealReport:
    """One round of self-healing, run by every evaluation worker when it starts and, when it is a
    long-running one, every ATTEMPT_RECOVER_INTERVAL_SECONDS (runs.worker): jobs that failed
    before claiming their attempt are recorded on it (attempts_record_unstarted), attempts of dead
    workers re-queued and overrunning ones ended (runs.attempts.attempts_recover), the same for
    submissions' re-executions (reexecutions_recover), and the leftovers of tries no longer
    running swept. Idempotent and fenced: any number of workers may run it at once."""
    from runs.submissions.services import reexecutions_recover

    unstarted = attempts_record_unstarted()
    recovered = [r for r in attempts_recover(stale_after=stale_after) if r.outcome != LOST]
    return HealReport(unstarted=unstarted, recovered=recovered, reexecutions=reexecutions_recover())


def attempts_record_unstarted(*, run: Run | None = None) -> list[int]:
    """Record the failures of jobs that never claimed their attempt.

    A worker that cannot reach the database or import the job, or fails in any way before
    `attempt_claim` succeeds, leaves its attempt queued; only RQ's failed registry knows why. For
    each queued attempt whose current job (job_id_for) is there, the job's reason is written into
    the attempt's infra_history and counts as an infrastructure failure: the attempt is queued
    again after retry_delay_seconds while retries are left, else ends as error / infrastructure.
    Each failure is recorded once (by its job id and time), so this runs wherever the database is
    reachable: a reason the failing worker could not write appears as soon as any worker gets
    through (the run page shows RQ's reason until then, runs.selectors.run_waiting_notes).
    Returns the ids of the attempts recorded."""
    queued = Attempt.objects.filter(status=Attempt.QUEUED)
    if run is not None:
        queued = queued.filter(run=run)
    by_job = {job_id_for(attempt): attempt for attempt in queued.only("pk", "tries")}
    if not by_job:
        return []
    recorded = []
    for job_id, failure in failed_jobs_get(job_ids=by_job, cleanup=False).items():
        attempt = by_job[job_id]
        if _unstarted_record(attempt_id=attempt.pk, tries=attempt.tries, failure=failure):
            recorded.append(attempt.pk)
    return recorded


def _unstarted_record(*, attempt_id: int, tries: int, failure: FailedJob) -> bool:
    with transaction.atomic():
        attempt = (
            Attempt.objects.select_for_update(of=("self",))
            .select_related("run")
            .filter(pk=attempt_id, status=Attempt.QUEUED, tries=tries)
            .first()
        )
        if attempt is None:
            return False  # claimed, cancelled or recorded meanwhile
        if failure_recorded(attempt.infra_history, failure):
            # Recorded before, but its job was not replaced then (Redis went away): replace it now.
            attempts_enqueue(attempts=[attempt], delay=retry_in_seconds(attempt.infra_history[-1]) or 0)
            return False
        attempt.infra_failures += 1
        where = f" on worker {failure.worker}" if failure.worker else ""
        reason = f"its job {failure.job_id} failed{where} before claiming the attempt: {failure.reason}"
        entry = {
            "try": tries + 1,
            "claimed": False,
            "worker": failure.worker,
            "job_id": failure.job_id,
            "at": failure.failed_at or timezone.now().isoformat(),
            "reason": reason,
        }
        if attempt.infra_failures <= max_infra_retries():
            delay = retry_delay_seconds(attempt.infra_failures)
            entry["retry_at"] = (timezone.now() + timedelta(seconds=delay)).isoformat()
            attempt.infra_history = [*attempt.infra_history, entry]
            attempt.save(update_fields=["infra_failures", "infra_history"])
            attempts_enqueue(attempts=[attempt], delay=delay)  # replaces the failed job
        else:
            attempt.infra_history = [*attempt.infra_history, entry]
            attempt.status = Attempt.ERROR
            attempt.failure_label = Attempt.INFRASTRUCTURE
            attempt.failure_detail = reason
            attempt.finished_at = timezone.now()
            attempt.passed = attempt.mismatch = False
            attempt.save()
            transaction.on_commit(lambda: run_mark_finished(run_id=attempt.run_id))
    logger.warning("attempt %s: %s", attempt_id, reason)
    return True


def run_execute_sync(*, run: Run, progress: Callable[[], None] | None = None) -> None:
    """Execute a run's queued attempts one after another in this process, without Redis.

    Infrastructure failures come back queued and are taken again (bounded by the retries). Stops
    when nothing is queued, e.g. after the run was cancelled from elsewhere.
    """
    while True:
        attempt = run.attempts.filter(status=Attempt.QUEUED).order_by("pk").first()
        if attempt is None:
            break
        attempt_execute(attempt_id=attempt.pk, job_id="in-process", requeue=False)
        if progress is not None:
            progress()
    run_mark_finished(run_id=run.pk)
    run.refresh_from_db()
