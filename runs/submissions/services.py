"""Writes for submissions: storing an upload, re-executing its patches, API tokens.

Storing is all-or-nothing: the upload is checked completely first (runs.submissions.validation,
every problem reported), then the Submission, its Run and one Attempt per record are created in
one transaction. Attempts are scored against the stored gold on the way in (`reported_*`);
`passed` stays False until the harness has re-executed the attempt's patch itself.

Re-execution (runs.evaluation.verdicts.reexecute: the patch applied to a fresh masked workspace, every
experiment run in a fresh sandbox of settings.SANDBOX_BACKEND, the printed numbers scored) runs
as one RQ job per attempt, enqueued when the requesting transaction commits. A job claims its
attempt with a conditional UPDATE (not yet re-executed, no live claim: `heartbeat_at` empty or
older than the stale limit; `tries` + 1), and writes its verdict only while that claim (the try
number) is still its own, so a job delivered twice does the work once. When no attempt of a
submission is left without a re-execution verdict, the submission is marked verified.
"""
from __future__ import annotations

import hashlib
import json
import logging
import secrets
import traceback
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.db.models import F, Q
from django.utils import timezone

from runs.benchmark.scoring import parse_answer, score_sample
from runs.benchmark.text import json_safe
from runs.evaluation.claims import InfrastructureFailure, max_infra_retries, retry_delay_seconds, worker_identity
from runs.evaluation.verdicts import failure_label, reexecute, score_dict, scoring_specs
from runs.evaluation.workdirs import attempt_sandbox_name, remove_tree
from runs.models import ApiToken, Attempt, Run, Submission
from runs.submissions.validation import Record, ValidatedSubmission, submission_validate

logger = logging.getLogger(__name__)

SUBMITTED = "submitted"  # the exit status of an uploaded attempt
JOB_FUNCTION = "runs.submissions.jobs.attempt_reexecute_job"
TOKEN_PREFIX = "aex_"
MAX_ACTIVE_TOKENS = 20

# Outcomes of attempt_reexecute.
SKIPPED, DONE, REQUEUED, GAVE_UP, LOST = "skipped", "done", "requeued", "gave_up", "lost"


def reexecution_job_timeout() -> int:
    """RQ kills a re-execution job after this many seconds (default 2 h)."""
    return int(getattr(settings, "SUBMISSION_REEXECUTION_TIMEOUT", 2 * 3600))


def reexecution_stale_seconds() -> int:
    """A claim older than this belongs to a dead worker and may be taken over."""
    return reexecution_job_timeout() + 600


# --- storing -------------------------------------------------------------------------------------


def submission_create(
    *,
    data: bytes,
    filename: str = "",
    uploader,
    reexecute: bool = False,
    token: ApiToken | None = None,
    channel: str = Submission.WEB,
    enqueue: bool = True,
) -> Submission:
    """Check an upload and store it as a submission with its run and attempts, scored against gold.

    Raises SubmissionTooLarge or SubmissionInvalid (every problem found) and then stores nothing.
    With `reexecute`, every attempt is queued for re-execution once the transaction commits
    (`enqueue=False` queues nothing: tests and in-process callers run
    `submission_reexecute_sync`), unless that would take the uploader over their cap on queued
    re-executions: then the submission is stored without it and `status_detail` says why.
    """
    validated = submission_validate(data=data, filename=filename)
    header = validated.header
    now = timezone.now()
    with transaction.atomic():
        run = Run.objects.create(
            suite=validated.suite,
            agent=header.agent,
            agent_config={"submitted": True},
            model=header.model,
            context=header.context,
            n_values=sorted({sample.n for sample in validated.samples.values()}),
            attempts_per_sample=max(record.attempt_index for record in validated.records) + 1,
            sandbox_backend="",
            description=header.description,
            created_by=uploader,
            finished_at=now,
        )
        submission = Submission.objects.create(
            run=run,
            uploader=uploader,
            token=token,
            channel=channel,
            model=header.model,
            agent=header.agent,
            description=header.description,
            contact=header.contact,
            filename=(filename or "")[:255],
            file_sha256=validated.sha256,
            file_bytes=validated.size,
            record_count=len(validated.records),
        )
        attempts = Attempt.objects.bulk_create(
            [_attempt(run, record, validated, now) for record in validated.records], batch_size=500
        )
        if reexecute:
            try:
                if enqueue:  # in-process re-execution (enqueue=False) puts nothing on the queue
                    reexecution_quota_check(submission=submission, requested_by=uploader, adding=len(attempts))
                _request_reexecution(submission, attempts, enqueue=enqueue)
            except ReexecutionRefused as refused:
                # The upload itself is fine: keep it, scored, and say why nothing was queued.
                submission.status_detail = f"re-execution was not queued: {refused}"
                submission.save(update_fields=["status_detail"])
    return submission


