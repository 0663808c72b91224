"""The RQ worker class for evaluation workers.

RQ forks a fresh work horse per job, and the horse imports whatever the parent has not: the
harness and the sandbox backend would cost every job their import. This class's module imports them
once in the parent, and does once what their first use in a process costs (a sandbox's name service
lookup, masking and scoping a tiny example), so every horse starts warm. An LLM SDK (over a second to import, and needed only
by agents with a model) is imported in the parent before forking the first job whose meta asks for it
(WorkKind.preload): a worker that runs only baselines, re-executions and refreshes never loads one.

    python manage.py rqworker --worker-class runs.evaluation.worker.EvaluationWorker

(or settings `RQ = {"WORKER_CLASS": "runs.evaluation.worker.EvaluationWorker"}`, which makes it the default).

Every evaluation worker also heals the deployment's runs, with no other process and no cron:

- when it starts, one round of runs.evaluation.recovery.attempts_heal: attempts of dead workers re-queued,
  jobs that failed before claiming their attempt recorded on it, leftovers of dead tries swept; then
  runs.signals.upkeep_due, for derived data to queue work left undone (the leaderboard's refresh);
- a long-running worker (not --burst) keeps a thread that runs attempts_heal again every
  ATTEMPT_RECOVER_INTERVAL_SECONDS (one worker per host and interval, by a Redis lock; the round
  is idempotent anyway), and drives RQ's scheduler, which puts retries delayed by back-off
  (enqueue_in) on the queue when they are due. RQ's `--with-scheduler` would fork a process for
  that which a SIGKILLed worker leaves behind; a thread dies with its worker. Both share RQ's
  scheduler lock, so one scheduler works per queue whichever runs it;
- a --burst worker does not quit while retries are scheduled on its queues: it waits for them.

Every evaluation worker also listens, first, on settings.MAINTENANCE_QUEUE: quick jobs that keep
derived data up to date (the leaderboard's numbers after a change) are taken before the next
attempt, by whichever worker is free first, without a process of their own. Paced: for
MAINTENANCE_INTERVAL_SECONDS after any worker took one, waiting attempts go first, so a busy run's
changes are coalesced into one job per interval rather than one per attempt (and no worker waits
for another's refresh to end); a worker with nothing else to do takes it at once. And it listens, last,
on settings.TRANSPLANT_QUEUE: judging the functions of failed attempts alone
(runs.evaluation.transplants) waits until no attempt or re-execution does. A worker with GPUs
(settings.WORKER_GPUS) listens on settings.GPU_QUEUE right after the maintenance queue: work on
papers that need a GPU goes there, and only such workers take it.
"""
import encodings.idna  # noqa: F401 - preloaded before the fork: a horse's connections encode host names with it
import gc
import importlib
import logging
import threading
import time

import redis
from django.conf import settings
from django.db import connection
from rq import Worker
from rq.registry import ScheduledJobRegistry
from rq.scheduler import RQScheduler

import runs.evaluation.jobs  # noqa: F401 - preloaded before the fork, see above
import runs.evaluation.transplants  # noqa: F401 - preloaded before the fork, see above
from runs.agents.llm import ADAPTER_MODULES
from runs.agents.recorder import harness_versions
from runs.benchmark.masking import MaskTarget, mask_source
from runs.benchmark.patches import unified_diff
from runs.evaluation.claims import serve_worker, worker_host
from runs.evaluation.queue import PRELOAD_META, WORKER_BEAT_SECONDS, foreign_job, redis_key
from runs.evaluation.recovery import attempts_heal
from runs.evaluation.verdicts import scoped_code
from runs.signals import upkeep_due
from sandbox import backend_class, warm_up

logger = logging.getLogger(__name__)

# A masked function and an agent's patch for it: see harness_warm_up.
_WARM_UP_SOURCE = 'import os\n\n\ndef area(width, height):\n    """The area."""\n    return width * height\n'
_WARM_UP_TARGET = MaskTarget(name="area", description="the area", line_hint=4)


