"""Self-healing: settling the work that dead workers, failed jobs and runaway attempts leave behind.

One round (`attempts_heal`, which every evaluation worker runs at start and then periodically)
records the failures of jobs that never claimed their attempt (`attempts_record_unstarted`),
re-queues or gives up attempts held by workers that died (`attempts_recover`), ends run attempts
that overran their budget by killing their work horse (`attempt_overrun`), queues again the
waiting work whose job Redis lost (`attempts_requeue_lost`: the database is the truth, the queue
is rebuilt from it), and sweeps the containers, cgroups and directories of tries no longer running
(`leftovers_sweep`). It covers every kind of work (runs.evaluation.kinds) and is fenced by try
number, so any number of workers may run it at once."""

from __future__ import annotations

import logging
import os
import re
import signal
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.utils import timezone
from rq.command import send_kill_horse_command

from runs.agents.base import ExitStatus
from runs.analysis.services import attempt_analysis_record_quietly
from runs.evaluation.claims import (
    ClaimOutcome,
    dead_reason,
    infra_failure,
    local_pid,
    locked_try,
    partial_trajectory,
    record_unstarted,
    stale_seconds,
)
from runs.evaluation.kinds import IN_PROCESS, RUN_ATTEMPT, WorkKind, run_mark_finished, work_kinds
from runs.evaluation.queue import (
    LIVE_JOB_STATUSES,
    enqueue,
    evaluation_queue,
    job_statuses,
    kind_failed_jobs,
    kind_queue,
    retry_in_seconds,
)
from runs.evaluation.verdicts import with_tolerance_ratio
from runs.evaluation.workdirs import remove_tree, sandbox_owner_id
from runs.models import Attempt, Run
from runs.suites.selectors import sample_experiments
from sandbox.sweep import sweep_sandboxes

logger = logging.getLogger(__name__)


@dataclass
class Recovered:
    attempt_id: int
    reason: str
    outcome: ClaimOutcome
    kind: str = RUN_ATTEMPT.name


def overrun_grace_seconds() -> float:
    """How long past its own budget (agent time plus the re-execution's experiment timeouts) a
    running attempt may go on before the recovery kills it, heartbeat or not."""
    return float(settings.ATTEMPT_OVERRUN_GRACE_SECONDS)


def attempt_deadline(attempt: Attempt):
    """When a running attempt is overdue: claimed, plus the run's time budget, plus every
    experiment's timeout (re-execution), plus the grace."""
    timeouts = sum(experiment.timeout_seconds for experiment in sample_experiments(sample=attempt.sample))
    return attempt.claimed_at + timedelta(seconds=attempt.run.max_seconds + timeouts + overrun_grace_seconds())


def attempts_recover(
    *, stale_after: float | None = None, run: Run | None = None, requeue: bool = True, kinds: list[WorkKind] | None = None
) -> list[Recovered]:
    """Find attempts held by a worker that died, or running past their budget, and settle them,
    for every kind of work (runs.evaluation.kinds: a run's attempts, submissions' re-executions).

    Dead means what claims.dead_reason says (job in RQ's failed registry, process gone on this
    host, or no heartbeat for `stale_after` seconds, default ATTEMPT_STALE_SECONDS). Each is an
    infrastructure failure: re-queued while retries are left, else given up as its kind says.

    Overrun (a run's attempts only) means still running past `attempt_deadline`, with a fresh
    heartbeat or not (a worker stuck in something the agent set up keeps beating): its work horse
    is killed and the attempt ends done and failed, labelled budget_exhausted: what the agent
    caused is its result.

    `kinds` limits it to some kinds of work. Fenced by the try number, so running it concurrently
    with a live worker or another recovery never double-counts. Then sweeps the leftovers (containers, cgroups, directories) of tries
    that are no longer running.
    """
    stale_after = stale_seconds() if stale_after is None else stale_after
    recovered = []
    for kind in work_kinds() if kinds is None else kinds:
        held = kind.model.objects.filter(kind.held())
        if run is not None:
            held = held.filter(**{kind.run_field: run})
        held = list(held.select_related(*kind.select_related))
        job_ids = [attempt.job_id for attempt in held if attempt.job_id]
        failed = kind_failed_jobs(kind, job_ids=job_ids) if held else {}
        for attempt in held:
            if kind is RUN_ATTEMPT and attempt.claimed_at is not None and timezone.now() > attempt_deadline(attempt):
                outcome = attempt_overrun(attempt=attempt)
                if outcome != ClaimOutcome.LOST:
                    recovered.append(Recovered(attempt.pk, "overran its time budget", outcome))
                continue
            reason = dead_reason(attempt, failed=failed, stale_after=stale_after)
            if reason is None:
                continue
            outcome = infra_failure(kind, attempt_id=attempt.pk, tries=attempt.tries, reason=reason, requeue=requeue)
            if outcome != ClaimOutcome.LOST:
                recovered.append(Recovered(attempt.pk, reason, outcome, kind.name))
    leftovers_sweep()
    return recovered


