"""The leaderboard's numbers, maintained: per system and n, computed after each change and stored,
so that a request only reads them (leaderboard.selectors).

- A change (runs.signals.results_changed: an attempt settled, uploaded or re-executed, a run hidden,
  shown or finished; a verifier's selections; a run deleted) bumps `SystemStanding.changes` of the
  systems it touches, in the change's own transaction, and once it commits schedules one refresh job.
- The job goes on the maintenance queue, which every evaluation worker takes before its next attempt
  (runs.evaluation.worker), so the next worker free runs it; paced: while attempts wait, at most one
  per MAINTENANCE_INTERVAL_SECONDS. While one is waiting no other is queued: the changes of a busy run
  are coalesced into it. It refreshes every stale system, under a lock, so two jobs never compute at once.
- Until it has run, pages show the previous numbers marked as being updated (`stale`); a system
  never computed yet is counted, not shown.
- Who may see a run is not stored here: pages show a system with its runs of the last refresh that
  are public now, and not at all when none is (leaderboard.selectors.standings_shown_runs), so hiding or
  deleting a run takes it off every page in its own request. The numbers of a system whose runs are
  all hidden are kept (shown to nobody), so that showing one again brings it back at once, marked as
  being updated; those of a system whose runs are all gone are deleted.

`manage.py refresh_standings [--all]` does the same in the foreground (`--all`: every system, as
after a change of the rules or data written behind the application's back).
"""
from __future__ import annotations

import logging

from django.db import transaction
from django.db.models import F
from django.db.models.signals import post_delete, pre_save
from django.utils import timezone

from leaderboard.computation import StandingNumbers, public_system_keys, standing_numbers_computed
from leaderboard.failure_analysis import FailureRows, failure_rows_computed
from leaderboard.figures import cost_figure_payload, figure_payload
from leaderboard.metrics import curve_fits_stored, metrics_stored
from leaderboard.models import (
    SystemExceptionStanding,
    SystemFailureStanding,
    SystemFunctionStanding,
    SystemNearMiss,
    SystemRunStanding,
    SystemSampleStanding,
    SystemStanding,
    SystemStandingByN,
)
from leaderboard.reference import reference_rows
from leaderboard.rules import LeaderboardFilters, canonical_config, system_slug
from leaderboard.selectors import LEADERBOARD_PER_PAGE, leaderboard_get, leaderboard_page
from leaderboard.table import leaderboard_rows_html, table_n_values
from runs.evaluation.queue import deployment_meta, maintenance_queue, redis_key
from runs.models import Run
from runs.signals import results_changed, upkeep_due

logger = logging.getLogger(__name__)

REFRESH_JOB = "leaderboard.jobs.standings_refresh_job"
# A lost job (Redis emptied) stops blocking new ones after this long; pages say the numbers are stale meanwhile.
PENDING_SECONDS = 600
REFRESH_LOCK_SECONDS = 900


def _pending_key() -> str:
    return redis_key("standings-refresh-pending")


def _lock_name() -> str:
    return redis_key("standings-refresh-lock")


# --- marking: in the transaction of the change ----------------------------------------------------


def standings_mark_stale(*, run_ids) -> None:
    """Mark the systems of `run_ids` as changed and schedule a refresh once the transaction commits.

    A system seen for the first time (a public run's) gets its standing row here, unrefreshed."""
    systems: dict[str, dict | None] = {}
    for *columns, hidden in Run.objects.filter(pk__in=list(run_ids)).values_list(*_RUN_KEY_COLUMNS, "hidden"):
        slug, key = _system_key(*columns)
        if not hidden:
            systems[slug] = key
        else:
            systems.setdefault(slug, None)
    _count_changes(systems)


# A run's columns that make its system (`_system_key`'s arguments, in order).
_RUN_KEY_COLUMNS = ("suite__name", "agent", "model", "agent_config", "context")


def _system_key(suite: str, agent: str, model: str, config, context: str) -> tuple[str, dict]:
    """A run's system: its slug and the fields of its key."""
    key = {"suite": suite, "agent": agent, "model": model, "config_json": canonical_config(config), "context": context}
    return system_slug(**key), key


