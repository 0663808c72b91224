"""Claiming an attempt and holding it: the one claim / heartbeat / fence / retry path for every kind
of work (runs.evaluation.kinds).

`execute` claims an attempt with a conditional UPDATE that increments its `tries` (a job delivered
twice works once), keeps a `Heartbeat` while the work runs, and writes the result only while the
claim is still ours: `tries` is the fencing token, so a worker whose attempt was recovered
meanwhile writes nothing. An infrastructure failure (`infra_failure`, or a job that failed before
claiming, `record_unstarted`) is recorded in the attempt's infra_history and re-queued after an
exponential back-off while retries are left. `dead_reason` says when a holder is taken for dead."""

from __future__ import annotations

import logging
import math
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable
from datetime import timedelta
from enum import StrEnum
from pathlib import Path
from typing import Self, TypeVar

from django.conf import settings
from django.db import InterfaceError, OperationalError, connection, transaction
from django.db.models import F
from django.utils import timezone

from runs.analysis.services import attempt_analysis_record_quietly
from runs.benchmark.text import storable_text
from runs.evaluation.kinds import WorkKind
from runs.evaluation.live import LIVE_WRITE_SHARE, TrajectoryStream, live_seconds, trajectory_file_read
from runs.evaluation.queue import FailedJob, enqueue, failure_recorded, kind_failed_jobs, retry_in_seconds
from runs.evaluation.workdirs import attempt_trajectory_path
from runs.models import Attempt

logger = logging.getLogger(__name__)


class ClaimOutcome(StrEnum):
    """What became of one try at a piece of work: what `execute` and `infra_failure` return (and the
    recovery's `attempt_overrun`), for callers that log or count them."""

    SKIPPED = "skipped"  # not queued any more (done, running elsewhere, cancelled): nothing was done
    DONE = "done"
    ERROR = "error"  # ended without a valid result, or given up after infrastructure failures
    REQUEUED = "requeued"  # an infrastructure failure, queued again
    LOST = "lost"  # the claim was taken away (recovered as dead) while this worker ran: nothing written
    OVERRAN = "overran"  # killed by the recovery past its time budget, recorded as budget exhausted


# The fields the failure analysis derives from (runs.analysis.services): a write of either redoes it.
ANALYSED_FIELDS = frozenset({"trajectory", "reexecution_output"})


def max_infra_retries() -> int:
    return settings.ATTEMPT_MAX_INFRA_RETRIES


def retry_delay_seconds(failures: int) -> float:
    """How long an attempt waits before the retry after its `failures`-th infrastructure failure:
    ATTEMPT_RETRY_BACKOFF_SECONDS doubled with each failure, at most
    ATTEMPT_RETRY_BACKOFF_MAX_SECONDS. Back to back, a sandbox or database outage would burn every
    retry in seconds."""
    base = float(settings.ATTEMPT_RETRY_BACKOFF_SECONDS)
    cap = float(settings.ATTEMPT_RETRY_BACKOFF_MAX_SECONDS)
    return min(cap, base * 2 ** max(0, failures - 1))


def heartbeat_seconds() -> float:
    return float(settings.ATTEMPT_HEARTBEAT_SECONDS)


def stale_seconds() -> float:
    """After how long without a heartbeat a running attempt's worker is taken for dead."""
    return float(settings.ATTEMPT_STALE_SECONDS)


def worker_host() -> str:
    """This worker host's name: settings.WORKER_HOST_NAME, else the machine's host name. Two
    worker hosts on one machine (separate workspace roots and sandboxes) set it to tell their
    claims apart."""
    return settings.WORKER_HOST_NAME or socket.gethostname()


def worker_identity() -> str:
    """host:pid of this process; the pid is the process doing the work (the RQ work horse)."""
    return f"{worker_host()}:{os.getpid()}"




# Pauses (seconds) before each new try of a write whose database connection was lost: a database
# restarting refuses connections for a few seconds.
DATABASE_RETRY_PAUSES = (0.5, 1.0, 2.0, 4.0, 8.0)

T = TypeVar("T")


def surviving_reconnects(write: Callable[[], T], *, what: str) -> T:
    """`write()`, tried again on a new connection after each of DATABASE_RETRY_PAUSES while the
    database cannot be reached (it restarted: every connection was dropped, and Django does not
    reconnect by itself). Only outside a transaction (a write inside one cannot be retried alone);
    `write` must be fenced (a conditional UPDATE), as every write of a try's result is."""
    for pause in DATABASE_RETRY_PAUSES:
        try:
            return write()
        except (OperationalError, InterfaceError) as error:
            if connection.in_atomic_block:
                raise
            logger.warning("%s: the database could not be reached (%s); trying again in %g s", what, error, pause)
            connection.close()
            time.sleep(pause)
    return write()