def _attempt(run: Run, record: Record, validated: ValidatedSubmission, now) -> Attempt:
    sample = validated.samples[record.sample_id]
    experiments = validated.experiments[record.sample_id]
    answer = record.final_answer
    if answer is None:
        raw, parsed = None, None
    else:
        raw = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        parsed = parse_answer(answer)
    reported = score_sample(experiments=scoring_specs(experiments), answer=parsed) if parsed is not None else None
    reported_passed = bool(reported and reported.passed)
    return Attempt(
        run=run,
        sample=sample,
        index=record.attempt_index,
        status=Attempt.DONE,
        exit_status=SUBMITTED,
        final_answer_raw=None if raw is None else raw.replace("\x00", ""),
        parsed_answer=json_safe(parsed.value) if parsed is not None and parsed.ok else None,
        reported_score=score_dict(reported, experiments) if reported is not None else None,
        reported_passed=reported_passed,
        passed=False,
        mismatch=False,
        # Labelled by the reported verdict until re-execution gives the final one.
        failure_label=failure_label(
            exit_status=SUBMITTED,
            final_answer_raw=raw,
            answer_parsed=bool(parsed is not None and parsed.ok),
            passed=reported_passed,
        ),
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        cost=record.cost,
        agent_seconds=record.seconds,
        trajectory=json_safe(record.trajectory) if record.trajectory is not None else None,
        final_patch=record.final_patch or "",
        finished_at=now,
    )


# --- re-execution --------------------------------------------------------------------------------


class ReexecutionRefused(Exception):
    """Queuing these re-executions would take the uploader over MAX_QUEUED_REEXECUTIONS_PER_USER."""


def reexecution_quota() -> int:
    """How many re-execution attempts of one user's submissions may be queued or running at once."""
    return int(getattr(settings, "MAX_QUEUED_REEXECUTIONS_PER_USER", 300))


def reexecutions_queued(*, user, exclude_submission: Submission | None = None) -> int:
    """Re-execution attempts of `user`'s submissions queued or running: requested, no verdict yet,
    not given up after infrastructure failures."""
    attempts = Attempt.objects.filter(
        run__submission__uploader=user,
        run__submission__status=Submission.REEXECUTING,
        reexecution_passed__isnull=True,
        infra_failures__lte=max_infra_retries(),
    )
    if exclude_submission is not None:
        attempts = attempts.exclude(run__submission=exclude_submission)
    return attempts.count()


def reexecution_quota_check(*, submission: Submission, requested_by, adding: int) -> None:
    """Raise ReexecutionRefused if queuing `adding` attempts of `submission` would leave its
    uploader with more than `reexecution_quota()` queued or running. Staff, requesting or
    uploading, are exempt. Call inside the transaction that queues them: it locks the uploader's
    row, so two requests at once cannot both pass on the same room."""
    owner = submission.uploader
    if owner is None or owner.is_staff or (requested_by is not None and requested_by.is_staff):
        return
    get_user_model().objects.select_for_update().filter(pk=owner.pk).first()
    queued = reexecutions_queued(user=owner, exclude_submission=submission)
    cap = reexecution_quota()
    if queued + adding > cap:
        raise ReexecutionRefused(
            f"{owner.get_username()} has {queued} re-execution attempt(s) queued or running and this would add "
            f"{adding}, over the limit of {cap} per user; request it again once some have finished"
        )


def submission_request_reexecution(*, submission: Submission, requested_by=None, enqueue: bool = True) -> int:
    """Queue every attempt of the submission that has no re-execution verdict yet (with a fresh
    allowance of infrastructure retries). Returns how many; 0 when all are re-executed.
    Raises ReexecutionRefused, queuing nothing, when that would take the uploader over their cap
    (`requested_by` staff are exempt; so is `enqueue=False`, which queues nothing)."""
    with transaction.atomic():
        submission = Submission.objects.select_for_update().get(pk=submission.pk)
        pending = list(submission.run.attempts.filter(reexecution_passed__isnull=True).order_by("pk"))
        if not pending:
            submission_refresh(submission_id=submission.pk)
            return 0
        if enqueue:
            reexecution_quota_check(submission=submission, requested_by=requested_by, adding=len(pending))
        Attempt.objects.filter(pk__in=[a.pk for a in pending]).update(infra_failures=0)
        _request_reexecution(submission, pending, enqueue=enqueue)
    return len(pending)


