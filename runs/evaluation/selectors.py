"""Reads of the benchmark tables: plain functions with keyword-only arguments."""

from dataclasses import dataclass, field

from django.db.models import Avg, Count, DurationField, ExpressionWrapper, F, Q, Sum

from runs.evaluation.queue import failed_jobs_get, failure_recorded, job_id_for, retry_in_seconds
from runs.models import Attempt, Run, Transplant
from runs.suites.selectors import suite_sample_counts
from runs.visibility import runs_visible_to


@dataclass
class RunProgress:
    """A run with its attempts counted by status, how far along it is and when it may end.

    `eta_seconds` is the mean duration of the attempts finished so far, times the attempts left,
    divided by how many run at once now (at least one); None before any attempt finished or while
    nothing runs (no worker is taking the run's jobs).
    """

    run: Run
    counts: dict[str, int] = field(default_factory=dict)
    passed: int = 0
    mismatches: int = 0
    infrastructure_errors: int = 0
    mean_seconds: float | None = None
    # Ids of its running attempts, at most RUNNING_LINKS: the queue page links to their live replays.
    running_attempts: list[int] = field(default_factory=list)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    @property
    def queued(self) -> int:
        return self.counts.get(Attempt.QUEUED, 0)

    @property
    def running(self) -> int:
        return self.counts.get(Attempt.RUNNING, 0)

    @property
    def done(self) -> int:
        return self.counts.get(Attempt.DONE, 0)

    @property
    def error(self) -> int:
        return self.counts.get(Attempt.ERROR, 0)

    @property
    def cancelled(self) -> int:
        return self.counts.get(Attempt.CANCELLED, 0)

    @property
    def remaining(self) -> int:
        return self.queued + self.running

    @property
    def ended(self) -> int:
        return self.total - self.remaining

    @property
    def percent(self) -> float:
        return 100.0 * self.ended / self.total if self.total else 100.0

    @property
    def status(self) -> str:
        return Run.status_from_counts(self.counts, cancelled=self.run.cancelled_at is not None)

    @property
    def active(self) -> bool:
        return self.remaining > 0

    @property
    def eta_seconds(self) -> float | None:
        return self.eta()

    def eta(self, *, workers: int | None = None) -> float | None:
        """Seconds until the run ends if `workers` (default: as many as run its attempts now) keep going."""
        if not self.remaining:
            return 0.0
        workers = self.running if workers is None else workers
        if self.mean_seconds is None or not workers:
            return None
        return self.mean_seconds * self.remaining / workers

    @property
    def counts_by_status(self) -> list[tuple[str, int]]:
        return [(status, self.counts.get(status, 0)) for status, _ in Attempt.Status.choices]


# Running attempts the queue page links to per run (a run may have as many running as there are workers).
RUNNING_LINKS = 10


def _progress_for(runs: list[Run]) -> list[RunProgress]:
    by_run = {run.pk: RunProgress(run=run) for run in runs}
    if not by_run:
        return []
    grouped = Attempt.objects.filter(run_id__in=by_run).values("run_id", "status").annotate(count=Count("id"))
    for row in grouped:
        by_run[row["run_id"]].counts[row["status"]] = row["count"]
    duration = ExpressionWrapper(F("finished_at") - F("claimed_at"), output_field=DurationField())
    summaries = (
        Attempt.objects.filter(run_id__in=by_run)
        .values("run_id")
        .annotate(
            passed=Count("id", filter=Q(passed=True)),
            mismatches=Count("id", filter=Q(mismatch=True)),
            infrastructure=Count("id", filter=Q(status=Attempt.ERROR, failure_label=Attempt.INFRASTRUCTURE)),
            mean=Avg(duration, filter=Q(status=Attempt.DONE, claimed_at__isnull=False, finished_at__isnull=False)),
        )
    )
    for row in summaries:
        progress = by_run[row["run_id"]]
        progress.passed, progress.mismatches = row["passed"], row["mismatches"]
        progress.infrastructure_errors = row["infrastructure"]
        progress.mean_seconds = row["mean"].total_seconds() if row["mean"] is not None else None
    running = [pk for pk, progress in by_run.items() if progress.running]
    if running:  # a fourth query, only while some run has attempts running
        rows = (Attempt.objects.filter(run_id__in=running, status=Attempt.RUNNING)
                .order_by("run_id", "pk").values_list("run_id", "pk")[: RUNNING_LINKS * len(running)])
        for run_id, pk in rows:
            links = by_run[run_id].running_attempts
            if len(links) < RUNNING_LINKS:
                links.append(pk)
    return list(by_run.values())