class InfrastructureFailure(Exception):
    """Something that is not the model's doing kept the attempt from a result."""


class ModelProviderFailure(Exception):
    """The model could not be reached or configured (no key, malformed spec, provider down)."""


class ClaimLost(Exception):
    """This worker's claim on the attempt was taken away (it was recovered as dead)."""


# The pid of the RQ worker whose work horse this process is (see serve_worker); None elsewhere.
_worker_pid: int | None = None


def serve_worker(pid: int) -> None:
    """Declare this process a work horse of the RQ worker `pid` (runs.evaluation.worker calls it in
    each horse it forks): the heartbeat of the work it claims then stops, and the horse exits, once
    that worker is gone. A horse runs in a process group of its own, so nothing else ends it: an
    orphan would keep its claim alive without making progress, and hold its worker's log pipe."""
    global _worker_pid
    _worker_pid = pid


def worker_gone() -> bool:
    """Whether this process is a work horse whose worker died (it was adopted by another process)."""
    return _worker_pid is not None and os.getppid() != _worker_pid


class Heartbeat:
    """Refreshes the claimed attempt's heartbeat_at from a thread; notices a lost claim, and ends a
    work horse whose worker died (see serve_worker)."""

    def __init__(self, kind: WorkKind, attempt_id: int, tries: int, interval: float) -> None:
        self.kind, self.attempt_id, self.tries, self.interval = kind, attempt_id, tries, interval
        self.lost = False
        self._stopped = False
        # Set to stop the thread, or to wake it early (a stream to store has been given it).
        self._wake = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-attempt-{attempt_id}", daemon=True)
        # The running try's trajectory file, stored as it grows (runs.evaluation.live); None: nothing to stream.
        self.stream: TrajectoryStream | None = None
        self._live_interval = live_seconds()
        self._live_due = 0.0  # monotonic time from which the next live write may come
        self._live_lock = threading.Lock()  # the beat's thread and the harness's may both write it

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stopped = True
        self._wake.set()
        self._thread.join(timeout=30)

    def _wait(self, next_beat: float) -> float:
        """Seconds until the next thing this thread does: the beat, or the next live write."""
        until_beat = next_beat - time.monotonic()
        if self.stream is not None and self._live_interval > 0:
            return max(0.0, min(until_beat, self._live_due - time.monotonic()))
        return max(0.0, until_beat)

    def _beat(self) -> None:
        next_beat = time.monotonic() + self.interval
        try:
            while True:
                self._wake.wait(self._wait(next_beat))
                self._wake.clear()
                if self._stopped:
                    return
                if self.stream is not None and self._live_interval > 0 and time.monotonic() >= self._live_due:
                    self.store_trajectory()
                if time.monotonic() < next_beat:
                    continue
                next_beat = time.monotonic() + self.interval
                if worker_gone():
                    self._orphaned()
                    self.lost = True  # settled meanwhile (by this horse's own work, or taken over): let it end
                    return
                try:
                    updated = self.kind.model.objects.filter(self.kind.held(), pk=self.attempt_id, tries=self.tries).update(
                        heartbeat_at=timezone.now()
                    )
                except Exception:
                    logger.exception("heartbeat of attempt %s failed", self.attempt_id)
                    # A dropped connection (the database restarted) stays broken: the next beat opens another.
                    connection.close()
                    continue
                if not updated:
                    self.lost = True
                    return
        finally:
            connection.close()  # this thread's own connection

    def _orphaned(self) -> None:
        """The worker that forked this horse is gone: record the try as an infrastructure failure
        (queued again after the back-off, or given up), then end the horse at once, sandboxes and
        all (bubblewrap's die with it; the sweep removes containers). Returns only when the try
        was settled already (ClaimOutcome.LOST), for the work to end by itself."""
        reason = f"worker died: its work horse {worker_identity()} outlived its worker (pid {_worker_pid}) and stopped"
        logger.error("%s %s try %s: %s", self.kind.name, self.attempt_id, self.tries, reason)
        try:
            if infra_failure(self.kind, attempt_id=self.attempt_id, tries=self.tries, reason=reason) == ClaimOutcome.LOST:
                return
        except Exception:  # noqa: BLE001 - the healing records it instead, once it finds this process gone
            logger.exception("%s %s: the failure could not be recorded", self.kind.name, self.attempt_id)
        os._exit(1)

    def stream_trajectory(self, path: Path) -> None:
        """Store the trajectory file at `path` (the running try's) in the attempt's row as it grows,
        at most every ATTEMPT_LIVE_SECONDS (runs.evaluation.live); ATTEMPT_LIVE_SECONDS=0: never."""
        self.stream = TrajectoryStream(path)
        self._wake.set()  # its first version now, not at the next beat

    def stream_end(self) -> None:
        """Store the trajectory once more, whole (the agent has ended), and stop streaming it."""
        if self.stream is not None and self._live_interval > 0:
            self.store_trajectory()
        self.stream = None

    def store_trajectory(self) -> bool:
        """Write the streamed trajectory to the attempt if its file changed: fenced like the beat, so
        a try that lost its claim writes nothing. Whether a write found the try still holding it is
        the beat's to decide (a row this connection cannot see yet, in a test's transaction, is not
        a lost claim). Never raises: the live view must not cost the attempt."""
        stream = self.stream
        if stream is None:
            return False
        with self._live_lock:
            started = time.monotonic()
            try:
                data = stream.read_if_changed()
                if data is None:
                    return False
                written = self.kind.model.objects.filter(self.kind.held(), pk=self.attempt_id, tries=self.tries).update(
                    trajectory=data
                )
            except Exception:
                logger.exception("%s %s: its trajectory could not be stored live", self.kind.name, self.attempt_id)
                if not connection.in_atomic_block:
                    connection.close()  # a dropped connection stays broken: the next write opens another
                return False
            finally:
                stream.timed(started)
                # A large trajectory (up to SUBMISSION_MAX_TRAJECTORY_BYTES) is stored less often: the writes take
                # at most 1/LIVE_WRITE_SHARE of the time, whatever its size.
                took = time.monotonic() - started
                self._live_due = time.monotonic() + max(self._live_interval, took * (LIVE_WRITE_SHARE - 1))
            return bool(written)

    def check(self, _step=None) -> None:
        """The agent's on_step callback, and the harness's between its phases: stop working on an
        attempt that is no longer ours, and renew the working thread's database connection if it
        died (renew_dead_connection)."""
        if self.lost:
            raise ClaimLost(f"attempt {self.attempt_id} try {self.tries} was taken over")
        renew_dead_connection()


