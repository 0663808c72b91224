"""Evaluation runs: create, enqueue, cancel, retry, resume, or execute in-process.

Plain functions with keyword-only arguments; views, jobs and management commands call these. One
RQ job per attempt, enqueued when the transaction that queued the attempt commits (a worker must
never be handed an attempt it cannot see yet). Job ids are `attempt-<id>-try-<n>`, n being the try
the job will make, so enqueueing an attempt that already has a live job does nothing; the claim in
`runs.evaluation.harness.attempt_execute` makes any duplicate that slips through a no-op.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runs.agents import AGENTS
from runs.benchmark.sampling import DEFAULT_CAP
from runs.benchmark.workspace import CONTEXT_CONDITIONS
from runs.evaluation.claims import LOST, InfrastructureFailure
from runs.evaluation.harness import attempt_execute, construct_agent
from runs.evaluation.kinds import IN_PROCESS, RUN_ATTEMPT, run_mark_finished
from runs.evaluation.queue import (
    attempts_enqueue,
    cancel_jobs,
    job_id_for,
    live_job,
)
from runs.evaluation.recovery import attempts_recover
from runs.evaluation.transplants import transplants_cancel, transplants_execute_sync
from runs.limits import trajectory_limits
from runs.models import Attempt, Run, Suite
from runs.signals import results_changed_send
from runs.suites.selectors import sample_experiments
from runs.suites.services import samples_ensure
from sandbox import BACKENDS, SandboxError, canonical_backend

# A run created with this backend (stored blank, as submissions' runs are) runs each attempt in the
# sandbox of the worker that claims it (its SANDBOX_BACKEND): hosts with Docker and hosts with
# bubblewrap then share one run. A run naming a backend needs it on every worker host.
EACH_WORKERS_BACKEND = "any"


class RunError(ValueError):
    """A run that cannot be created as asked (unknown agent, no samples, no gold results...)."""


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
    transplants: bool = True,
) -> Run:
    """Create a run with one queued attempt per sample and index (k per sample) and, unless
    `enqueue` is False (in-process runs), enqueue their jobs when the transaction commits.

    The samples are the suite's, for each n, at most `sample_cap` per paper drawn with
    `sample_seed` (created if they do not exist yet). Raises RunError when the agent is unknown,
    a model-based agent has no model, or no sample with gold results is left.
    """
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
    try:
        backend = "" if sandbox_backend == EACH_WORKERS_BACKEND else canonical_backend(sandbox_backend or settings.SANDBOX_BACKEND)
    except SandboxError:
        raise RunError(f"sandbox backend must be one of {', '.join([*BACKENDS, EACH_WORKERS_BACKEND])}") from None
    _check_agent_settings(agent, agent_config or {}, max_steps=max_steps, max_seconds=max_seconds, max_cost=max_cost)

    with transaction.atomic():
        samples = samples_ensure(suite=suite, n_values=n_values, seed=sample_seed, cap=sample_cap)
        if not samples:
            raise RunError(f"suite {suite.name} has no samples for n={n_values} (papers without gold code have none)")
        experiment_counts = {}
        for sample in samples:
            experiments = sample_experiments(sample=sample)
            experiment_counts[sample.pk] = len(experiments)
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
            transplants=transplants,
        )
        attempts = Attempt.objects.bulk_create(
            [Attempt(run=run, sample=sample, index=index) for sample in samples for index in range(attempts_per_sample)]
        )
        for attempt in attempts:
            attempt.run = run
        if enqueue:
            # Longest first, by the experiments each attempt runs (twice: the agent's run and the
            # re-execution): the workers then end the run on short attempts and finish it together,
            # where in the suite's order one could be left with a paper's longest samples alone.
            attempts_enqueue(attempts=sorted(attempts, key=lambda attempt: -experiment_counts[attempt.sample_id]))
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
    jobs leave the queue, and so do its queued transplants (runs.evaluation.transplants). Running
    attempts finish and, like finished ones, keep their results. Returns how many attempts were cancelled."""
    now = timezone.now()
    Run.objects.filter(pk=run.pk, cancelled_at__isnull=True).update(cancelled_at=now)
    queued = list(run.attempts.filter(status=Attempt.QUEUED).select_related("run"))
    cancelled = Attempt.objects.filter(pk__in=[a.pk for a in queued], status=Attempt.QUEUED).update(
        status=Attempt.CANCELLED, finished_at=now
    )
    job_ids = [job_id_for(attempt) for attempt in queued]
    transaction.on_commit(lambda: cancel_jobs(job_ids))
    transplants_cancel(run_id=run.pk)
    transaction.on_commit(lambda: run_mark_finished(run_id=run.pk))
    run.refresh_from_db()
    return cancelled


def runs_set_hidden(*, runs: Iterable[Run], hidden: bool) -> int:
    """Hide runs (and so their attempts and submission) from everyone but their owner and staff,
    or show them again (see runs.visibility). Who may do it is the caller's check. Returns how many."""
    run_ids = [run.pk for run in runs]
    with transaction.atomic():
        changed = Run.objects.filter(pk__in=run_ids).update(hidden=hidden)
        results_changed_send(run_ids=run_ids)
    return changed


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
        results_changed_send(run_ids=[run.pk])
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
    when out of retries; see runs.evaluation.recovery.attempts_recover), cancelled attempts are queued again,
    and every queued attempt without a live RQ job gets one. Attempts that are done keep their
    results, so after a resume each attempt still has exactly one.
    """
    # A run's attempts only: a submission's re-executions are queued again by Re-execute, not Resume.
    recovered = [
        r for r in attempts_recover(run=run, stale_after=stale_after, requeue=False, kinds=[RUN_ATTEMPT]) if r.outcome != LOST
    ]
    with transaction.atomic():
        uncancelled = run.attempts.filter(status=Attempt.CANCELLED).update(status=Attempt.QUEUED, finished_at=None)
        queued = list(run.attempts.filter(status=Attempt.QUEUED).select_related("run"))
        Run.objects.filter(pk=run.pk).update(cancelled_at=None, **({"finished_at": None} if queued else {}))
        results_changed_send(run_ids=[run.pk])
        enqueued = 0
        if enqueue:
            without_job = [attempt for attempt in queued if not live_job(job_id_for(attempt))]
            attempts_enqueue(attempts=without_job)
            enqueued = len(without_job)
    run.refresh_from_db()
    return ResumeReport(recovered=len(recovered), uncancelled=uncancelled, enqueued=enqueued)


def run_execute_sync(*, run: Run, progress: Callable[[], None] | None = None) -> None:
    """Execute a run's queued attempts one after another in this process, without Redis.

    Infrastructure failures come back queued and are taken again (bounded by the retries). The
    transplants of a failed attempt at n >= 2 (runs.evaluation.transplants) are executed right
    after it. Stops when nothing is queued, e.g. after the run was cancelled from elsewhere.
    """
    while True:
        attempt = run.attempts.filter(status=Attempt.QUEUED).order_by("pk").first()
        if attempt is None:
            break
        attempt_execute(attempt_id=attempt.pk, job_id=IN_PROCESS, requeue=False)
        transplants_execute_sync(attempt_id=attempt.pk)
        if progress is not None:
            progress()
    run_mark_finished(run_id=run.pk)
    run.refresh_from_db()
