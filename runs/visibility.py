"""Who may see a run, and who may act on it: the one place that decides, for runs, their attempts
and their submission. Every page, export and API reads through these functions.

- A run is public unless `Run.hidden`. A hidden run (and its attempts and submission) exists only
  for its owner and staff: anyone else gets what a missing one gives (404, or nothing in a list).
- The owner is `Run.created_by`: who started the run, or who uploaded it (a submission's run is
  created by its uploader). Runs started from the command line (run_eval, load_demo) have no
  owner and belong to staff.
- Acting on a run or submission (cancel, resume, retry failed, re-execute, hide and unhide) is
  for its owner and staff alone.
- The gold code (the reference implementation) in replays is for those `user_may_see_gold_code`
  allows, one rule for every place a replay could show it.
- The leaderboard is the public view: it counts `public_runs_q()` runs for everybody, staff and
  owners included, so its numbers never depend on who is looking.
"""
from __future__ import annotations

from django.conf import settings
from django.db.models import Q, QuerySet

from runs.models import Run, Submission, Suite


def _signed_in(user) -> bool:
    return user is not None and user.is_authenticated


def public_runs_q(*, prefix: str = "") -> Q:
    """Runs anybody may see. `prefix` puts it on a related model: `public_runs_q(prefix="run__")`."""
    return Q(**{f"{prefix}hidden": False})


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


def run_can_view(*, run: Run, user) -> bool:
    """Public unless hidden; a hidden run only for those who may manage it."""
    return not run.hidden or run_can_manage(run=run, user=user)


def user_may_see_gold_code(*, user, suite: Suite | None = None) -> bool:
    """Whether replays show `user` the reference implementation of `suite` (the suite of the run
    being replayed): the gold agents' diffs and patches, and each implementation beside the gold
    body. Everyone, when the suite declares its gold code public (`Suite.gold_public`: the
    built-in suite; never an upstream one). Otherwise staff always, and other signed-in users only
    while accounts come from staff (SIGNUP_ENABLED off): with open sign-up an account vouches for
    nobody, and the gold code is what the benchmark measures agents on."""
    if suite is not None and suite.gold_public:
        return True
    if not _signed_in(user):
        return False
    return user.is_staff or not settings.SIGNUP_ENABLED


def submission_can_manage(*, submission: Submission, user) -> bool:
    """A submission is its run's: the same owner (its uploader) and staff may act on it."""
    return run_can_manage(run=submission.run, user=user)


def submission_can_view(*, submission: Submission, user) -> bool:
    return run_can_view(run=submission.run, user=user)