def renew_dead_connection() -> None:
    """Close this thread's database connection if it no longer works (the database restarted, and
    Django does not reconnect by itself): the next query opens another, rather than fail the work
    of a try that outlived the restart. One `SELECT 1`; nothing inside a transaction."""
    if connection.connection is not None and not connection.in_atomic_block and not connection.is_usable():
        logger.warning("the database connection was lost (the database restarted?): opening another")
        connection.close()


def claim(kind: WorkKind, *, attempt_id: int, job_id: str = "") -> Attempt | None:
    """Claim an attempt for this process: the conditional UPDATE that makes a job delivered twice
    work once. Returns the claimed attempt, or None when `kind` may not claim it now."""
    now = timezone.now()
    claimed = kind.model.objects.filter(kind.claimable(), pk=attempt_id).update(
        tries=F("tries") + 1,
        claimed_by=worker_identity(),
        heartbeat_at=now,
        job_id=job_id[:100],
        job_lost_at=None,
        **kind.claim_fields(now),
    )
    if claimed != 1:
        return None
    return kind.model.objects.select_related(*kind.select_related).get(pk=attempt_id)


def execute(kind: WorkKind, perform: Callable[[Attempt, Heartbeat], dict], *, attempt_id: int, job_id: str = "",
            requeue: bool = True, cleanup: Callable[[Attempt], None] | None = None) -> ClaimOutcome:
    """Do one job's work on an attempt: claim it, keep its heartbeat while `perform(attempt,
    heartbeat)` works, and write the fields `perform` returns only while the claim is still ours.

    Does nothing (ClaimOutcome.SKIPPED) unless `kind` may claim the attempt, so a duplicate delivery, a cancelled
    attempt or one taken by another worker is left alone. An InfrastructureFailure, or any other
    exception (a harness bug), is an infrastructure failure: re-queued while retries are left
    (`requeue=False` leaves it for an in-process loop to take again). Returns DONE, ERROR,
    REQUEUED, LOST or SKIPPED (a ClaimOutcome)."""
    attempt = claim(kind, attempt_id=attempt_id, job_id=job_id)
    if attempt is None:
        logger.info("%s %s: nothing to claim", kind.name, attempt_id)
        return ClaimOutcome.SKIPPED
    heartbeat = Heartbeat(kind, attempt.pk, attempt.tries, heartbeat_seconds())
    try:
        with heartbeat:
            fields = perform(attempt, heartbeat)
    except ClaimLost:
        logger.warning("%s %s try %s: claim lost, result discarded", kind.name, attempt.pk, attempt.tries)
        return ClaimOutcome.LOST
    except InfrastructureFailure as failure:
        reason = str(failure)
        return surviving_reconnects(
            lambda: infra_failure(kind, attempt_id=attempt.pk, tries=attempt.tries, reason=reason, requeue=requeue),
            what=f"{kind.name} {attempt.pk}",
        )
    except Exception as error:
        logger.exception("%s %s failed in the harness", kind.name, attempt.pk)
        reason = f"harness error: {type(error).__name__}: {error}\n{traceback.format_exc()[-4000:]}"
        return surviving_reconnects(
            lambda: infra_failure(kind, attempt_id=attempt.pk, tries=attempt.tries, reason=reason, requeue=requeue),
            what=f"{kind.name} {attempt.pk}",
        )
    finally:
        if cleanup is not None:
            cleanup(attempt)
    # The work is done: a database restarted meanwhile (every connection dropped) must not cost it.
    written = surviving_reconnects(
        lambda: kind.model.objects.filter(kind.held(), pk=attempt.pk, tries=attempt.tries).update(heartbeat_at=None, **fields),
        what=f"{kind.name} {attempt.pk}",
    )
    if not written:
        logger.warning("%s %s try %s: claim lost before the result was written", kind.name, attempt.pk, attempt.tries)
        return ClaimOutcome.LOST
    if ANALYSED_FIELDS & fields.keys():
        attempt_analysis_record_quietly([attempt.pk])
    kind.settle(attempt)
    return ClaimOutcome.ERROR if fields.get("status") == Attempt.Status.ERROR else ClaimOutcome.DONE