def attempt_overrun(*, attempt: Attempt) -> ClaimOutcome:
    """End a running attempt that overran its budget: kill its worker's work horse, record it as
    done and failed (budget_exhausted, exit status time_limit) with its partial trajectory.
    Returns ClaimOutcome.OVERRAN, or LOST when the try had already ended."""
    deadline = attempt_deadline(attempt)
    overdue = (timezone.now() - deadline).total_seconds()
    detail = (
        f"killed by the harness: still running {overdue:.0f} s past its deadline (time budget "
        f"{attempt.run.max_seconds:g} s, the experiments' timeouts and {overrun_grace_seconds():g} s of grace)"
    )
    fields = with_tolerance_ratio({
        "status": Attempt.Status.DONE, "exit_status": ExitStatus.TIME_LIMIT, "exit_message": detail,
        "failure_label": Attempt.FailureLabel.BUDGET_EXHAUSTED,
        "failure_detail": detail, "passed": False, "mismatch": False, "finished_at": timezone.now(), "heartbeat_at": None,
        # The killed try gave no answer: an earlier try's (a model-error try retried) must not become its verdict.
        **dict.fromkeys(("final_answer_raw", "parsed_answer", "reported_score", "reported_passed", "reexecution_score",
                         "reexecution_passed")),
    }, attempt)
    trajectory = partial_trajectory(attempt.pk, attempt.tries)
    if trajectory is not None:
        fields["trajectory"] = trajectory
    written = Attempt.objects.filter(pk=attempt.pk, status=Attempt.RUNNING, tries=attempt.tries).update(**fields)
    if not written:
        return ClaimOutcome.LOST
    if trajectory is not None:
        attempt_analysis_record_quietly([attempt.pk])
    _kill_work_horse(attempt)
    run_mark_finished(run_id=attempt.run_id)
    logger.warning("attempt %s try %s: %s", attempt.pk, attempt.tries, detail)
    return ClaimOutcome.OVERRAN


def _kill_work_horse(attempt: Attempt) -> None:
    """Stop the process executing an attempt whose try has been settled without it: SIGKILL on this
    host, RQ's kill-horse command elsewhere. An in-process run (run_eval --sync) is left alone: it
    is the user's own command, and it finds its claim gone at its next step."""
    if attempt.job_id == IN_PROCESS:
        return
    pid = local_pid(attempt.claimed_by)
    if pid is not None and pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return
    try:
        queue = evaluation_queue()
        job = queue.fetch_job(attempt.job_id) if attempt.job_id else None
        if job is not None and job.worker_name:
            send_kill_horse_command(queue.connection, job.worker_name)
    except Exception:  # noqa: BLE001 - the try is settled either way; its worker stops at its next step
        logger.warning("could not stop the worker of attempt %s", attempt.pk, exc_info=True)


# Timestamps of files and containers may lag the clock a little.
SWEEP_CLOCK_MARGIN = 1.0