def _request_reexecution(submission: Submission, attempts: list[Attempt], *, enqueue: bool) -> None:
    Submission.objects.filter(pk=submission.pk).update(
        status=Submission.REEXECUTING, status_detail="", reexecution_requested_at=timezone.now()
    )
    if enqueue:
        pending = [(attempt.pk, attempt.tries) for attempt in attempts]
        submission_id = submission.pk
        transaction.on_commit(lambda: _enqueue_now(submission_id, pending))


def _job_id(attempt_id: int, tries: int) -> str:
    return f"reexecute-attempt-{attempt_id}-try-{tries + 1}"


def _enqueue_now(submission_id: int, pending: list[tuple[int, int]], delay: float = 0) -> int:
    """Put the jobs on the evaluation queue (scheduled `delay` seconds later: a retry's back-off).
    The submission is stored already: a queue that cannot be reached is reported on the submission
    (press Re-execute later), never raised."""
    from runs.evaluation.queue import evaluation_queue, job_enqueue_replacing

    enqueued = 0
    try:
        queue = evaluation_queue()
        for attempt_id, tries in pending:
            enqueued += job_enqueue_replacing(
                queue, JOB_FUNCTION, attempt_id, job_id=_job_id(attempt_id, tries), timeout=reexecution_job_timeout(),
                delay=delay, description=f"re-execute submitted attempt {attempt_id}",
            )
    except Exception as error:  # noqa: BLE001 - Redis down: the upload is kept, the owner retries
        logger.exception("re-execution of submission %s could not be queued", submission_id)
        Submission.objects.filter(pk=submission_id).update(
            status=Submission.INCOMPLETE,
            status_detail=f"re-execution could not be queued ({type(error).__name__}: {error}); press Re-execute to try again",
        )
    return enqueued


def attempt_reexecute(*, attempt_id: int, job_id: str = "", requeue: bool = True) -> str:
    """Re-execute one submitted attempt's patch in a fresh sandbox and record the verdict.

    Does nothing (SKIPPED) unless the attempt belongs to a submission, has no re-execution verdict
    yet and is not claimed by a live job. Infrastructure failures are re-queued (with `requeue`)
    while retries are left, then given up (GAVE_UP) with the reason in `reexecution_error`.
    Returns DONE, REQUEUED, GAVE_UP, LOST or SKIPPED.
    """
    now = timezone.now()
    stale = now - timedelta(seconds=reexecution_stale_seconds())
    claimed = (
        Attempt.objects.filter(
            pk=attempt_id,
            status=Attempt.DONE,
            run__submission__isnull=False,
            reexecution_passed__isnull=True,
            infra_failures__lte=max_infra_retries(),
        )
        .filter(Q(heartbeat_at__isnull=True) | Q(heartbeat_at__lt=stale))
        .update(tries=F("tries") + 1, heartbeat_at=now, claimed_by=worker_identity(), job_id=job_id[:100])
    )
    if claimed != 1:
        logger.info("submitted attempt %s needs no re-execution now (done, claimed or not submitted)", attempt_id)
        return SKIPPED
    attempt = Attempt.objects.select_related("run__submission", "sample__paper").get(pk=attempt_id)
    submission_id = attempt.run.submission.pk
    backend = settings.SANDBOX_BACKEND
    name = attempt_sandbox_name(attempt.pk, attempt.tries, submission=True)
    dest = Path(settings.WORKSPACE_ROOT) / f"{name}-reexecution"
    try:
        result = reexecute(
            sample=attempt.sample,
            patch=attempt.final_patch,
            context=attempt.run.context,
            backend=backend,
            dest=dest,
            name=name,
        )
    except InfrastructureFailure as failure:
        outcome = _infra_failure(attempt, str(failure), requeue=requeue)
        submission_refresh(submission_id=submission_id)
        return outcome
    except Exception as error:  # noqa: BLE001 - a harness bug is not the submitter's verdict
        logger.exception("re-execution of submitted attempt %s failed in the harness", attempt.pk)
        reason = f"harness error: {type(error).__name__}: {error}\n{traceback.format_exc()[-4000:]}"
        outcome = _infra_failure(attempt, reason, requeue=requeue)
        submission_refresh(submission_id=submission_id)
        return outcome
    finally:
        remove_tree(dest)

    reported_passed = bool(attempt.reported_passed)
    passed = reported_passed and result.passed
    mismatch = reported_passed and not result.passed
    timings = dict(attempt.timings or {})
    timings.update({f"reexecution_{key}": value for key, value in result.timings.items()})
    written = Attempt.objects.filter(pk=attempt.pk, tries=attempt.tries, reexecution_passed__isnull=True).update(
        reexecution_score=result.score,
        reexecution_passed=result.passed,
        reexecution_error=(result.error or "").replace("\x00", ""),
        reexecution_output=(result.output or "").replace("\x00", ""),
        out_of_scope_edits=result.out_of_scope_edits,
        reexecution_seconds=sum(result.timings.values()),
        experiment_seconds=result.experiment_seconds,
        timings=json_safe(timings),
        passed=passed,
        mismatch=mismatch,
        failure_label=failure_label(
            exit_status=attempt.exit_status,
            final_answer_raw=attempt.final_answer_raw,
            answer_parsed=attempt.parsed_answer is not None,
            passed=passed,
        ),
        failure_detail="reported numbers pass but the re-executed code does not produce them" if mismatch else "",
        heartbeat_at=None,
    )
    if not written:
        logger.warning("submitted attempt %s try %s: claim lost before the verdict was written", attempt.pk, attempt.tries)
        return LOST
    submission_refresh(submission_id=submission_id)
    return DONE