def locked_try(kind: WorkKind, state, *, pk: int, tries: int):
    """The row `pk` of `kind`, locked for this transaction, if it is still in `state` (kind.held(),
    kind.waiting()) at try `tries`; None when another try, a cancel or a settle came first."""
    return (
        kind.model.objects.select_for_update(of=("self",))
        .select_related(*kind.select_related)
        .filter(state, pk=pk, tries=tries)
        .first()
    )


def infra_failure(kind: WorkKind, *, attempt_id: int, tries: int, reason: str, requeue: bool = True) -> ClaimOutcome:
    """Record an infrastructure failure of try `tries` (fenced: nothing happens unless the attempt
    is still held by that try). While retries are left the attempt is released for another try and,
    unless `requeue` is False, its job enqueued on commit after retry_delay_seconds; else it is
    given up as `kind` says. Returns ClaimOutcome REQUEUED, ERROR (given up) or LOST."""
    trajectory = partial_trajectory(attempt_id, tries) if kind.keeps_partial_trajectory else None
    with transaction.atomic():
        attempt = locked_try(kind, kind.held(), pk=attempt_id, tries=tries)
        if attempt is None:
            return ClaimOutcome.LOST
        entry = {"try": tries, "worker": attempt.claimed_by, "job_id": attempt.job_id}
        retrying = _release(kind, attempt, reason, entry, requeue=requeue)
        if trajectory is not None:
            attempt.trajectory = trajectory
        attempt.save()
    if trajectory is not None:
        attempt_analysis_record_quietly([attempt_id])
    kind.settle(attempt)
    outcome = ClaimOutcome.REQUEUED if retrying else ClaimOutcome.ERROR
    logger.warning("%s %s try %s: infrastructure failure (%s): %s", kind.name, attempt_id, tries, outcome,
                   reason.splitlines()[0] if reason else "")
    return outcome


def record_unstarted(kind: WorkKind, *, run=None) -> list[int]:
    """Record the failures of `kind`'s jobs that never claimed their attempt.

    A worker that cannot reach the database or import the job, or fails in any way before its
    claim succeeds, leaves its attempt waiting; only RQ's failed registry knows why. For each
    waiting attempt whose current job is there, the job's reason is written into the attempt's
    infra_history and counts as an infrastructure failure (re-queued after the back-off while
    retries are left, else given up). Each failure is recorded once (by its job id and time), so
    this runs wherever the database is reachable. `run`: only that run's. Returns the ids of the
    attempts recorded."""
    waiting = kind.model.objects.filter(kind.waiting())
    if run is not None:
        waiting = waiting.filter(**{kind.run_field: run})
    by_job = {kind.job_id(attempt.pk, attempt.tries): attempt for attempt in waiting.only("pk", "tries")}
    if not by_job:
        return []
    return [
        by_job[job_id].pk
        for job_id, failure in kind_failed_jobs(kind, job_ids=by_job, cleanup=False).items()
        if _record_unstarted(kind, attempt_id=by_job[job_id].pk, tries=by_job[job_id].tries, failure=failure)
    ]