def _try_names() -> tuple[re.Pattern, re.Pattern]:
    """A try's workspace directories (<kind's sandbox prefix>attempt-<id>-try-<n>[-reexecution]), and
    the deployment id its sandboxes start with, for every registered kind of work."""
    prefixes = "|".join(re.escape(kind.sandbox_prefix) for kind in work_kinds() if kind.sandbox_prefix)
    try_name = re.compile(rf"^({prefixes})?attempt-(\d+)-try-(\d+)(?:-reexecution)?$")
    deployment_prefix = re.compile(rf"^([0-9a-f]{{8}})-(?=(?:{prefixes})?attempt-)")
    return try_name, deployment_prefix


def leftovers_sweep(*, unnamed_after: float | None = None) -> list[str]:
    """Remove what tries that are no longer running left behind: their containers, cgroups and
    mount points (sandbox.sweep), and their workspace directories (whatever the agent put in
    them). Sandboxes that belong to no attempt (suite checks, probes) are removed once older than
    `unnamed_after` seconds (default ATTEMPT_SWEEP_UNNAMED_SECONDS, a day). Runs at worker start
    and with every recovery. Returns a line per removed thing."""
    unnamed_after = float(settings.ATTEMPT_SWEEP_UNNAMED_SECONDS) if unnamed_after is None else unnamed_after
    # A try claimed after this moment may already have made its sandbox when the sweep lists it:
    # anything younger than the live set below is left for the next sweep.
    checked_at = time.time()
    live = {
        (kind.sandbox_prefix, pk, tries)
        for kind in work_kinds()
        for pk, tries in kind.model.objects.filter(kind.held()).values_list("pk", "tries")
    }
    ours = sandbox_owner_id()
    try_name, deployment_prefix = _try_names()

    def is_live_try(name: str, age: float) -> bool:
        if age < time.time() - checked_at + SWEEP_CLOCK_MARGIN:
            return True
        match = try_name.match(name)
        return match is not None and (match.group(1) or "", int(match.group(2)), int(match.group(3))) in live

    def is_live(name: str, age: float) -> bool:
        prefix = deployment_prefix.match(name)
        if prefix is None:
            return age < unnamed_after
        if prefix.group(1) != ours:
            return True  # another deployment's: it sweeps its own
        return is_live_try(name[prefix.end():], age)

    removed = sweep_sandboxes(is_live)
    root = Path(settings.WORKSPACE_ROOT)
    if root.is_dir():
        for directory in root.iterdir():
            if directory.is_dir() and not directory.is_symlink() and try_name.match(directory.name):
                # The directory's mtime is no earlier than its creation: older than the live set means made before it.
                if not is_live_try(directory.name, time.time() - directory.lstat().st_mtime):
                    remove_tree(directory)
                    removed.append(f"directory {directory}")
    if removed:
        logger.info("swept leftovers of dead tries: %s", ", ".join(removed))
    return removed


@dataclass
class HealReport:
    unstarted: list[tuple[str, int]]  # (kind, attempt id): jobs that failed before claiming their attempt, now recorded
    recovered: list[Recovered]  # attempts held by dead workers, and overrunning ones
    requeued: list[tuple[str, int]] = field(default_factory=list)  # (kind, attempt id): waiting work whose job Redis lost

    def settled(self, kind: str) -> list[int]:
        """The ids of `kind`'s attempts this round settled."""
        return [pk for name, pk in self.unstarted if name == kind] + [r.attempt_id for r in self.recovered if r.kind == kind]


def attempts_heal(*, stale_after: float | None = None) -> HealReport:
    """One round of self-healing, run by every evaluation worker when it starts and, when it is a
    long-running one, every ATTEMPT_RECOVER_INTERVAL_SECONDS (runs.evaluation.worker), for every
    kind of work: jobs that failed before claiming their attempt are recorded on it
    (attempts_record_unstarted), attempts held by dead workers re-queued and overrunning ones
    ended (attempts_recover), waiting work whose job Redis lost queued again
    (attempts_requeue_lost), and the leftovers of tries no longer running swept. Idempotent and
    fenced: any number of workers may run it at once."""
    unstarted = attempts_record_unstarted()
    recovered = [r for r in attempts_recover(stale_after=stale_after) if r.outcome != ClaimOutcome.LOST]
    # Last: the two above put their own work back on the queue first, each in its own way.
    requeued = attempts_requeue_lost()
    return HealReport(unstarted=unstarted, recovered=recovered, requeued=requeued)


