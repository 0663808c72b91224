"""The kinds of work a job does on an attempt, described as data for the one claim/fence/retry path.

Three kinds exist: executing a run's attempt (`RUN_ATTEMPT`, defined here), re-executing a
submitted attempt's final patch (`runs.submissions.reexecution.REEXECUTION`) and judging one masked
function of a failed attempt alone (`runs.evaluation.transplants.TRANSPLANT`, whose rows are
Transplants, not Attempts); the last two are registered by their modules, which the `runs` app
imports when it is ready. runs.evaluation.claims claims, fences,
retries and records unstarted jobs for any kind; runs.evaluation.recovery heals every registered
kind; runs.evaluation.queue enqueues them. A kind says only what differs: which rows (of `model`) it may
claim, which it holds, on which queue its jobs go, what an infrastructure failure leaves on the attempt, and what to bring up
to date once one of its attempts is settled.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from runs.agents.llm import provider_module
from runs.benchmark.text import storable_text
from runs.models import Attempt, Run
from runs.signals import attempt_reexecuted, results_changed_send

# RQ kills a run attempt's job that runs longer than this beyond the agent's own time budget
# (re-execution, workspaces); the harness's budgets should always end an attempt first.
JOB_TIMEOUT_MARGIN_SECONDS = 3600

# The job id of work done in the process that asked for it (run_eval --sync), not by an RQ job.
IN_PROCESS = "in-process"


@dataclass(frozen=True)
class WorkKind:
    name: str
    job_function: str  # the RQ job, "module.function", called with the attempt id
    job_prefix: str  # job ids are "<deployment>-<prefix>-<attempt id>-try-<the try the job will make>"
    sandbox_prefix: str  # "", "submission-" or "transplant-": tells the kinds' sandboxes and directories apart
    claimable: Callable[[], Q]  # attempts a job of this kind may claim now
    held: Callable[[], Q]  # attempts claimed by a job of this kind and not settled yet
    waiting: Callable[[], Q]  # attempts whose job is queued but has not claimed them yet
    claim_fields: Callable[[datetime], dict]  # set by the claim, besides tries, claimed_by, heartbeat_at, job_id
    released_fields: Callable[[Attempt, str, bool], dict]  # after an infrastructure failure: (attempt, reason, retrying)
    settle: Callable[[Attempt], None]  # bring what depends on the attempt up to date once it is written
    job_timeout: Callable[[Attempt], int]
    select_related: tuple[str, ...] = ()
    keeps_partial_trajectory: bool = False  # an agent ran: keep what it recorded before the failure
    history_fields: dict = field(default_factory=dict)  # added to each infra_history entry
    # Called with (attempt ids, error) when the queue cannot be reached; None: the error propagates.
    enqueue_failed: Callable[[list[int], Exception], None] | None = None
    model: type = Attempt  # the rows claimed: a runs.models.evaluation.ClaimedWork (Attempt, Transplant)
    queue_name: Callable[[], str] = lambda: settings.EVALUATION_QUEUE  # the RQ queue its jobs go on
    run_field: str = "run"  # the lookup from a claimed row to its run
    sample_field: str = "sample"  # the lookup from a claimed row to its sample
    # Modules the job's work horse will import (an LLM SDK): the worker imports them before forking.
    preload: Callable[[Attempt], tuple[str, ...]] = lambda attempt: ()

    def job_id(self, attempt_id: int, tries: int) -> str:
        """The id of the job that makes try `tries + 1`: enqueueing it twice does nothing. It starts
        with this deployment's id: RQ's job keys are shared by everyone on the same Redis."""
        return f"{settings.DEPLOYMENT_ID}-{self.job_prefix}-{attempt_id}-try-{tries + 1}"


_KINDS: dict[str, WorkKind] = {}


def register(kind: WorkKind) -> WorkKind:
    _KINDS[kind.name] = kind
    return kind


def work_kinds() -> list[WorkKind]:
    return list(_KINDS.values())


def run_mark_finished(*, run_id: int) -> None:
    """Stamp the run's finished_at once no attempt of it is queued or running, and announce that one
    of its attempts was settled (every path that settles a run's attempt ends here)."""
    active = Attempt.objects.filter(run_id=run_id, status__in=[Attempt.QUEUED, Attempt.RUNNING]).exists()
    if not active:
        Run.objects.filter(pk=run_id, finished_at__isnull=True).update(finished_at=timezone.now())
    results_changed_send(run_ids=[run_id])


def _run_attempt_settled(attempt: Attempt) -> None:
    attempt_reexecuted.send(sender=None, attempt_id=attempt.pk, enqueue=attempt.job_id != IN_PROCESS)
    run_mark_finished(run_id=attempt.run_id)


def _run_attempt_released(attempt: Attempt, reason: str, retrying: bool) -> dict:
    if retrying:
        return {"status": Attempt.QUEUED}
    # Out of retries: an infrastructure failure is never the model's result.
    return {
        "status": Attempt.ERROR,
        "failure_label": Attempt.INFRASTRUCTURE,
        "failure_detail": storable_text(reason)[:8000],
        "finished_at": timezone.now(),
        "passed": False,
        "mismatch": False,
    }


RUN_ATTEMPT = register(
    WorkKind(
        name="attempt",
        job_function="runs.evaluation.jobs.attempt_execute_job",
        job_prefix="attempt",
        sandbox_prefix="",
        claimable=lambda: Q(status=Attempt.QUEUED),
        held=lambda: Q(status=Attempt.RUNNING),
        waiting=lambda: Q(status=Attempt.QUEUED),
        claim_fields=lambda now: {"status": Attempt.RUNNING, "claimed_at": now, "finished_at": None},
        released_fields=_run_attempt_released,
        settle=_run_attempt_settled,
        job_timeout=lambda attempt: int(attempt.run.max_seconds) + JOB_TIMEOUT_MARGIN_SECONDS,
        select_related=("run", "sample__paper__suite"),
        keeps_partial_trajectory=True,
        preload=lambda attempt: (module,) if (module := provider_module(attempt.run.model)) else (),
    )
)