def _record_unstarted(kind: WorkKind, *, attempt_id: int, tries: int, failure: FailedJob) -> bool:
    with transaction.atomic():
        attempt = locked_try(kind, kind.waiting(), pk=attempt_id, tries=tries)
        if attempt is None:
            return False  # claimed, cancelled or recorded meanwhile
        if failure_recorded(attempt.infra_history, failure):
            # Recorded before, but its job was not replaced then (Redis went away): replace it now.
            enqueue(kind, attempts=[attempt], delay=retry_in_seconds(attempt.infra_history[-1]) or 0)
            return False
        where = f" on worker {failure.worker}" if failure.worker else ""
        reason = f"its job {failure.job_id} failed{where} before claiming the attempt: {failure.reason}"
        entry = {"try": tries + 1, "claimed": False, "worker": failure.worker, "job_id": failure.job_id,
                 "at": failure.failed_at or timezone.now().isoformat()}
        _release(kind, attempt, reason, entry, requeue=True)
        attempt.save()
        transaction.on_commit(lambda: kind.settle(attempt))
    logger.warning("%s %s: %s", kind.name, attempt_id, reason)
    return True


def _release(kind: WorkKind, attempt: Attempt, reason: str, entry: dict, *, requeue: bool) -> bool:
    """Count one infrastructure failure on a locked attempt: its history entry, its release for
    another try (enqueued on commit after the back-off) or, out of retries, its end as `kind` says.
    Returns whether it will be retried."""
    attempt.infra_failures += 1
    retrying = attempt.infra_failures <= max_infra_retries()
    delay = retry_delay_seconds(attempt.infra_failures)
    entry = {**entry, **kind.history_fields, "reason": storable_text(reason)[:8000]}
    entry.setdefault("at", timezone.now().isoformat())
    if retrying and requeue:  # the run page shows when (in-process runs and resumes retry at once)
        entry["retry_at"] = (timezone.now() + timedelta(seconds=delay)).isoformat()
    for name, value in kind.released_fields(attempt, reason, retrying).items():
        setattr(attempt, name, value)
    attempt.infra_history = [*attempt.infra_history, entry]
    attempt.heartbeat_at = None
    attempt.job_lost_at = None  # this failure is what the run page says now
    if retrying and requeue:
        enqueue(kind, attempts=[attempt], delay=delay)
    return retrying


def dead_reason(attempt: Attempt, *, failed: dict[str, FailedJob], stale_after: float) -> str | None:
    """Why the worker holding `attempt` is dead, or None while it is taken for alive: its RQ job is
    in the failed registry (the work horse was killed, or RQ found the job abandoned), its process
    is gone (checked on the same host only), or its heartbeat is older than `stale_after` seconds
    (a machine lost)."""
    if attempt.job_id and attempt.job_id in failed:
        return f"worker died: its job {attempt.job_id} is in RQ's failed registry ({failed[attempt.job_id].reason})"
    if process_gone(attempt.claimed_by):
        return f"worker died: its process {attempt.claimed_by} no longer exists"
    if attempt.heartbeat_at is None or attempt.heartbeat_at < timezone.now() - timedelta(seconds=stale_after):
        age = (timezone.now() - attempt.heartbeat_at).total_seconds() if attempt.heartbeat_at else math.inf
        return f"worker presumed dead: no heartbeat for {age:.0f} s (stale after {stale_after:g} s)"
    return None


def partial_trajectory(attempt_id: int, tries: int) -> dict | None:
    """The trajectory file try `tries` left on this host (None elsewhere: then what it streamed to
    the database while it ran, runs.evaluation.live, is what is kept)."""
    return trajectory_file_read(attempt_trajectory_path(attempt_id, tries))


def local_pid(claimed_by: str) -> int | None:
    """The pid in a claim (host:pid, see worker_identity) when it was made on this host."""
    host, _, pid = claimed_by.rpartition(":")
    return int(pid) if host == worker_host() and pid.isdigit() else None


def process_gone(claimed_by: str) -> bool:
    """Whether the process that claimed an attempt is known to be dead: only decidable on its own
    host (a killed `run_eval --sync`, a worker on this machine). Elsewhere the heartbeat decides."""
    pid = local_pid(claimed_by)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # a killed process nobody has reaped yet still answers signal 0
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("Z", "X")
