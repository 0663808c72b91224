"""Re-executing a submitted attempt: the harness's own run of its final patch, through the same
claim / heartbeat / fence / infrastructure-retry / recovery path as a run's attempts.

`ReexecutionKind` describes this kind of work to runs.evaluation.claims (`REEXECUTION`, registered
when this module is imported; the `runs` app imports it when it is ready, so every worker heals
it): which submitted attempts a job may claim and holds, and what an infrastructure failure leaves.
Each settled attempt brings its submission's status up to date; once every attempt has a verdict
the submission is verified.
"""
from __future__ import annotations

import logging
from pathlib import Path
from types import MappingProxyType
from typing import Any

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from runs.benchmark.text import json_safe, storable_text
from runs.evaluation.claims import ClaimOutcome, Heartbeat, execute, max_infra_retries
from runs.evaluation.kinds import IN_PROCESS, WorkKind, register
from runs.evaluation.verdicts import failure_label, reexecute, with_tolerance_ratio
from runs.evaluation.workdirs import attempt_reexecution_dir, attempt_sandbox_name, remove_tree
from runs.models import Attempt, Submission
from runs.signals import attempt_reexecuted, results_changed_send

logger = logging.getLogger(__name__)


def reexecution_job_timeout() -> int:
    """RQ kills a re-execution job after this many seconds (default 2 h)."""
    return settings.SUBMISSION_REEXECUTION_TIMEOUT


def _unsettled() -> Q:
    """Submitted attempts without a re-execution verdict."""
    return Q(run__submission__isnull=False, status=Attempt.DONE, reexecution_passed__isnull=True)


class ReexecutionKind(WorkKind):
    """Re-executing a submitted attempt (`attempt_reexecute`). A job may claim a submitted attempt
    that has no re-execution verdict, is not held by another job and has retries left; it holds it
    while `heartbeat_at` is set. An infrastructure failure records the reason in
    `reexecution_error` and releases it for another try; out of retries it stays without a verdict
    (`submission_refresh` then says the submission is incomplete)."""

    name = "reexecution"
    job_function = "runs.submissions.jobs.attempt_reexecute_job"
    job_prefix = "reexecute-attempt"
    sandbox_prefix = "submission-"
    select_related = ("run__submission", "sample__paper__suite")
    history_fields = MappingProxyType({"kind": "reexecution"})

    def claimable(self) -> Q:
        return _unsettled() & Q(heartbeat_at__isnull=True, infra_failures__lte=max_infra_retries())

    def held(self) -> Q:
        return _unsettled() & Q(heartbeat_at__isnull=False)

    def waiting(self) -> Q:
        return _unsettled() & Q(
            run__submission__status=Submission.Status.REEXECUTING, heartbeat_at__isnull=True, infra_failures__lte=max_infra_retries()
        )

    def released_fields(self, row: Attempt, reason: str, retrying: bool) -> dict[str, Any]:
        # Out of retries the attempt simply stays without a verdict: infra_failures past the limit is
        # what marks it given up (submission_refresh reports it; Re-execute starts a fresh allowance).
        return {"reexecution_error": storable_text(f"re-execution could not run (infrastructure failure): {reason}")[:8000]}

    def settle(self, row: Attempt) -> None:
        attempt_reexecuted.send(sender=None, attempt_id=row.pk, enqueue=row.job_id != IN_PROCESS)
        submission_refresh(submission_id=row.run.submission.pk)  # loaded with the attempt (select_related)
        results_changed_send(run_ids=[row.run_id])

    def job_timeout(self, row: Attempt) -> int:
        return reexecution_job_timeout()

    def enqueue_failed(self, row_ids: list[int], error: Exception) -> None:
        """The submission is stored already: a queue that cannot be reached is reported on the
        submission (press Re-execute later), never raised."""
        logger.error("re-execution of attempts %s could not be queued", row_ids, exc_info=error)
        Submission.objects.filter(run__attempts__pk__in=row_ids).update(
            status=Submission.Status.INCOMPLETE,
            status_detail=f"re-execution could not be queued ({type(error).__name__}: {error}); press Re-execute to try again",
        )


REEXECUTION = register(ReexecutionKind())


def attempt_reexecute(*, attempt_id: int, job_id: str = "", requeue: bool = True) -> ClaimOutcome:
    """Re-execute one submitted attempt's patch in a fresh sandbox and record the verdict.

    Does nothing (SKIPPED) unless the attempt belongs to a submission, has no re-execution verdict
    yet, has retries left and is not held by another job. Infrastructure failures are re-queued
    (with `requeue`) while retries are left, then given up (ERROR) with the reason in
    `reexecution_error`. Returns DONE, REQUEUED, ERROR, LOST or SKIPPED."""
    return execute(REEXECUTION, _verdict_fields, attempt_id=attempt_id, job_id=job_id, requeue=requeue, cleanup=_cleanup)


def _workspace(attempt: Attempt) -> Path:
    return attempt_reexecution_dir(attempt.pk, attempt.tries, prefix=REEXECUTION.sandbox_prefix)


def _verdict_fields(attempt: Attempt, heartbeat: Heartbeat) -> dict:
    result = reexecute(
        sample=attempt.sample,
        patch=attempt.final_patch,
        context=attempt.run.context,
        backend=settings.SANDBOX_BACKEND,
        dest=_workspace(attempt),
        name=attempt_sandbox_name(attempt.pk, attempt.tries, prefix=REEXECUTION.sandbox_prefix),
    )
    heartbeat.check()
    reported_passed = bool(attempt.reported_passed)
    passed = reported_passed and result.passed
    mismatch = reported_passed and not result.passed and not result.too_large
    timings = dict(attempt.timings or {})
    timings.update({f"reexecution_{key}": value for key, value in result.timings.items()})
    return with_tolerance_ratio({
        **result.stored_fields(),
        "reexecution_seconds": sum(result.timings.values()),
        "experiment_seconds": result.experiment_seconds,
        "timings": json_safe(timings),
        "passed": passed,
        "mismatch": mismatch,
        "failure_label": failure_label(
            exit_status=attempt.exit_status,
            final_answer_raw=attempt.final_answer_raw,
            answer_parsed=attempt.parsed_answer is not None,
            passed=passed,
        ),
        "failure_detail": result.failure_detail(reported_passed=reported_passed),
    }, attempt)


def _cleanup(attempt: Attempt) -> None:
    remove_tree(_workspace(attempt))


def submission_refresh(*, submission_id: int) -> Submission:
    """Bring the submission's status up to date with its attempts; marks it verified once every
    attempt has a re-execution verdict (the only way `verified_at` is ever set)."""
    with transaction.atomic():
        submission = Submission.objects.select_for_update().select_related("run").get(pk=submission_id)
        attempts = submission.run.attempts
        pending = attempts.filter(reexecution_passed__isnull=True)
        if not pending.exists():
            if submission.verified_at is None:
                mismatches = attempts.filter(mismatch=True).count()
                submission.verified_at = timezone.now()
                submission.status = Submission.Status.VERIFIED
                submission.status_detail = f"every attempt re-executed; {mismatches} reported result(s) not reproduced"
                submission.save(update_fields=["verified_at", "status", "status_detail"])
        elif submission.status == Submission.Status.REEXECUTING:
            given_up = pending.filter(infra_failures__gt=max_infra_retries()).count()
            active = pending.count() - given_up
            if not active:
                submission.status = Submission.Status.INCOMPLETE
                submission.status_detail = (
                    f"{given_up} attempt(s) could not be re-executed (infrastructure failures); press Re-execute to try again"
                )
                submission.save(update_fields=["status", "status_detail"])
    return submission
