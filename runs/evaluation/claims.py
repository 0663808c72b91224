"""Split from runs.attempts: TODO docstring."""

from __future__ import annotations

import logging
import os
import socket
import threading
from datetime import timedelta
from pathlib import Path
from typing import Self

from django.conf import settings
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from runs.agents import load_trajectory
from runs.benchmark.text import json_safe, storable_text
from runs.evaluation.workdirs import attempt_trajectory_path
from runs.models import Attempt, Run

logger = logging.getLogger(__name__)


# Outcomes of attempt_execute, for callers that log or count them.
SKIPPED = "skipped"  # not queued any more (done, running elsewhere, cancelled): nothing was done


DONE = "done"


ERROR = "error"


REQUEUED = "requeued"  # an infrastructure failure, queued again


LOST = "lost"  # the claim was taken away (recovered as dead) while this worker ran: nothing written


def max_infra_retries() -> int:
    return int(getattr(settings, "ATTEMPT_MAX_INFRA_RETRIES", 2))


def retry_delay_seconds(failures: int) -> float:
    """How long an attempt waits before the retry after its `failures`-th infrastructure failure:
    ATTEMPT_RETRY_BACKOFF_SECONDS doubled with each failure, at most
    ATTEMPT_RETRY_BACKOFF_MAX_SECONDS. Back to back, a sandbox or database outage would burn every
    retry in seconds."""
    base = float(getattr(settings, "ATTEMPT_RETRY_BACKOFF_SECONDS", 10))
    cap = float(getattr(settings, "ATTEMPT_RETRY_BACKOFF_MAX_SECONDS", 300))
    return min(cap, base * 2 ** max(0, failures - 1))


def heartbeat_seconds() -> float:
    return float(getattr(settings, "ATTEMPT_HEARTBEAT_SECONDS", 5))


def stale_seconds() -> float:
    """After how long without a heartbeat a running attempt's worker is taken for dead."""
    return float(getattr(settings, "ATTEMPT_STALE_SECONDS", 60))


def worker_identity() -> str:
    """host:pid of this process; the pid is the process doing the work (the RQ work horse)."""
    return f"{socket.gethostname()}:{os.getpid()}"




class InfrastructureFailure(Exception):
    """Something that is not the model's doing kept the attempt from a result."""


class ModelProviderFailure(Exception):
    """The model could not be reached or configured (no key, malformed spec, provider down)."""


class ClaimLost(Exception):
    """This worker's claim on the attempt was taken away (it was recovered as dead)."""


class Heartbeat:
    """Refreshes the claimed attempt's heartbeat_at from a thread; notices a lost claim."""

    def __init__(self, attempt_id: int, tries: int, interval: float) -> None:
        self.attempt_id, self.tries, self.interval = attempt_id, tries, interval
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-attempt-{attempt_id}", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    updated = Attempt.objects.filter(
                        pk=self.attempt_id, status=Attempt.RUNNING, tries=self.tries
                    ).update(heartbeat_at=timezone.now())
                except Exception:
                    logger.exception("heartbeat of attempt %s failed", self.attempt_id)
                    continue
                if not updated:
                    self.lost = True
                    return
        finally:
            connection.close()  # this thread's own connection

    def check(self, _step=None) -> None:
        """The agent's on_step callback: stop working on an attempt that is no longer ours."""
        if self.lost:
            raise ClaimLost(f"attempt {self.attempt_id} try {self.tries} was taken over")


def attempt_claim(*, attempt_id: int, job_id: str = "") -> Attempt | None:
    """Claim a queued attempt for this process: the conditional UPDATE that makes a job delivered
    twice run once. Returns the claimed attempt, or None when it was not queued."""
    now = timezone.now()
    claimed = Attempt.objects.filter(pk=attempt_id, status=Attempt.QUEUED).update(
        status=Attempt.RUNNING,
        tries=F("tries") + 1,
        claimed_by=worker_identity(),
        claimed_at=now,
        heartbeat_at=now,
        finished_at=None,
        job_id=job_id,
    )
    if claimed != 1:
        return None
    return Attempt.objects.select_related("run", "sample__paper").get(pk=attempt_id)


def run_mark_finished(*, run_id: int) -> None:
    """Stamp the run's finished_at once no attempt of it is queued or running."""
    active = Attempt.objects.filter(run_id=run_id, status__in=[Attempt.QUEUED, Attempt.RUNNING]).exists()
    if not active:
        Run.objects.filter(pk=run_id, finished_at__isnull=True).update(finished_at=timezone.now())


def attempt_infra_failure(*, attempt_id: int, tries: int, reason: str, requeue: bool = True) -> str:
    """Record an infrastructure failure of try `tries`: queue the attempt again while retries are
    left (enqueueing its job on commit, after retry_delay_seconds, unless `requeue` is False),
    else end it as error / infrastructure. The try's partial trajectory is attached. Returns
    REQUEUED, ERROR or LOST."""
    trajectory = _partial_trajectory(attempt_id, tries)
    with transaction.atomic():
        attempt = Attempt.objects.select_for_update().filter(pk=attempt_id).first()
        if attempt is None or attempt.status != Attempt.RUNNING or attempt.tries != tries:
            return LOST
        attempt.infra_failures += 1
        entry = {
            "try": tries,
            "worker": attempt.claimed_by,
            "job_id": attempt.job_id,
            "at": timezone.now().isoformat(),
            "reason": storable_text(reason)[:8000],
        }
        delay = retry_delay_seconds(attempt.infra_failures)
        if attempt.infra_failures <= max_infra_retries():
            attempt.status = Attempt.QUEUED
            outcome = REQUEUED
            if requeue:  # the run page shows when (in-process runs and resumes retry at once)
                entry["retry_at"] = (timezone.now() + timedelta(seconds=delay)).isoformat()
        else:
            attempt.status = Attempt.ERROR
            attempt.failure_label = Attempt.INFRASTRUCTURE
            attempt.failure_detail = storable_text(reason)[:8000]
            attempt.finished_at = timezone.now()
            attempt.passed = False
            attempt.mismatch = False
            outcome = ERROR
        attempt.infra_history = [*attempt.infra_history, entry]
        if trajectory is not None:
            attempt.trajectory = trajectory
        attempt.heartbeat_at = None
        attempt.save()
        if outcome == REQUEUED and requeue:
            from runs.evaluation.queue import attempts_enqueue

            attempts_enqueue(attempts=[attempt], delay=delay)
    if outcome == ERROR:
        run_mark_finished(run_id=attempt.run_id)
    logger.warning("attempt %s try %s: infrastructure failure (%s): %s", attempt_id, tries, outcome, reason.splitlines()[0] if reason else "")
    return outcome


def _partial_trajectory(attempt_id: int, tries: int) -> dict | None:
    path = attempt_trajectory_path(attempt_id, tries)
    if not path.is_file():
        return None
    try:
        return json_safe(load_trajectory(path).to_dict())
    except Exception:
        logger.exception("partial trajectory %s could not be read", path)
        return None


def _local_pid(claimed_by: str) -> int | None:
    """The pid in a claim (host:pid, see worker_identity) when it was made on this host."""
    host, _, pid = claimed_by.rpartition(":")
    return int(pid) if host == socket.gethostname() and pid.isdigit() else None


def process_gone(claimed_by: str) -> bool:
    """Whether the process that claimed an attempt is known to be dead: only decidable on its own
    host (a killed `run_eval --sync`, a worker on this machine). Elsewhere the heartbeat decides."""
    pid = _local_pid(claimed_by)
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