def harness_warm_up() -> None:
    """Mask a function and scope a patch of it, on a tiny example, before the fork: what code does
    on its first use in a process (tokenize's and other regular expressions compiled, caches
    filled) is then done once per worker rather than in every work horse."""
    masked = mask_source(_WARM_UP_SOURCE, [_WARM_UP_TARGET], filename="area.py").text
    patch = unified_diff("code/area.py", masked, _WARM_UP_SOURCE)
    error, _ = scoped_code(patch=patch, masked={"code/area.py": masked}, functions={"code/area.py": ["area"]}, read_other=None)
    if error:
        logger.warning("the harness warm-up's patch was refused: %s", error)


# Before the fork, once per worker: only this host's sandbox backend, what a process's first sandbox
# and first masking cost, and the harness versions every attempt's trajectory records.
backend_class(settings.SANDBOX_BACKEND)
warm_up()
harness_warm_up()
harness_versions()

# How often the scheduler puts due jobs on the queue (RQ's own polls every second too).
SCHEDULER_SECONDS = 1.0


def recover_interval_seconds() -> float:
    return float(settings.ATTEMPT_RECOVER_INTERVAL_SECONDS)


def heal_round(when: str) -> None:
    """One round of attempts_heal in this thread, logged; a failure (database or Redis away) is
    logged and left to the next round."""
    try:
        report = attempts_heal()
        if report.recovered or report.unstarted or report.requeued:
            logger.warning(
                "self-healing (%s): %d attempt(s) of dead workers settled, %d job failure(s) before a claim recorded "
                "(%d of them re-executions of submissions), %d waiting piece(s) of work whose job was lost queued again",
                when, len(report.recovered), len(report.unstarted), len(report.settled("reexecution")), len(report.requeued),
            )
        upkeep_due.send(sender=None)  # derived data (the leaderboard's numbers) catch up on work left undone
    except Exception:  # noqa: BLE001 - a failed round must not stop the worker; the next one tries again
        logger.exception("self-healing (%s) failed; the next round tries again", when)
    finally:
        connection.close()  # this thread's; forked work horses must not share the main thread's


def preload(modules) -> None:
    """Import, in the worker before it forks, the modules a job's horse will need (an LLM adapter
    and its SDK, runs.agents.llm.provider_module): once per worker instead of once per job. Only
    the adapters' modules are taken; one that fails to import is left to the horse, which says why."""
    for module in modules:
        if module in ADAPTER_MODULES:
            try:
                importlib.import_module(module)
            except Exception:  # noqa: BLE001 - the job reports it when its horse imports the module
                logger.warning("could not preload %s for a job", module, exc_info=True)


