"""Writes for submissions: storing an upload, re-executing its patches, API tokens.

Storing is all-or-nothing: the upload is checked completely first (runs.submissions.validation,
every problem reported), then the Submission, its Run and one Attempt per record are created in
one transaction. Attempts are scored against the stored gold on the way in (`reported_*`);
`passed` stays False until the harness has re-executed the attempt's patch itself.

Re-execution runs as one RQ job per attempt (runs.submissions.reexecution: the same claim, fence,
retries and recovery as a run's attempts), enqueued when the requesting transaction commits; here
are the requests for it, each within the uploader's quota.
"""
from __future__ import annotations

import hashlib
import json
import logging
import secrets

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction
from django.utils import timezone

from runs.agents.base import ExitStatus
from runs.analysis.services import attempt_analysis_record_quietly
from runs.benchmark.answers import parse_answer
from runs.benchmark.text import json_safe
from runs.evaluation.claims import ClaimOutcome, max_infra_retries
from runs.evaluation.kinds import IN_PROCESS
from runs.evaluation.queue import enqueue as enqueue_work
from runs.evaluation.transplants import transplants_execute_sync
from runs.evaluation.verdicts import failure_label, score_answer, score_dict, with_tolerance_ratio
from runs.models import ApiToken, Attempt, Run, Submission, TrajectorySource
from runs.signals import results_changed_send
from runs.submissions.reexecution import REEXECUTION, attempt_reexecute, submission_refresh
from runs.submissions.schema import AttemptRecord
from runs.submissions.validation import OriginalTrajectory, ValidatedSubmission, submission_validate

logger = logging.getLogger(__name__)

TOKEN_PREFIX = "aex_"
MAX_ACTIVE_TOKENS = 20


# --- storing -------------------------------------------------------------------------------------


def submission_create(
    *,
    data: bytes,
    filename: str = "",
    uploader,
    reexecute: bool = False,
    transplants: bool = True,
    token: ApiToken | None = None,
    channel: str = Submission.Channel.WEB,
    enqueue: bool = True,
) -> Submission:
    """Check an upload and store it as a submission with its run and attempts, scored against gold.

    Raises SubmissionTooLarge or SubmissionInvalid (every problem found) and then stores nothing.
    With `reexecute`, every attempt is queued for re-execution once the transaction commits
    (`enqueue=False` queues nothing: tests and in-process callers run
    `submission_reexecute_sync`), unless that would take the uploader over their cap on queued
    re-executions: then the submission is stored without it and `status_detail` says why.
    `transplants=False`: failed attempts at n >= 2 are not judged function by function after their
    re-execution (runs.evaluation.transplants).
    """
    validated = submission_validate(data=data, filename=filename)
    now = timezone.now()
    with transaction.atomic():
        submission = _submission_store(
            validated, uploader=uploader, token=token, channel=channel, transplants=transplants, now=now
        )
        attempts = Attempt.objects.bulk_create(
            [_attempt(submission.run, item.record, validated, now) for item in validated.records], batch_size=500
        )
        # bulk_create keeps the order and sets the primary keys (PostgreSQL), so record i is attempt i.
        TrajectorySource.objects.bulk_create(
            [
                _trajectory_source(attempt, item.original_trajectory, item.record.trajectory)
                for item, attempt in zip(validated.records, attempts, strict=True)
                if item.original_trajectory is not None
            ],
            batch_size=20,  # a few files of up to the upload size each per INSERT
        )
        attempt_analysis_record_quietly([attempt.pk for attempt in attempts])
        results_changed_send(run_ids=[submission.run_id])
        if reexecute:
            _reexecution_on_upload(submission, attempts, uploader=uploader, enqueue=enqueue)
    return submission


def _submission_store(
    validated: ValidatedSubmission, *, uploader, token: ApiToken | None, channel: str, transplants: bool, now
) -> Submission:
    """The submission's Run (finished: its attempts are done) and the Submission row."""
    header = validated.header
    run = Run.objects.create(
        suite=validated.suite,
        agent=header.agent,
        agent_config={"submitted": True},
        model=header.model,
        context=header.context,
        n_values=sorted({sample.n for sample in validated.samples.values()}),
        attempts_per_sample=max(item.record.attempt_index for item in validated.records) + 1,
        sandbox_backend="",
        description=header.description,
        created_by=uploader,
        finished_at=now,
        transplants=transplants,
    )
    return Submission.objects.create(
        run=run,
        uploader=uploader,
        token=token,
        channel=channel,
        model=header.model,
        agent=header.agent,
        description=header.description,
        contact=header.contact,
        filename=(validated.filename or "")[:255],
        file_sha256=validated.sha256,
        file_bytes=validated.size,
        record_count=len(validated.records),
    )


def _reexecution_on_upload(submission: Submission, attempts: list[Attempt], *, uploader, enqueue: bool) -> None:
    """Request the re-execution of a new submission's attempts, within the uploader's quota."""
    try:
        if enqueue:  # in-process re-execution (enqueue=False) puts nothing on the queue
            reexecution_quota_check(submission=submission, requested_by=uploader, adding=len(attempts))
        _request_reexecution(submission, attempts, enqueue=enqueue)
    except ReexecutionRefused as refused:
        # The upload itself is fine: keep it, scored, and say why nothing was queued.
        submission.status_detail = f"re-execution was not queued: {refused}"
        submission.save(update_fields=["status_detail"])


