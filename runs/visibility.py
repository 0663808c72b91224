"""Who may see a run, and who may act on it: the one place that decides, for runs, their attempts
and their submission. Every page, export and API reads through these functions.

- A run is public unless `Run.hidden`. A hidden run (and its attempts and submission) exists only
  for its owner and staff: anyone else gets what a missing one gives (404, or nothing in a list).
- The owner is `Run.created_by`: who started the run, or who uploaded it (a submission's run is
  created by its uploader). Runs started from the command line (run_eval, load_demo) have no
  owner and belong to staff.
- Starting a run from the site is for staff and those granted runs.start_run (`run_can_start`).
- Acting on a run or submission (cancel, resume, retry failed, re-execute, hide and unhide) is
  for its owner and staff alone.
- Gold (a suite's reference implementation, its gold numbers, its held-out variants) is for those
  `gold_access` allows: one rule for every page, export, search index, snippet and error text
  (docs/security.md).
- The leaderboard is the public view: it counts `public_runs_q()` runs for everybody, staff and
  owners included, so its numbers never depend on who is looking. Its numbers are stored and
  refreshed later (leaderboard.standings), but who may see a run is read at once: a stored system is
  shown with its runs that are public now (`public_run_ids`), and not at all when none is.
"""
from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from django.db import connections
from django.db.models import Q, QuerySet
from django.db.models.expressions import RawSQL

from runs.models import Run, Submission, Suite


def _signed_in(user) -> bool:
    return user is not None and user.is_authenticated


def public_runs_q(*, prefix: str = "") -> Q:
    """Runs anybody may see. `prefix` puts it on a related model: `public_runs_q(prefix="run__")`."""
    return Q(**{f"{prefix}hidden": False})


def public_run_ids(*, among: Iterable[int]) -> set[int]:
    """Which of the runs `among` exist and are public now: one query while all of them are (it counts
    them, rather than reading thousands of ids back), a second when one is not (one or two per batch
    of ids on a database that caps a query's parameters, such as SQLite)."""
    ids = sorted({int(pk) for pk in among})
    connection = connections[Run.objects.db]
    # PostgreSQL takes the ids as one array parameter: Django would prepare thousands of parameters one
    # by one (a tenth of a second at the leaderboard's 5,000 systems).
    postgres = connection.vendor == "postgresql"
    batch = (len(ids) or 1) if postgres else (connection.features.max_query_params or len(ids) or 1)
    public: set[int] = set()
    for start in range(0, len(ids), batch):
        chunk = ids[start:start + batch]
        runs = Run.objects.filter(pk__in=RawSQL("SELECT unnest(%s::bigint[])", (chunk,)) if postgres else chunk)
        if runs.filter(public_runs_q()).count() == len(chunk):
            public.update(chunk)
        else:
            public.update(runs.filter(public_runs_q()).values_list("pk", flat=True))
    return public


def runs_visible_q(*, user, prefix: str = "") -> Q:
    """Runs `user` may see: public ones, plus their own hidden ones; every run for staff.

    `prefix` puts it on a related model, e.g. `Attempt.objects.filter(runs_visible_q(user=u, prefix="run__"))`.
    """
    if _signed_in(user) and user.is_staff:
        return Q()
    visible = public_runs_q(prefix=prefix)
    if _signed_in(user):
        visible |= Q(**{f"{prefix}created_by": user.pk})
    return visible


def runs_visible_to(*, user, queryset: QuerySet[Run] | None = None) -> QuerySet[Run]:
    """`queryset` (default every run) cut down to the runs `user` may see."""
    return (Run.objects.all() if queryset is None else queryset).filter(runs_visible_q(user=user))


def run_can_manage(*, run: Run, user) -> bool:
    """Whether `user` may act on the run: its owner or staff (an ownerless run: staff only)."""
    if not _signed_in(user):
        return False
    return user.is_staff or (run.created_by_id is not None and run.created_by_id == user.pk)


def run_can_start(*, user) -> bool:
    """Whether `user` may start runs from the site (the run form): staff, and those staff grant the
    runs.start_run permission in the admin. A run started there is its starter's."""
    return _signed_in(user) and (user.is_staff or user.has_perm("runs.start_run"))


def run_can_view(*, run: Run, user) -> bool:
    """Public unless hidden; a hidden run only for those who may manage it."""
    return not run.hidden or run_can_manage(run=run, user=user)


@dataclass(frozen=True)
class GoldAccess:
    """What one viewer may see of one suite's gold (`gold_access` decides).

    - `code`: the gold bodies of the suite's masked functions, whole (the gold agents' diffs and
      patches, each implementation beside its gold body) or a line at a time (a traceback or a
      warning quoting a line of one, in any step, output or error text).
    - `numbers`: the public experiments' gold numbers (score tables, benchmark pages, numbers printed
      in full precision by code that reproduced them).
    - `staff`: what is staff's alone whatever the suite declares: the held-out variants (their
      commands, gold, outputs and scores: Attempt.held_out_scores) and what code that ran beside the
      gold bodies printed (a transplant's numbers).
    """

    code: bool
    numbers: bool
    staff: bool


def gold_access(*, user, suite: Suite | None) -> GoldAccess:
    """The one rule for gold. Staff see all of it. Anybody else sees a suite's gold code and
    numbers when the suite declares them public (`Suite.gold_public`: the built-in suite, whose code
    anyone may run; never an upstream one), and nothing of a private suite's gold, signed in or not:
    an account vouches for nobody. Held-out variants and transplants' numbers: staff only.

    `user=None` is the anonymous visitor: what the search index may hold (runs.analysis)."""
    staff = _signed_in(user) and user.is_staff
    public = suite is not None and suite.gold_public
    return GoldAccess(code=staff or public, numbers=staff or public, staff=staff)


def user_may_see_gold_code(*, user, suite: Suite | None = None) -> bool:
    """Whether `user` may see the gold code of `suite` (`gold_access(...).code`)."""
    return gold_access(user=user, suite=suite).code


def submission_can_manage(*, submission: Submission, user) -> bool:
    """A submission is its run's: the same owner (its uploader) and staff may act on it."""
    return run_can_manage(run=submission.run, user=user)


def submission_can_view(*, submission: Submission, user) -> bool:
    return run_can_view(run=submission.run, user=user)
