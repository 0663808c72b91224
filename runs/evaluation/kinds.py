"""The kinds of work a job does on a claimed row, one class each, for the one claim/fence/retry path.

Three kinds exist: executing a run's attempt (`RunAttemptKind`, `RUN_ATTEMPT`, defined here),
re-executing a submitted attempt's final patch (runs.submissions.reexecution `ReexecutionKind`,
`REEXECUTION`) and judging one masked function of a failed attempt alone
(runs.evaluation.transplants `TransplantKind`, `TRANSPLANT`, whose rows are Transplants, not
Attempts); the last two are registered by their modules, which the `runs` app imports when it is
ready. runs.evaluation.claims claims, fences, retries and records unstarted jobs for any kind;
runs.evaluation.recovery heals every registered kind; runs.evaluation.queue enqueues them.

A kind says only what differs (`WorkKind`; `StatusKind` for rows with a status of their own):
which rows (of `model`) it may claim, which it holds, on which queue its jobs go, what an
infrastructure failure leaves on the row, and what to bring up to date once one of its rows is
settled. The work itself (`perform`) is handed to
runs.evaluation.claims.execute by the module that does it: runs.evaluation.harness for a run's
attempt.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from datetime import datetime
from types import MappingProxyType
from typing import Any, ClassVar

from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from runs.agents.llm import provider_module
from runs.benchmark.text import storable_text
from runs.models import Attempt, Run
from runs.models.evaluation import ClaimedWork
from runs.signals import attempt_reexecuted, results_changed_send

# RQ kills a run attempt's job that runs longer than this beyond the agent's own time budget
# (re-execution, workspaces); the harness's budgets should always end an attempt first.
JOB_TIMEOUT_MARGIN_SECONDS = 3600

# The job id of work done in the process that asked for it (run_eval --sync), not by an RQ job.
IN_PROCESS = "in-process"


class WorkKind(ABC):
    """One kind of work: a subclass sets the class attributes and defines the abstract methods; the
    others have the defaults most kinds want. Rows are instances of `model` (a ClaimedWork)."""

    name: ClassVar[str]
    job_function: ClassVar[str]  # the RQ job, "module.function", called with the row's id
    job_prefix: ClassVar[str]  # job ids are "<deployment>-<prefix>-<row id>-try-<the try the job will make>"
    sandbox_prefix: ClassVar[str]  # "", "submission-" or "transplant-": tells the kinds' sandboxes and directories apart
    model: ClassVar[type[ClaimedWork]] = Attempt  # the rows claimed
    select_related: ClassVar[tuple[str, ...]] = ()  # loaded with a claimed row
    keeps_partial_trajectory: ClassVar[bool] = False  # an agent ran: keep what it recorded before a failure
    history_fields: ClassVar[Mapping[str, str]] = MappingProxyType({})  # added to each infra_history entry
    run_field: ClassVar[str] = "run"  # the lookup from a claimed row to its run
    sample_field: ClassVar[str] = "sample"  # the lookup from a claimed row to its sample

    @abstractmethod
    def claimable(self) -> Q:
        """The rows a job of this kind may claim now."""

    @abstractmethod
    def held(self) -> Q:
        """The rows claimed by a job of this kind and not settled yet."""

    @abstractmethod
    def waiting(self) -> Q:
        """The rows whose job is queued but has not claimed them yet."""

    def claim_fields(self, now: datetime) -> dict[str, Any]:
        """Set by the claim, besides tries, claimed_by, heartbeat_at and job_id."""
        return {}

    @abstractmethod
    def released_fields(self, row: Any, reason: str, retrying: bool) -> dict[str, Any]:
        """Set on `row` after an infrastructure failure (`reason`), released for another try or,
        without `retrying`, given up."""

    @abstractmethod
    def settle(self, row: Any) -> None:
        """Bring what depends on `row` up to date once its result (or its failure) is written."""

    @abstractmethod
    def job_timeout(self, row: Any) -> int:
        """The seconds after which RQ kills the job working on `row`."""

    def queue_name(self) -> str:
        """The RQ queue this kind's jobs go on."""
        return settings.EVALUATION_QUEUE

    def preload(self, row: Any) -> tuple[str, ...]:
        """Modules the job's work horse will import (an LLM SDK): the worker imports them before forking."""
        return ()

    def enqueue_failed(self, row_ids: list[int], error: Exception) -> None:
        """The queue could not be reached while enqueueing the jobs of `row_ids`: by default the
        error propagates."""
        raise error

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


class StatusKind(WorkKind):
    """A kind whose rows carry a status of their own: a job claims a row that is `queued_status`,
    which the claim makes `running_status`, and holds it while it is (a run's attempt, a transplant)."""

    queued_status: ClassVar[str]
    running_status: ClassVar[str]

    def claimable(self) -> Q:
        return Q(status=self.queued_status)

    def held(self) -> Q:
        return Q(status=self.running_status)

    def waiting(self) -> Q:
        return Q(status=self.queued_status)

    def claim_fields(self, now: datetime) -> dict[str, Any]:
        return {"status": self.running_status, "claimed_at": now, "finished_at": None}


class RunAttemptKind(StatusKind):
    """Executing a run's attempt (runs.evaluation.harness.attempt_execute): its agent, then both
    verdicts. Claims queued attempts, holds running ones."""

    name = "attempt"
    job_function = "runs.evaluation.jobs.attempt_execute_job"
    job_prefix = "attempt"
    sandbox_prefix = ""
    select_related = ("run", "sample__paper__suite")
    keeps_partial_trajectory = True
    queued_status = Attempt.QUEUED
    running_status = Attempt.RUNNING

    def released_fields(self, row: Attempt, reason: str, retrying: bool) -> dict[str, Any]:
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

    def settle(self, row: Attempt) -> None:
        attempt_reexecuted.send(sender=None, attempt_id=row.pk, enqueue=row.job_id != IN_PROCESS)
        run_mark_finished(run_id=row.run_id)

    def job_timeout(self, row: Attempt) -> int:
        return int(row.run.max_seconds) + JOB_TIMEOUT_MARGIN_SECONDS

    def preload(self, row: Attempt) -> tuple[str, ...]:
        module = provider_module(row.run.model)
        return (module,) if module else ()


RUN_ATTEMPT = register(RunAttemptKind())