def run_progress(*, run: Run) -> RunProgress:
    """Counts by status, progress and ETA of one run (fresh from the database)."""
    run = Run.objects.select_related("suite", "created_by").get(pk=run.pk)
    return _progress_for([run])[0]


def run_list_progress(*, user, limit: int = 50) -> list[RunProgress]:
    """The most recent runs `user` may see (runs.visibility), newest first, each with its progress
    (three queries in all, four while attempts run)."""
    runs = runs_visible_to(user=user, queryset=Run.objects.select_related("suite", "created_by"))
    return _progress_for(list(runs.order_by("-created_at", "-id")[:limit]))


def run_get(*, pk: int) -> Run:
    """The run with this id (Run.DoesNotExist otherwise)."""
    return Run.objects.select_related("suite", "created_by").get(pk=pk)


def run_attempts(*, run: Run):
    """The run's attempts with their samples, in sample order; heavy JSON columns left out."""
    return (
        Attempt.objects.filter(run=run)
        .select_related("sample")
        .defer("trajectory", "reported_score", "reexecution_score", "reexecution_output", "final_patch")
        .order_by("sample__sample_id", "index")
    )


@dataclass
class TransplantSummary:
    """A run's transplants (runs.evaluation.transplants): how many wait, and what the settled found."""

    waiting: int = 0  # queued or running
    verdicts: dict[str, int] = field(default_factory=dict)  # settled ones by verdict label
    sandbox_seconds: float = 0.0  # of them all: not counted in the attempts' time

    @property
    def total(self) -> int:
        return self.waiting + sum(self.verdicts.values())


def run_transplant_summary(*, run: Run) -> TransplantSummary:
    """What the run's transplants found so far (one query)."""
    summary = TransplantSummary()
    labels = dict(Transplant.Verdict.choices)
    rows = (
        Transplant.objects.filter(attempt__run=run).order_by().values("status", "verdict")
        .annotate(count=Count("id"), seconds=Sum("sandbox_seconds"))
    )
    for row in rows:
        summary.sandbox_seconds += row["seconds"] or 0.0
        if row["status"] in (Transplant.Status.QUEUED, Transplant.Status.RUNNING):
            summary.waiting += row["count"]
        else:
            label = labels.get(row["verdict"], row["verdict"])
            summary.verdicts[label] = summary.verdicts.get(label, 0) + row["count"]
    return summary


def run_label_counts(*, run: Run) -> dict[str, int]:
    """How many of the run's attempts carry each failure label (passed and unfinished ones left out)."""
    rows = Attempt.objects.filter(run=run).exclude(failure_label="").values("failure_label").annotate(count=Count("id"))
    return {row["failure_label"]: row["count"] for row in rows}


@dataclass
class AttemptWaiting:
    """Why a queued attempt that already failed, or lost its job, is waiting, for the run page."""

    # "retrying": its failure is recorded and it is queued again; "re-queued": its job was lost;
    # "could not start": see run_waiting_notes
    label: str
    reason: str
    retry_in: float | None = None  # seconds until its retry is due; None once due


LOST_JOB_NOTE = "re-queued after its job was lost"