def lost_job_grace_seconds() -> float:
    """How long after its job was put on the queue waiting work is left to that job, whatever Redis
    says: a job is enqueued once the transaction that queued the work commits, a moment later."""
    return float(settings.ATTEMPT_LOST_JOB_GRACE_SECONDS)


# Jobs that are on their way to claim their work: on a queue, scheduled (a delayed retry), or taken by a worker.
_LIVE = {status.value for status in LIVE_JOB_STATUSES}


def attempts_requeue_lost(*, grace: float | None = None, run: Run | None = None) -> list[tuple[str, int]]:
    """Queue again, once, the work the database holds as waiting (every kind's `waiting()`) while
    Redis holds no live job for it: its job is missing (Redis restarted or flushed: it keeps
    nothing on disk), or finished or failed without claiming it. The database is the truth; the
    queue is rebuilt from it.

    Work put on the queue less than `grace` seconds ago (default ATTEMPT_LOST_JOB_GRACE_SECONDS)
    is left to its job, which its transaction enqueues as it commits; work never handed to RQ (an
    in-process run: no queued_at) is left to its process. A delayed retry is queued again with
    the rest of its delay. The new job has the lost one's id (the try it will make), and the
    write that marks the work (`job_lost_at`, which the run page shows until a try claims it) is
    fenced by the try number: a job that claimed the work meanwhile wins, and at most one job per
    try ever claims it. Returns (kind, id) of the work queued again."""
    grace = lost_job_grace_seconds() if grace is None else grace
    before = timezone.now() - timedelta(seconds=grace)
    requeued = []
    for kind in work_kinds():
        waiting = kind.model.objects.filter(kind.waiting(), queued_at__lt=before)
        if run is not None:
            waiting = waiting.filter(**{kind.run_field: run})
        rows = list(waiting.values_list("pk", "tries"))
        if not rows:
            continue
        queue = kind_queue(kind)
        statuses = job_statuses(queue, [kind.job_id(pk, tries) for pk, tries in rows])
        for pk, tries in rows:
            job_id = kind.job_id(pk, tries)
            if statuses.get(job_id) in _LIVE:
                continue
            if _requeue_lost(kind, pk=pk, tries=tries, job_id=job_id, status=statuses.get(job_id)):
                requeued.append((kind.name, pk))
    return requeued


def _requeue_lost(kind: WorkKind, *, pk: int, tries: int, job_id: str, status: str | None) -> bool:
    with transaction.atomic():
        work = locked_try(kind, kind.waiting(), pk=pk, tries=tries)
        if work is None:
            return False  # claimed, cancelled or settled since it was read
        work.job_lost_at = timezone.now()
        work.save(update_fields=["job_lost_at"])
        # A retry whose back-off Redis forgot waits the rest of it.
        delay = retry_in_seconds(work.infra_history[-1]) if work.infra_history else None
        enqueue(kind, attempts=[work], delay=delay or 0)
    logger.warning("%s %s: its job %s %s; queued again", kind.name, pk, job_id,
                   "was lost (Redis holds no such job)" if status is None else f"ended ({status}) without claiming it")
    return True


def attempts_record_unstarted(*, run: Run | None = None) -> list[tuple[str, int]]:
    """Record the failures of jobs that never claimed their attempt (claims.record_unstarted), for
    every kind of work. A reason the failing worker could not write appears as soon as any worker
    gets through (the run page shows RQ's reason until then,
    runs.evaluation.selectors.run_waiting_notes). Returns (kind, attempt id) of those recorded."""
    return [(kind.name, pk) for kind in work_kinds() for pk in record_unstarted(kind, run=run)]