class _SchedulingAndHealingThread(threading.Thread):
    """A long-running worker's thread: RQ's scheduler every second, the worker's registration kept
    fresh (WORKER_BEAT_SECONDS) and whole, attempts_heal every interval."""

    def __init__(self, worker: Worker) -> None:
        super().__init__(name="evaluation-upkeep", daemon=True)
        self.worker = worker
        self.interval = recover_interval_seconds()
        self.scheduler = RQScheduler(worker.queues, connection=worker.connection, serializer=worker.serializer)
        self.lock_key = redis_key(f"heal:{worker_host()}")
        self._stopping = threading.Event()
        self._scheduler_failing = False

    def stop(self) -> None:
        self._stopping.set()
        self.join(timeout=60)

    def run(self) -> None:
        next_round = time.monotonic() + self.interval  # the worker healed once as it started
        next_beat = time.monotonic()
        try:
            while not self._stopping.wait(SCHEDULER_SECONDS):
                self._schedule()
                if time.monotonic() >= next_beat:
                    self._beat()
                    next_beat = time.monotonic() + WORKER_BEAT_SECONDS
                if time.monotonic() >= next_round:
                    self._heal()
                    next_round = time.monotonic() + self.interval
        finally:
            try:
                if self.scheduler.acquired_locks:
                    self.scheduler.release_locks()
                    self.scheduler.register_death()
            except Exception:  # noqa: BLE001 - the lock expires by itself
                pass

    def _schedule(self) -> None:
        try:
            if self.scheduler.acquired_locks:
                self.scheduler.heartbeat()  # refreshes the lock, or drops it if another took it over
            elif self.scheduler.acquire_locks():
                self.scheduler.register_birth()
            if self.scheduler.acquired_locks:
                self.scheduler.enqueue_scheduled_jobs()
            self._scheduler_failing = False
        except Exception as error:  # noqa: BLE001 - Redis away: the worker itself reports it; try again
            if not self._scheduler_failing:
                logger.warning("scheduled jobs could not be moved to the queue (%s); retrying every second", error)
            self._scheduler_failing = True

    def _beat(self) -> None:
        """Refresh the worker's registration (RQ's own beat waits minutes while the worker is idle;
        /healthz counts a worker as listening only while it beats, autoexperiment_site.health), and
        register it again when Redis lost it (restarted or flushed): else nothing would show that
        this worker listens until it restarts."""
        try:
            if not self.worker.connection.hexists(self.worker.key, "birth"):
                self.worker.connection.delete(self.worker.key)  # what a heartbeat re-created of it
                self.worker.register_birth()
                logger.warning("worker %s registered again: Redis had lost its registration", self.worker.name)
            else:
                self.worker.heartbeat()
        except Exception:  # noqa: BLE001 - Redis away: the worker itself reports it; beat again later
            pass

    def _heal(self) -> None:
        try:
            # One round per host and interval, by whichever of the host's workers comes first.
            mine = self.worker.connection.set(self.lock_key, self.worker.name, nx=True, px=int(self.interval * 900))
        except Exception as error:  # noqa: BLE001 - Redis away: the database may still be reachable
            logger.warning("self-healing lock unavailable (%s); healing without it", error)
            mine = True
        if mine:
            heal_round(f"every {self.interval:g} s")