def run_waiting_notes(*, run: Run) -> dict[int, AttemptWaiting]:
    """The run's queued attempts that already failed or lost their job, by id, with why and when
    they are retried.

    Either the attempt's last infrastructure failure with its retry time, or that the healing
    queued it again after Redis lost its job (runs.evaluation.recovery.attempts_requeue_lost),
    until a try claims it, or, for a job that failed before it could claim its attempt and that
    no worker has recorded yet (none of them reaches the database, say), the reason RQ's failed
    registry holds: the page shows it before any worker can write it. With Redis unreachable,
    only what the database holds."""

    queued = list(
        Attempt.objects.filter(run=run, status=Attempt.QUEUED).only("pk", "tries", "infra_history", "job_lost_at")
    )
    if not queued:
        return {}
    notes = {}
    for attempt in queued:
        if attempt.job_lost_at is not None:
            retry_in = retry_in_seconds(attempt.infra_history[-1]) if attempt.infra_history else None
            notes[attempt.pk] = AttemptWaiting(
                "re-queued",
                f"{LOST_JOB_NOTE}: Redis held no job for it at {attempt.job_lost_at:%Y-%m-%d %H:%M:%S} UTC",
                retry_in or None,
            )
        elif attempt.infra_history:
            last = attempt.infra_history[-1]
            reason = (last.get("reason") or "").strip().splitlines()
            notes[attempt.pk] = AttemptWaiting("retrying", reason[0] if reason else "", retry_in_seconds(last) or None)
    by_job = {job_id_for(attempt): attempt for attempt in queued}
    for job_id, failure in failed_jobs_get(job_ids=by_job, cleanup=False).items():
        if failure_recorded(by_job[job_id].infra_history, failure):
            continue  # recorded: the note above says when it is retried
        where = f" on worker {failure.worker}" if failure.worker else ""
        notes[by_job[job_id].pk] = AttemptWaiting(
            "could not start",
            f"its job failed{where} before claiming the attempt: {failure.reason}. "
            "The next worker that reaches the database records it and retries the attempt.",
        )
    return notes


@dataclass(frozen=True)
class RunCostEstimate:
    """What a run would cost before it is queued (the site's run form shows it).

    `ceiling` is attempts x the per-attempt cost cap: an agent stops an attempt once its calls cost
    that much (calls of a model without a known price count as nothing, so `priced` False means the
    cap does not bound what it is billed). `past_mean` is the mean cost per attempt of earlier runs
    of the same agent and model that the viewer may see, over `past_attempts` attempts whose cost is
    known (uploaded runs' self-reported costs are left out); `expected` is attempts x that mean.
    """

    sample_counts: dict[int, int]  # n -> samples
    k: int
    max_cost: float
    needs_model: bool
    priced: bool
    past_attempts: int
    past_mean: float | None

    @property
    def samples(self) -> int:
        return sum(self.sample_counts.values())

    @property
    def attempts(self) -> int:
        return self.samples * self.k

    @property
    def ceiling(self) -> float:
        return self.attempts * self.max_cost if self.needs_model else 0.0

    @property
    def expected(self) -> float | None:
        return None if self.past_mean is None else self.attempts * self.past_mean


def run_cost_estimate(*, suite, agent: str, model: str, n_values: list[int], k: int, cap: int, max_cost: float,
                      needs_model: bool, priced: bool, user) -> RunCostEstimate:
    """The estimate of a run with these (valid) options, for `user` (see RunCostEstimate)."""
    past = Attempt.objects.filter(
        run__in=runs_visible_to(user=user, queryset=Run.objects.filter(agent=agent, model=model, submission__isnull=True)),
        cost__isnull=False,
    ).aggregate(count=Count("pk"), mean=Avg("cost"))
    return RunCostEstimate(
        sample_counts=suite_sample_counts(suite=suite, n_values=sorted(set(n_values)), cap=cap),
        k=k,
        max_cost=max_cost,
        needs_model=needs_model,
        priced=priced,
        past_attempts=past["count"],
        past_mean=past["mean"],
    )
