"""Split from runs.attempts: TODO docstring."""

from __future__ import annotations

import logging
import math
import os
import re
import signal
import time
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from runs.agents.base import (
    TIME_LIMIT,
)
from runs.evaluation.claims import (
    LOST,
    _local_pid,
    _partial_trajectory,
    attempt_infra_failure,
    max_infra_retries,
    process_gone,
    retry_delay_seconds,
    run_mark_finished,
    stale_seconds,
)
from runs.evaluation.queue import FailedJob, attempts_enqueue, failed_jobs_get, failure_recorded, job_id_for, retry_in_seconds
from runs.evaluation.workdirs import deployment_id, remove_tree
from runs.models import Attempt, Run
from runs.suites.selectors import sample_experiments
from sandbox.sweep import sweep_sandboxes

logger = logging.getLogger(__name__)


@dataclass
class Recovered:
    attempt_id: int
    reason: str
    outcome: str


def overrun_grace_seconds() -> float:
    """How long past its own budget (agent time plus the re-execution's experiment timeouts) a
    running attempt may go on before the recovery kills it, heartbeat or not."""
    return float(getattr(settings, "ATTEMPT_OVERRUN_GRACE_SECONDS", 300))


def attempt_deadline(attempt: Attempt):
    """When a running attempt is overdue: claimed, plus the run's time budget, plus every
    experiment's timeout (re-execution), plus the grace."""
    timeouts = sum(experiment.timeout_seconds for experiment in sample_experiments(sample=attempt.sample))
    return attempt.claimed_at + timedelta(seconds=attempt.run.max_seconds + timeouts + overrun_grace_seconds())


def attempts_recover(*, stale_after: float | None = None, run: Run | None = None, requeue: bool = True) -> list[Recovered]:
    """Find running attempts whose worker died, or that overran their budget, and settle them.

    Dead means: its RQ job is in the failed registry (the work horse was killed, or RQ found the
    job abandoned), its process is gone (checked on the same host only), or its heartbeat is
    older than `stale_after` seconds (default ATTEMPT_STALE_SECONDS; a machine lost). Each is re-queued while infra
    retries are left, else ends as error / infrastructure.

    Overrun means still running past `attempt_deadline`, with a fresh heartbeat or not (a worker
    stuck in something the agent set up keeps beating): its work horse is killed and the attempt
    ends done and failed, labelled budget_exhausted: what the agent caused is its result.

    Fenced by the try number, so running it concurrently with a live worker or another recovery
    never double-counts. Then sweeps the leftovers (containers, cgroups, directories) of tries
    that are no longer running.
    """
    stale_after = stale_seconds() if stale_after is None else stale_after
    running = Attempt.objects.filter(status=Attempt.RUNNING)
    if run is not None:
        running = running.filter(run=run)
    running = list(running.select_related("run", "sample__paper"))
    recovered = []
    if running:
        failed = failed_jobs_get(job_ids=[attempt.job_id for attempt in running if attempt.job_id])
        failed_jobs = {job_id: job.reason for job_id, job in failed.items()}
        cutoff = timezone.now() - timedelta(seconds=stale_after)
        for attempt in running:
            if attempt.claimed_at is not None and timezone.now() > attempt_deadline(attempt):
                outcome = attempt_overrun(attempt=attempt)
                if outcome != LOST:
                    recovered.append(Recovered(attempt.pk, "overran its time budget", outcome))
                continue
            if attempt.job_id and attempt.job_id in failed_jobs:
                reason = f"worker died: its job {attempt.job_id} is in RQ's failed registry ({failed_jobs[attempt.job_id]})"
            elif process_gone(attempt.claimed_by):
                reason = f"worker died: its process {attempt.claimed_by} no longer exists"
            elif attempt.heartbeat_at is None or attempt.heartbeat_at < cutoff:
                age = (timezone.now() - attempt.heartbeat_at).total_seconds() if attempt.heartbeat_at else math.inf
                reason = f"worker presumed dead: no heartbeat for {age:.0f} s (stale after {stale_after:g} s)"
            else:
                continue
            outcome = attempt_infra_failure(attempt_id=attempt.pk, tries=attempt.tries, reason=reason, requeue=requeue)
            if outcome != LOST:
                recovered.append(Recovered(attempt.pk, reason, outcome))
    leftovers_sweep()
    return recovered


OVERRAN = "overran"


def attempt_overrun(*, attempt: Attempt) -> str:
    """End a running attempt that overran its budget: kill its worker's work horse, record it as
    done and failed (budget_exhausted, exit status time_limit) with its partial trajectory.
    Returns OVERRAN, or LOST when the try had already ended."""
    deadline = attempt_deadline(attempt)
    overdue = (timezone.now() - deadline).total_seconds()
    detail = (
        f"killed by the harness: still running {overdue:.0f} s past its deadline (time budget "
        f"{attempt.run.max_seconds:g} s, the experiments' timeouts and {overrun_grace_seconds():g} s of grace)"
    )
    fields = {
        "status": Attempt.DONE, "exit_status": TIME_LIMIT, "exit_message": detail, "failure_label": Attempt.BUDGET_EXHAUSTED,
        "failure_detail": detail, "passed": False, "mismatch": False, "finished_at": timezone.now(), "heartbeat_at": None,
    }
    trajectory = _partial_trajectory(attempt.pk, attempt.tries)
    if trajectory is not None:
        fields["trajectory"] = trajectory
    written = Attempt.objects.filter(pk=attempt.pk, status=Attempt.RUNNING, tries=attempt.tries).update(**fields)
    if not written:
        return LOST
    _kill_work_horse(attempt)
    run_mark_finished(run_id=attempt.run_id)
    logger.warning("attempt %s try %s: %s", attempt.pk, attempt.tries, detail)
    return OVERRAN