def _count_changes(systems: dict[str, dict | None], *, schedule: bool = True) -> None:
    """Count one change to each of `systems` (slug: the fields of its key, or None when none of its
    public runs changed: a standing is never created for a system with no public run)."""
    if not systems:
        return
    with transaction.atomic():
        SystemStanding.objects.bulk_create(
            [SystemStanding(slug=slug, **key) for slug, key in systems.items() if key is not None], ignore_conflicts=True
        )
        SystemStanding.objects.filter(slug__in=list(systems)).update(changes=F("changes") + 1)
        if schedule:
            transaction.on_commit(standings_refresh_schedule)


def standings_refresh_schedule() -> bool:
    """Put a refresh job on the maintenance queue unless one is already waiting there
    (True when this call queued it). Redis unreachable: logged; the numbers stay marked stale until
    the next change or `manage.py refresh_standings`."""
    try:
        queue = maintenance_queue()
        if not queue.connection.set(_pending_key(), "1", nx=True, ex=PENDING_SECONDS):
            return False
        queue.enqueue(REFRESH_JOB, job_timeout=REFRESH_LOCK_SECONDS, result_ttl=600, failure_ttl=7 * 24 * 3600,
                      description="leaderboard standings refresh", meta=deployment_meta())
        return True
    except Exception:  # noqa: BLE001 - the change itself is committed; only its display waits
        logger.warning("the leaderboard refresh could not be queued; its numbers stay marked as stale", exc_info=True)
        return False


# --- refreshing ----------------------------------------------------------------------------------


def standings_refresh_queued() -> int:
    """The job's work: let the next change queue another job, then refresh under the lock (a second
    job waits for the first, then finds what changed meanwhile). Returns how many systems it refreshed."""
    connection = maintenance_queue().connection
    connection.delete(_pending_key())  # before reading the marks: a change after this queues a new job
    with connection.lock(_lock_name(), timeout=REFRESH_LOCK_SECONDS, blocking_timeout=REFRESH_LOCK_SECONDS):
        refreshed = standings_refresh()
    if refreshed:
        default_view_build()
    return refreshed


def default_view_build() -> None:
    """Build the figures and table rows of the leaderboard as first opened (no filter) into the shared
    cache, so that the first request after a change waits neither for Plotly (leaderboard.figures._memoised)
    nor for the rows' templates (leaderboard.table)."""
    whole = leaderboard_get(filters=LeaderboardFilters())
    board = leaderboard_page(whole, whole.rows[:LEADERBOARD_PER_PAGE])  # its first page, as the page builds it
    reference = reference_rows()
    if board.rows or reference:
        figure_payload(board, reference)
    if board.rows:
        cost_figure_payload(board)
        leaderboard_rows_html(board, table_n_values(board, reference))


def standings_refresh(*, everything: bool = False) -> int:
    """Recompute every stale system's numbers (`everything`: every system's) and store them.
    Returns how many systems were refreshed."""
    if everything:
        known = dict.fromkeys(SystemStanding.objects.values_list("slug", flat=True))
        _count_changes({**known, **public_system_keys()}, schedule=False)
    # The marks are read before the data: a change committed after this read is one more mark.
    stale = dict(SystemStanding.objects.filter(changes__gt=F("refreshed_changes")).values_list("slug", "changes"))
    for slug, numbers in standing_numbers_computed(list(stale)):
        _store(slug, numbers, failure_rows_computed(numbers.run_ids), seen=stale[slug])
    if stale:
        logger.info("leaderboard standings refreshed: %d system(s)", len(stale))
    return len(stale)


def _store(slug: str, numbers: StandingNumbers, failures: FailureRows, *, seen: int) -> None:
    with transaction.atomic():
        standing = SystemStanding.objects.select_for_update().filter(slug=slug).first()
        if standing is None or standing.refreshed_changes >= seen:
            return  # a refresh that started later has written already
        if not numbers.run_ids and _runs_of_system(slug, standing.run_ids):
            # Its runs are hidden, not gone (nor moved to another system): pages show it to nobody
            # meanwhile (no public run), and an unhidden run brings these numbers back at once,
            # marked stale until the next refresh.
            standing.refreshed_changes = seen
            standing.save(update_fields=["refreshed_changes"])
            return
        SystemStandingByN.objects.filter(standing=standing).delete()
        SystemStandingByN.objects.bulk_create([
            SystemStandingByN(standing=standing, verified_only=verified_only, n=n, metrics=metrics_stored(metrics))
            for verified_only, by_n in numbers.by_n.items() for n, metrics in by_n.items()
        ])
        SystemFunctionStanding.objects.filter(standing=standing).delete()
        SystemFunctionStanding.objects.bulk_create([
            SystemFunctionStanding(standing=standing, verified_only=verified_only, **counts._asdict())
            for verified_only, rows in numbers.functions.items() for counts in rows
        ], batch_size=1000)
        _page_rows_store(standing, numbers, failures)
        standing.run_ids, standing.k, standing.date = numbers.run_ids, numbers.k, numbers.date
        standing.unfinished_runs = numbers.unfinished_runs
        standing.curve_fits = curve_fits_stored(numbers.fits)
        standing.refreshed_changes, standing.refreshed_at = seen, timezone.now()
        standing.save(update_fields=["run_ids", "k", "date", "unfinished_runs", "curve_fits", "refreshed_changes",
                                     "refreshed_at"])