def _attempt(run: Run, record: AttemptRecord, validated: ValidatedSubmission, now) -> Attempt:
    sample = validated.samples[record.sample_id]
    experiments = validated.experiments[record.sample_id]
    answer = record.final_answer
    if answer is None:
        raw, parsed = None, None
    else:
        raw = answer if isinstance(answer, str) else json.dumps(answer, ensure_ascii=False)
        parsed = parse_answer(answer)
    reported = score_answer(experiments=experiments, answer=parsed) if parsed is not None else None
    reported_passed = bool(reported and reported.passed)
    verdict = with_tolerance_ratio({
        "status": Attempt.DONE,
        "reported_score": score_dict(reported, experiments) if reported is not None else None,
        "reported_passed": reported_passed,
        "passed": False,
        # Labelled by the reported verdict until re-execution gives the final one.
        "failure_label": failure_label(
            exit_status=ExitStatus.SUBMITTED,
            final_answer_raw=raw,
            answer_parsed=bool(parsed is not None and parsed.ok),
            passed=reported_passed,
        ),
    })
    return Attempt(
        run=run,
        sample=sample,
        index=record.attempt_index,
        exit_status=ExitStatus.SUBMITTED,
        final_answer_raw=None if raw is None else raw.replace("\x00", ""),
        parsed_answer=json_safe(parsed.value) if parsed is not None and parsed.ok else None,
        **verdict,
        mismatch=False,
        input_tokens=record.input_tokens,
        output_tokens=record.output_tokens,
        cost=record.cost,
        agent_seconds=record.seconds,
        trajectory=json_safe(record.trajectory) if record.trajectory is not None else None,
        final_patch=record.final_patch or "",
        finished_at=now,
    )


def _trajectory_source(attempt: Attempt, original: OriginalTrajectory, trajectory: dict) -> TrajectorySource:
    """The original file of a converted trajectory, with the source format and version the
    conversion recorded in its header (runs.agents.foreign.base.build)."""
    versions = trajectory["header"].get("versions") or {}
    return TrajectorySource(
        attempt=attempt,
        filename=original.filename[:255],
        source_format=str(versions.get("source_format", ""))[:50],
        source_version=str(versions.get("source_version", ""))[:100],
        content=original.content,
        size=len(original.content),
        sha256=hashlib.sha256(original.content).hexdigest(),
    )


# --- re-execution --------------------------------------------------------------------------------


class ReexecutionRefused(Exception):
    """Queuing these re-executions would take the uploader over MAX_QUEUED_REEXECUTIONS_PER_USER."""


def reexecution_quota() -> int:
    """How many re-execution attempts of one user's submissions may be queued or running at once."""
    return settings.MAX_QUEUED_REEXECUTIONS_PER_USER


def reexecutions_queued(*, user, exclude_submission: Submission | None = None) -> int:
    """Re-execution attempts of `user`'s submissions queued or running: requested, no verdict yet,
    not given up after infrastructure failures."""
    attempts = Attempt.objects.filter(
        run__submission__uploader=user,
        run__submission__status=Submission.Status.REEXECUTING,
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
        status=Submission.Status.REEXECUTING, status_detail="", reexecution_requested_at=timezone.now()
    )
    if enqueue:
        enqueue_work(REEXECUTION, attempts=attempts)


def submission_reexecute_sync(*, submission: Submission) -> dict[ClaimOutcome, int]:
    """Re-execute a submission's pending attempts one after another in this process (no Redis):
    for tests and management use, each followed by its transplants (runs.evaluation.transplants).
    Infrastructure failures are retried in place, bounded by the retries. Returns the outcomes counted."""
    submission_request_reexecution(submission=submission, enqueue=False)
    outcomes: dict[ClaimOutcome, int] = {}
    while True:
        attempt = Attempt.objects.filter(REEXECUTION.claimable(), run=submission.run).order_by("pk").first()
        if attempt is None:
            break
        outcome = attempt_reexecute(attempt_id=attempt.pk, job_id=IN_PROCESS, requeue=False)
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
        transplants_execute_sync(attempt_id=attempt.pk)
        if outcome in (ClaimOutcome.SKIPPED, ClaimOutcome.LOST):
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


# --- trajectories imported afterwards --------------------------------------------------------------


def attempt_trajectory_import(
    *, submission: Submission, sample_id: str, index: int, trajectory: dict, original: OriginalTrajectory | None = None
) -> Attempt:
    """Store `trajectory` (already checked: runs.submissions.validation.check_trajectory) as the
    trajectory of the submission's attempt `index` at `sample_id`, replacing what it had, and
    `original`, the file it was converted from, in place of the attempt's former one. Raises
    Attempt.DoesNotExist when the submission has no such attempt."""
    with transaction.atomic():
        attempt = (
            Attempt.objects.select_for_update()
            .get(run=submission.run, sample__sample_id=sample_id, index=index)
        )
        attempt.trajectory = json_safe(trajectory)
        attempt.save(update_fields=["trajectory"])
        TrajectorySource.objects.filter(attempt=attempt).delete()
        if original is not None:
            _trajectory_source(attempt, original, trajectory).save()
    attempt_analysis_record_quietly([attempt.pk])
    return attempt