def _kill_work_horse(attempt: Attempt) -> None:
    """Stop the process executing an attempt whose try has been settled without it: SIGKILL on this
    host, RQ's kill-horse command elsewhere. An in-process run (run_eval --sync) is left alone: it
    is the user's own command, and it finds its claim gone at its next step."""
    if attempt.job_id == "in-process":
        return
    pid = _local_pid(attempt.claimed_by)
    if pid is not None and pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return
    try:
        from rq.command import send_kill_horse_command

        from runs.evaluation.queue import evaluation_queue

        queue = evaluation_queue()
        job = queue.fetch_job(attempt.job_id) if attempt.job_id else None
        if job is not None and job.worker_name:
            send_kill_horse_command(queue.connection, job.worker_name)
    except Exception:  # noqa: BLE001 - the try is settled either way; its worker stops at its next step
        logger.warning("could not stop the worker of attempt %s", attempt.pk, exc_info=True)


# A try's workspace directories, and (after the deployment id) its sandboxes.
_TRY_NAME = re.compile(r"^(submission-)?attempt-(\d+)-try-(\d+)(?:-reexecution)?$")


# Timestamps of files and containers may lag the clock a little.
_SWEEP_CLOCK_MARGIN = 1.0


_DEPLOYMENT_PREFIX = re.compile(r"^([0-9a-f]{8})-(?=(?:submission-)?attempt-)")


def leftovers_sweep(*, unnamed_after: float | None = None) -> list[str]:
    """Remove what tries that are no longer running left behind: their containers, cgroups and
    mount points (sandbox.sweep), and their workspace directories (whatever the agent put in
    them). Sandboxes that belong to no attempt (suite checks, probes) are removed once older than
    `unnamed_after` seconds (default ATTEMPT_SWEEP_UNNAMED_SECONDS, a day). Runs at worker start
    and with every recovery. Returns a line per removed thing."""
    unnamed_after = float(getattr(settings, "ATTEMPT_SWEEP_UNNAMED_SECONDS", 86400)) if unnamed_after is None else unnamed_after
    # A try claimed after this moment may already have made its sandbox when the sweep lists it:
    # anything younger than the live set below is left for the next sweep.
    checked_at = time.time()
    live = set(Attempt.objects.filter(status=Attempt.RUNNING).values_list("pk", "tries"))
    live_submissions = set(
        Attempt.objects.filter(
            run__submission__isnull=False, status=Attempt.DONE, reexecution_passed__isnull=True, heartbeat_at__isnull=False
        ).values_list("pk", "tries")
    )
    ours = deployment_id()

    def is_live_try(name: str, age: float) -> bool:
        if age < time.time() - checked_at + _SWEEP_CLOCK_MARGIN:
            return True
        match = _TRY_NAME.match(name)
        return match is not None and (int(match.group(2)), int(match.group(3))) in (live_submissions if match.group(1) else live)

    def is_live(name: str, age: float) -> bool:
        prefix = _DEPLOYMENT_PREFIX.match(name)
        if prefix is None:
            return age < unnamed_after
        if prefix.group(1) != ours:
            return True  # another deployment's: it sweeps its own
        return is_live_try(name[prefix.end():], age)

    removed = sweep_sandboxes(is_live)
    root = Path(settings.WORKSPACE_ROOT)
    if root.is_dir():
        for directory in root.iterdir():
            if directory.is_dir() and not directory.is_symlink() and _TRY_NAME.match(directory.name):
                # The directory's mtime is no earlier than its creation: older than the live set means made before it.
                if not is_live_try(directory.name, time.time() - directory.lstat().st_mtime):
                    remove_tree(directory)
                    removed.append(f"directory {directory}")
    if removed:
        logger.info("swept leftovers of dead tries: %s", ", ".join(removed))
    return removed


@dataclass
class HealReport:
    unstarted: list[int]  # attempts whose job had failed before claiming them, now recorded
    recovered: list[Recovered]  # running attempts of dead workers, and overrunning ones
    reexecutions: list[int]  # submitted attempts whose re-execution's worker or job died


def attempts_heal(*, stale_after: float | None = None) -> HealReport:
    """One round of self-healing, run by every evaluation worker when it starts and, when it is a
    long-running one, every ATTEMPT_RECOVER_INTERVAL_SECONDS (runs.evaluation.worker): jobs that failed
    before claiming their attempt are recorded on it (attempts_record_unstarted), attempts of dead
    workers re-queued and overrunning ones ended (runs.evaluation.recovery.attempts_recover), the same for
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
    through (the run page shows RQ's reason until then, runs.evaluation.selectors.run_waiting_notes).
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