def _runs_of_system(slug: str, run_ids: list[int]) -> bool:
    """Whether any of `run_ids` still exists and still belongs to system `slug`."""
    return any(_system_key(*columns)[0] == slug for columns in Run.objects.filter(pk__in=run_ids).values_list(*_RUN_KEY_COLUMNS))


def _page_rows_store(standing: SystemStanding, numbers: StandingNumbers, failures: FailureRows) -> None:
    """Replace the rows the system's page reads (leaderboard.selectors.system_detail, system_samples_page,
    leaderboard.failure_analysis)."""
    for model in (SystemSampleStanding, SystemRunStanding, SystemNearMiss, SystemFailureStanding, SystemExceptionStanding):
        model.objects.filter(standing=standing).delete()
    page = numbers.page
    SystemSampleStanding.objects.bulk_create(
        [SystemSampleStanding(standing=standing, **row) for row in page.samples], batch_size=1000
    )
    SystemRunStanding.objects.bulk_create([SystemRunStanding(standing=standing, **row) for row in page.runs], batch_size=1000)
    SystemNearMiss.objects.bulk_create(
        [SystemNearMiss(standing=standing, **row) for row in page.near_misses], batch_size=1000
    )
    SystemFailureStanding.objects.bulk_create(
        [SystemFailureStanding(standing=standing, **row) for row in failures.by_n], batch_size=1000
    )
    SystemExceptionStanding.objects.bulk_create(
        [SystemExceptionStanding(standing=standing, **row) for row in failures.patterns], batch_size=1000
    )


# --- receivers (connected by leaderboard.apps) ------------------------------------------------------


def _on_results_changed(sender, *, run_ids, **kwargs) -> None:
    standings_mark_stale(run_ids=run_ids)


def _on_upkeep_due(sender, **kwargs) -> None:
    """A refresh job lost (Redis emptied, a worker killed in it) would leave systems stale until the
    next change: the workers' self-healing queues one again."""
    if SystemStanding.objects.filter(changes__gt=F("refreshed_changes")).exists():
        standings_refresh_schedule()


def _on_run_deleted(sender, instance: Run, **kwargs) -> None:
    slug, _ = _system_key(instance.suite.name, instance.agent, instance.model, instance.agent_config, instance.context)
    _count_changes({slug: None})


def _on_run_saved(sender, instance: Run, update_fields=None, raw=False, **kwargs) -> None:
    """A run moved to another system (staff corrected its model or agent in the admin, say): the
    system it leaves and the one it joins both change, in the save's own transaction. A new run has
    no system yet (its attempts announce it); a save that touches no key field costs no query."""
    key_fields = {"suite", "suite_id", "agent", "model", "agent_config", "context"}
    if raw or instance.pk is None or (update_fields is not None and not key_fields & set(update_fields)):
        return
    before = Run.objects.filter(pk=instance.pk).values_list(*_RUN_KEY_COLUMNS).first()
    if before is None:
        return
    old_slug, _ = _system_key(*before)
    new_slug, new_key = _system_key(instance.suite.name, instance.agent, instance.model, instance.agent_config, instance.context)
    if new_slug != old_slug:
        _count_changes({old_slug: None, new_slug: None if instance.hidden else new_key})


def connect() -> None:
    results_changed.connect(_on_results_changed, dispatch_uid="leaderboard-standings")
    upkeep_due.connect(_on_upkeep_due, dispatch_uid="leaderboard-standings-upkeep")
    post_delete.connect(_on_run_deleted, sender=Run, dispatch_uid="leaderboard-standings-run-deleted")
    pre_save.connect(_on_run_saved, sender=Run, dispatch_uid="leaderboard-standings-run-moved")