def _infra_failure(attempt: Attempt, reason: str, *, requeue: bool) -> str:
    with transaction.atomic():
        current = Attempt.objects.select_for_update().filter(pk=attempt.pk).first()
        if current is None or current.tries != attempt.tries or current.reexecution_passed is not None:
            return LOST
        current.infra_failures += 1
        current.infra_history = [
            *current.infra_history,
            {
                "try": current.tries,
                "kind": "reexecution",
                "worker": current.claimed_by,
                "job_id": current.job_id,
                "at": timezone.now().isoformat(),
                "reason": reason.replace("\x00", "")[:8000],
            },
        ]
        current.reexecution_error = f"re-execution could not run (infrastructure failure): {reason}".replace("\x00", "")[:8000]
        current.heartbeat_at = None
        current.save(update_fields=["infra_failures", "infra_history", "reexecution_error", "heartbeat_at"])
        retry = current.infra_failures <= max_infra_retries()
        if retry and requeue:
            submission_id = attempt.run.submission.pk
            delay = retry_delay_seconds(current.infra_failures)
            transaction.on_commit(lambda: _enqueue_now(submission_id, [(current.pk, current.tries)], delay=delay))
    first_line = reason.splitlines()[0] if reason else ""
    logger.warning("re-execution of submitted attempt %s: infrastructure failure: %s", attempt.pk, first_line)
    return REQUEUED if retry else GAVE_UP


def reexecutions_recover() -> list[int]:
    """Settle the re-executions of submitted attempts whose worker died (claimed, no verdict, and
    their job in RQ's failed registry, or their process gone on this host, or the claim older
    than reexecution_stale_seconds) or whose job failed before claiming them. Each is an
    infrastructure failure: re-queued after the back-off while retries are left, else given up
    (submission_refresh says so). Run by every round of self-healing
    (runs.evaluation.recovery.attempts_heal); fenced by the try number like the verdict. Returns the ids of
    the attempts settled."""
    from runs.evaluation.claims import process_gone as _process_gone
    from runs.evaluation.queue import failed_jobs_get

    claimed = list(
        Attempt.objects.filter(
            run__submission__isnull=False, status=Attempt.DONE, reexecution_passed__isnull=True, heartbeat_at__isnull=False
        ).select_related("run__submission")
    )
    failed = failed_jobs_get(job_ids=[attempt.job_id for attempt in claimed if attempt.job_id]) if claimed else {}
    stale = timezone.now() - timedelta(seconds=reexecution_stale_seconds())
    settled = []
    for attempt in claimed:
        if attempt.job_id in failed:
            reason = f"worker died: its job {attempt.job_id} is in RQ's failed registry ({failed[attempt.job_id].reason})"
        elif _process_gone(attempt.claimed_by):
            reason = f"worker died: its process {attempt.claimed_by} no longer exists"
        elif attempt.heartbeat_at < stale:
            reason = f"worker presumed dead: claimed {reexecution_stale_seconds()} s ago or more, no verdict"
        else:
            continue
        if _infra_failure(attempt, reason, requeue=True) != LOST:
            submission_refresh(submission_id=attempt.run.submission.pk)
            settled.append(attempt.pk)
    # Jobs that failed before claiming theirs (a worker that cannot reach the database, say).
    waiting = Attempt.objects.filter(
        run__submission__status=Submission.REEXECUTING, status=Attempt.DONE, reexecution_passed__isnull=True,
        heartbeat_at__isnull=True, infra_failures__lte=max_infra_retries(),
    ).select_related("run__submission")
    by_job = {_job_id(attempt.pk, attempt.tries): attempt for attempt in waiting}
    for job_id, failure in (failed_jobs_get(job_ids=by_job, cleanup=False) if by_job else {}).items():
        attempt = by_job[job_id]
        where = f" on worker {failure.worker}" if failure.worker else ""
        reason = f"its job {job_id} failed{where} before claiming the attempt: {failure.reason}"
        if _infra_failure(attempt, reason, requeue=True) != LOST:  # re-queued under the same job id
            submission_refresh(submission_id=attempt.run.submission.pk)
            settled.append(attempt.pk)
    return settled


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
                submission.status = Submission.VERIFIED
                submission.status_detail = f"every attempt re-executed; {mismatches} reported result(s) not reproduced"
                submission.save(update_fields=["verified_at", "status", "status_detail"])
        elif submission.status == Submission.REEXECUTING:
            given_up = pending.filter(infra_failures__gt=max_infra_retries()).count()
            active = pending.count() - given_up
            if not active:
                submission.status = Submission.INCOMPLETE
                submission.status_detail = (
                    f"{given_up} attempt(s) could not be re-executed (infrastructure failures); press Re-execute to try again"
                )
                submission.save(update_fields=["status", "status_detail"])
    return submission


