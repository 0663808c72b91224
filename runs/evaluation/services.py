"""Evaluation runs: create, enqueue, cancel, retry, resume, or execute in-process.

Plain functions with keyword-only arguments; views, jobs and management commands call these. One
RQ job per attempt, enqueued when the transaction that queued the attempt commits (a worker must
never be handed an attempt it cannot see yet). Job ids are `attempt-<id>-try-<n>`, n being the try
the job will make, so enqueueing an attempt that already has a live job does nothing; the claim in
`runs.evaluation.harness.attempt_execute` makes any duplicate that slips through a no-op.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from dataclasses import dataclass

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runs.agents import AGENTS
from runs.agents.llm import PROVIDERS, provider_module
from runs.benchmark.sampling import DEFAULT_CAP
from runs.benchmark.workspace import CONTEXT_CONDITIONS, Context
from runs.evaluation.claims import ClaimOutcome, InfrastructureFailure
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
from runs.suites.selectors import sample_experiments, suite_max_n, suite_sample_counts
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
    context: str = Context.FULL,
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
    `sample_seed` (created if they do not exist yet). Raises RunOptionsInvalid (a RunError) when an
    option is invalid (`run_options_problems`: the command and the site's form check with it too),
    and RunError when no sample with gold results is left.
    """
    problems = run_options_problems(
        suite=suite, agent=agent, model=model, n_values=n_values, attempts_per_sample=attempts_per_sample,
        agent_config=agent_config, context=context, sample_seed=sample_seed, sample_cap=sample_cap,
        max_steps=max_steps, max_seconds=max_seconds, max_cost=max_cost, sandbox_backend=sandbox_backend,
    )
    if problems:
        raise RunOptionsInvalid(problems)
    n_values = sorted(set(n_values))
    backend = "" if sandbox_backend == EACH_WORKERS_BACKEND else canonical_backend(sandbox_backend or settings.SANDBOX_BACKEND)

    with transaction.atomic():
        samples = samples_ensure(suite=suite, n_values=n_values, seed=sample_seed, cap=sample_cap)
        if not samples:
            raise RunError(f"suite {suite.name} has no samples for n={n_values} (papers without gold code have none)")
        experiment_counts = _scorable_experiment_counts(samples)
        run = Run.objects.create(
            suite=suite, agent=agent, agent_config=agent_config or {}, model=model, context=context, n_values=n_values,
            sample_seed=sample_seed, sample_cap=sample_cap, attempts_per_sample=attempts_per_sample, max_steps=max_steps,
            max_seconds=max_seconds, max_cost=max_cost, sandbox_backend=backend, description=description,
            created_by=created_by, transplants=transplants,
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


def _scorable_experiment_counts(samples) -> dict[int, int]:
    """How many experiments each sample has (by its pk); RunError for one with none, or with one
    that has no gold result to score against."""
    experiment_counts = {}
    for sample in samples:
        experiments = sample_experiments(sample=sample)
        experiment_counts[sample.pk] = len(experiments)
        if not experiments:
            raise RunError(f"sample {sample.sample_id} has no experiments to score")
        missing = [e.exp_id for e in experiments if e.gold_result is None]
        if missing:
            raise RunError(f"sample {sample.sample_id}: experiments {missing} have no gold result (run make_gold)")
    return experiment_counts


# A run's options as run_eval names them (--max-cost is max_cost) and the site's form names its
# fields: a problem is reported against the one it is about.
OPTION_NAMES = {
    "suite": "suite", "agent": "agent", "model": "model", "n_values": "n", "attempts_per_sample": "k",
    "sample_seed": "seed", "sample_cap": "cap", "context": "context", "max_steps": "max_steps",
    "max_seconds": "max_seconds", "max_cost": "max_cost", "agent_config": "agent_config",
    "sandbox_backend": "backend", "description": "description",
}
# Settings a run holds in fields of its own: in agent_config they would override them at the worker
# (runs.evaluation.harness.attempt_agent), past the checks below and the cost estimate's per-attempt cap.
RESERVED_AGENT_SETTINGS = ("max_steps", "max_seconds", "max_cost", "context")
# Run.sample_seed and Run.sample_cap are 32-bit integer columns.
INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class OptionProblem:
    """What is wrong with one option of a run: `field` is its name in OPTION_NAMES' values."""

    field: str
    message: str


class RunOptionsInvalid(RunError):
    """Options a run cannot be created with; `problems` names each option and what is wrong with it."""

    def __init__(self, problems: list[OptionProblem]):
        self.problems = problems
        super().__init__("; ".join(f"{problem.field}: {problem.message}" for problem in problems))


def run_max_attempts() -> int:
    """How many attempts one run may hold (RUN_MAX_ATTEMPTS)."""
    return settings.RUN_MAX_ATTEMPTS


def run_options_problems(
    *,
    suite: Suite | None,
    agent: str,
    n_values: list[int],
    attempts_per_sample: int = 1,
    model: str = "",
    agent_config: dict | None = None,
    context: str = Context.FULL,
    sample_seed: int = 0,
    sample_cap: int = DEFAULT_CAP,
    max_steps: int = 50,
    max_seconds: float = 1800.0,
    max_cost: float = 1.0,
    sandbox_backend: str | None = None,
) -> list[OptionProblem]:
    """Everything wrong with a run's options, each named by its option: the one check that
    run_create, `manage.py run_eval` and the site's run form (runs.evaluation.forms) share. Reads
    but writes nothing: how many samples the run would have is counted, not drawn. `suite` None:
    the caller could not find the suite and said so; the checks that need it are left out."""
    problems: list[OptionProblem] = []

    def add(option: str, message: str) -> None:
        problems.append(OptionProblem(OPTION_NAMES[option], message))

    agent_known = _check_agent_and_model(add, agent=agent, model=model)
    if context not in CONTEXT_CONDITIONS:
        add("context", f"context must be one of {', '.join(CONTEXT_CONDITIONS)}")
    sizes_ok = _check_sizes(add, suite=suite, n_values=n_values, attempts_per_sample=attempts_per_sample,
                            sample_seed=sample_seed, sample_cap=sample_cap)
    budgets = {"max_steps": max_steps, "max_seconds": max_seconds, "max_cost": max_cost}
    budgets_ok = _check_budgets(add, **budgets)
    try:
        if sandbox_backend != EACH_WORKERS_BACKEND:
            canonical_backend(sandbox_backend or settings.SANDBOX_BACKEND)
    except SandboxError:
        add("sandbox_backend", f"sandbox backend must be one of {', '.join([*BACKENDS, EACH_WORKERS_BACKEND])}")
    _check_agent_config(add, agent=agent, agent_config=agent_config, buildable=agent_known and budgets_ok, budgets=budgets)
    if suite is not None and sizes_ok:
        samples = sum(suite_sample_counts(suite=suite, n_values=n_values, cap=sample_cap).values())
        attempts = samples * attempts_per_sample
        if attempts > run_max_attempts():
            add("attempts_per_sample", f"the run would hold {attempts:,} attempts ({samples:,} samples x k={attempts_per_sample}); "
                                       f"a run may hold at most {run_max_attempts():,} (RUN_MAX_ATTEMPTS): lower k, "
                                       "the n values or the sample cap")
    return problems


# How each check of run_options_problems reports a problem: add(option, message).
AddProblem = Callable[[str, str], None]


def _check_agent_and_model(add: AddProblem, *, agent: str, model: str) -> bool:
    """Whether the agent is known; a model spec where the agent needs one."""
    if agent not in AGENTS:
        add("agent", f"unknown agent {agent!r}; known agents: {', '.join(sorted(AGENTS))}")
        return False
    if AGENTS[agent].needs_model:
        if not model:
            add("model", f"agent {agent!r} needs a model (--model provider:name, e.g. openai:gpt-4o)")
        elif provider_module(model) is None:
            add("model", f"{model!r} is not a model spec: <provider>:<model>, provider one of {', '.join(PROVIDERS)}")
    return True


def _check_sizes(add: AddProblem, *, suite: Suite | None, n_values: list[int], attempts_per_sample: int, sample_seed: int,
                 sample_cap: int) -> bool:
    """n, k, the sample cap and the seed; whether the run's size can be counted from them."""
    n_ok = bool(n_values) and all(n >= 1 for n in n_values)
    if not n_ok:
        add("n_values", "n values must be at least 1 (e.g. 1,2)")
    elif suite is not None:
        max_n = suite_max_n(suite=suite)
        above = sorted({n for n in n_values if n > max_n})
        if above:
            n_ok = False
            add("n_values", f"n={','.join(map(str, above))} is above suite {suite.name}'s maximum of {max_n} "
                            "(the most maskable functions one of its papers with gold code holds)")
    k_ok = attempts_per_sample >= 1
    if not k_ok:
        add("attempts_per_sample", f"k must be at least 1, got {attempts_per_sample}")
    cap_ok = 1 <= sample_cap <= INT32_MAX
    if not cap_ok:
        add("sample_cap", f"the sample cap must be between 1 and {INT32_MAX:,}, got {sample_cap}")
    if not -INT32_MAX - 1 <= sample_seed <= INT32_MAX:
        add("sample_seed", f"the seed must be between {-INT32_MAX - 1:,} and {INT32_MAX:,}")
    return n_ok and k_ok and cap_ok


def _check_budgets(add: AddProblem, *, max_steps: int, max_seconds: float, max_cost: float) -> bool:
    """Whether every budget is positive and the steps fit in a trajectory."""
    budgets_ok = True
    step_limit = trajectory_limits().steps
    if max_steps < 1:
        budgets_ok = False
        add("max_steps", f"budgets must be positive: max steps is {max_steps}")
    elif max_steps > step_limit:
        budgets_ok = False
        add("max_steps", f"max steps is {max_steps:,}; a trajectory holds at most {step_limit:,} steps (TRAJECTORY_MAX_STEPS)")
    for option, value, unit in (("max_seconds", max_seconds, "seconds"), ("max_cost", max_cost, "USD")):
        if not (math.isfinite(value) and value > 0):
            budgets_ok = False
            add(option, f"budgets must be positive: {option.replace('_', ' ')} is {value} {unit}")
    return budgets_ok


def agent_config_problems(*, agent: str, agent_config, max_steps: int, max_seconds: float, max_cost: float) -> list[str]:
    """What is wrong with a registered agent's settings beside a run's budgets, as the run form
    and run_eval say it (the admin's run form checks an edited agent_config with it)."""
    problems: list[str] = []
    budgets = {"max_steps": max_steps, "max_seconds": max_seconds, "max_cost": max_cost}
    _check_agent_config(lambda option, message: problems.append(message), agent=agent, agent_config=agent_config,
                        buildable=agent in AGENTS, budgets=budgets)
    return problems


def _check_agent_config(add: AddProblem, *, agent: str, agent_config: dict | None, buildable: bool, budgets: dict) -> None:
    """The agent settings: a JSON object, none of the run's own options, and (when the agent is
    known and the budgets valid: `buildable`) settings the agent accepts."""
    config = agent_config if agent_config is not None else {}
    if not isinstance(config, dict):
        add("agent_config", "agent settings must be a JSON object")
    elif reserved := [key for key in RESERVED_AGENT_SETTINGS if key in config]:
        add("agent_config", f"{', '.join(reserved)} {'is an option' if len(reserved) == 1 else 'are options'} of the run "
                            "itself: set it there, not among the agent settings")
    elif buildable:
        problem = _agent_settings_problem(agent, config, **budgets)
        if problem:
            add("agent_config", problem)


def _agent_settings_problem(agent: str, config: dict, **budgets) -> str | None:
    """Build the agent once as the workers will (without gold bodies), so that a misspelt or
    invalid setting fails here rather than as an infrastructure error in every attempt."""
    agent_settings = {**budgets, **config}
    if AGENTS[agent].needs_gold_bodies:
        agent_settings["gold_bodies"] = {}
    try:
        construct_agent(agent, agent_settings, optional=tuple(budgets))
    except InfrastructureFailure as error:
        return str(error)
    return None


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
        r for r in attempts_recover(run=run, stale_after=stale_after, requeue=False, kinds=[RUN_ATTEMPT]) if r.outcome != ClaimOutcome.LOST
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