class EvaluationWorker(Worker):
    """rq.Worker whose work horses inherit the attempt code already imported, and which heals the
    deployment's runs: at start, and every ATTEMPT_RECOVER_INTERVAL_SECONDS unless in burst mode
    (see the module docstring)."""

    _burst = True
    _upkeep: _SchedulingAndHealingThread | None = None
    _burst_scheduler: RQScheduler | None = None
    _waiting_for: float | None = None
    _maintenance = None  # the maintenance queue (None for a worker built without queues)

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        if self.queues:
            names = self.queue_names()
            if settings.WORKER_GPUS and settings.GPU_QUEUE not in names:
                self.queues.insert(0, self._queue(settings.GPU_QUEUE))  # work that needs its GPUs first
            if settings.MAINTENANCE_QUEUE not in names:
                self.queues.insert(0, self._queue(settings.MAINTENANCE_QUEUE))
            if settings.TRANSPLANT_QUEUE not in names:
                self.queues.append(self._queue(settings.TRANSPLANT_QUEUE))
            self._ordered_queues = self.queues[:]
            self._maintenance = next(queue for queue in self.queues if queue.name == settings.MAINTENANCE_QUEUE)
            # While paced: after the attempts, yet before the judging of failed ones.
            last = [queue for queue in self.queues if queue.name == settings.TRANSPLANT_QUEUE]
            rest = [queue for queue in self.queues if queue is not self._maintenance and queue not in last]
            self._paced_order = [*rest, self._maintenance, *last]

    def _queue(self, name: str):
        return self.queue_class(name, connection=self.connection, job_class=self.job_class, serializer=self.serializer)

    def work(self, burst: bool = False, *args, **kwargs):
        self._burst = burst
        try:
            return super().work(burst, *args, **kwargs)
        finally:
            if self._upkeep is not None:
                self._upkeep.stop()

    def bootstrap(self, *args, **kwargs):
        super().bootstrap(*args, **kwargs)
        heal_round("worker start")
        # Out of the collector's reach, start-up objects stay shared with every forked horse: a
        # collection in the horse would otherwise write to (and so copy) every page that holds them.
        gc.collect()
        gc.freeze()
        if not self._burst:
            self._upkeep = _SchedulingAndHealingThread(self)
            self._upkeep.start()

    def unsubscribe(self):
        """RQ's, with the pubsub thread told to stop before UNSUBSCRIBE is sent: the reply wakes the
        thread, which then ends. In RQ's order the reply could arrive first, the thread go back to
        its 60-second wait, and every such exit wait out join(timeout=1): a second added to a burst
        worker's life (its run's wall time) and to every shutdown."""
        if self.pubsub_thread:
            self.pubsub_thread.stop()
        super().unsubscribe()

    def execute_job(self, job, queue):
        owner = foreign_job(job)
        if owner is not None:
            # Its attempt id means another row in another database: running it would take that
            # deployment's work and write a result into ours. Failed, with the reason, where its
            # owner's operator can see it (RQ's failed registry of this queue).
            reason = (f"refused: job {job.id} was enqueued by deployment {owner!r} and this worker serves "
                      f"{settings.DEPLOYMENT_ID!r} (two deployments on one queue: give each its own DEPLOYMENT_ID)")
            self.log.error("Worker %s: %s", self.name, reason)
            self.handle_job_failure(job, queue, exc_string=reason)
            return
        preload(job.meta.get(PRELOAD_META, ()))
        return super().execute_job(job, queue)

    def main_work_horse(self, job, queue):
        """In the forked horse: its heartbeat ends it if this worker dies (claims.serve_worker)."""
        serve_worker(self.pid)
        return super().main_work_horse(job, queue)

    def dequeue_job_and_maintain_ttl(self, timeout, max_idle_time=None):
        self._order_maintenance()
        result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        # No timeout is burst mode: an empty queue ends the worker, though retries delayed by
        # back-off may still be scheduled on it (load_demo, the tests' workers). Wait for them.
        while result is None and timeout is None and not self._stop_requested:
            due = self._next_scheduled_at()
            if due is None:
                break
            if due > time.time():
                if due != self._waiting_for:
                    self.log.info("Worker %s: waiting %.0f s for a retry scheduled on its queues", self.name, due - time.time())
                    self._waiting_for = due
                time.sleep(min(max(due - time.time(), 0.0), SCHEDULER_SECONDS))
            self._enqueue_due_jobs()
            result = super().dequeue_job_and_maintain_ttl(timeout, max_idle_time)
        if result is not None and self._maintenance is not None and result[1].name == self._maintenance.name:
            self._pace_maintenance()
        return result

    def _paced_key(self) -> str:
        return f"autoexperiment:paced:{self._maintenance.key}"  # one per queue, shared by its workers

    def _pace_maintenance(self) -> None:
        """A maintenance job was taken: for MAINTENANCE_INTERVAL_SECONDS, waiting attempts go first."""
        seconds = settings.MAINTENANCE_INTERVAL_SECONDS
        if seconds > 0:
            try:
                self.connection.set(self._paced_key(), self.name, ex=seconds)
            except redis.exceptions.RedisError:
                pass  # unpaced: the next maintenance job is simply taken first

    def _order_maintenance(self) -> None:
        """The maintenance queue first, unless paced. The order holds for one dequeue: a worker
        blocked on empty queues takes whichever job comes first, so an idle worker refreshes at once."""
        if self._maintenance is None:
            return
        try:
            paced = self.connection.exists(self._paced_key())
        except redis.exceptions.RedisError:
            paced = False  # RQ's dequeue says what is wrong with Redis, and waits for it
        self._ordered_queues = self._paced_order if paced else self.queues

    def _next_scheduled_at(self) -> float | None:
        """When the earliest job scheduled on this worker's queues is due (a Unix time)."""
        times = []
        for queue in self.queues:
            earliest = self.connection.zrange(ScheduledJobRegistry(queue=queue).key, 0, 0, withscores=True)
            times += [score for _, score in earliest]
        return min(times) if times else None

    def _enqueue_due_jobs(self) -> None:
        """What RQ's scheduler does in burst mode: move the due jobs under its lock, if no running
        scheduler holds it (one that does moves them itself)."""
        if self._burst_scheduler is None:
            self._burst_scheduler = RQScheduler(self.queues, connection=self.connection, serializer=self.serializer)
        if self._burst_scheduler.acquire_locks():
            try:
                self._burst_scheduler.enqueue_scheduled_jobs()
            finally:
                self._burst_scheduler.release_locks()