def submission_reexecute_sync(*, submission: Submission) -> dict[str, int]:
    """Re-execute a submission's pending attempts one after another in this process (no Redis):
    for tests and management use. Infrastructure failures are retried in place, bounded by
    the retries. Returns the outcomes counted."""
    submission_request_reexecution(submission=submission, enqueue=False)
    outcomes: dict[str, int] = {}
    while True:
        attempt = (
            submission.run.attempts.filter(reexecution_passed__isnull=True, infra_failures__lte=max_infra_retries())
            .filter(Q(heartbeat_at__isnull=True))
            .order_by("pk")
            .first()
        )
        if attempt is None:
            break
        outcome = attempt_reexecute(attempt_id=attempt.pk, job_id="in-process", requeue=False)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        if outcome in (SKIPPED, LOST):
            break
    submission_refresh(submission_id=submission.pk)
    submission.refresh_from_db()
    return outcomes


# --- moderation ----------------------------------------------------------------------------------


def submissions_flag(*, submissions, reason: str) -> int:
    return Submission.objects.filter(pk__in=[s.pk for s in submissions]).update(flagged=True, flag_reason=reason.strip())


def submissions_unflag(*, submissions) -> int:
    return Submission.objects.filter(pk__in=[s.pk for s in submissions]).update(flagged=False, flag_reason="")


# --- API tokens ----------------------------------------------------------------------------------


class TokenError(Exception):
    """A request's token is missing, unknown (status 401) or revoked (403)."""

    def __init__(self, message: str, status: int) -> None:
        super().__init__(message)
        self.status = status


def token_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def token_create(*, user, name: str = "") -> tuple[ApiToken, str]:
    """A new token for `user`, and its key: the only time the key exists outside the caller.
    Raises ValueError when the user already has MAX_ACTIVE_TOKENS active tokens."""
    if ApiToken.objects.filter(user=user, revoked_at__isnull=True).count() >= MAX_ACTIVE_TOKENS:
        raise ValueError(f"you already have {MAX_ACTIVE_TOKENS} active tokens; revoke one first")
    key = TOKEN_PREFIX + secrets.token_urlsafe(32)
    token = ApiToken.objects.create(user=user, name=name.strip()[:100], prefix=key[:12], key_hash=token_hash(key))
    return token, key


def token_revoke(*, token: ApiToken) -> None:
    ApiToken.objects.filter(pk=token.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    token.refresh_from_db()


def token_authenticate(*, key: str) -> ApiToken:
    """The active token with this key (its last use recorded). Raises TokenError."""
    key = (key or "").strip()
    if not key:
        raise TokenError("authentication required: send the header 'Authorization: Token <key>'", 401)
    token = ApiToken.objects.select_related("user").filter(key_hash=token_hash(key)).first()
    if token is None:
        raise TokenError("invalid token", 401)
    if token.revoked_at is not None:
        raise TokenError(f"this token was revoked on {token.revoked_at:%Y-%m-%d %H:%M} UTC", 403)
    if not token.user.is_active:
        raise TokenError("the token's user account is inactive", 403)
    ApiToken.objects.filter(pk=token.pk).update(last_used_at=timezone.now())
    return token
