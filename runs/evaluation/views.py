"""The evaluation queue pages, for signed-in users. Thin: selectors read, services act.

Who sees a run and who may press its buttons is runs.visibility's: a hidden run that is not yours
is a 404, a visible run that is not yours (or a command-line run, which is staff's) a 403.
"""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from redis.exceptions import RedisError

from runs.evaluation.selectors import (
    run_attempts,
    run_get,
    run_list_progress,
    run_progress,
    run_transplant_summary,
    run_waiting_notes,
)
from runs.evaluation.services import run_cancel, run_resume, run_retry_failed, runs_set_hidden
from runs.models import Run
from runs.visibility import run_can_manage, run_can_view

# A run may hold thousands of attempts (an upload up to SUBMISSION_MAX_RECORDS): its page lists them
# this many at a time.
ATTEMPTS_PER_PAGE = 100


def _run_or_404(request, pk: int) -> Run:
    try:
        run = run_get(pk=pk)
    except Run.DoesNotExist:
        raise Http404(f"no run {pk}") from None
    if not run_can_view(run=run, user=request.user):
        raise Http404(f"no run {pk}")
    return run


def _manageable(request, pk: int) -> Run:
    run = _run_or_404(request, pk)
    if not run_can_manage(run=run, user=request.user):
        raise PermissionDenied(f"only the owner of run {pk} and staff may do this")
    return run


def _back(request, run: Run):
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return redirect(target)
    return redirect("runs:queue")


@login_required
def queue(request):
    progress = run_list_progress(user=request.user)
    refresh = any(item.active for item in progress)
    manageable = {item.run.pk for item in progress if run_can_manage(run=item.run, user=request.user)}
    return render(request, "runs/queue.html", {"runs": progress, "refresh": refresh, "manageable": manageable})


@login_required
def run_detail(request, pk: int):
    run = _run_or_404(request, pk)
    progress = run_progress(run=run)
    transplants = run_transplant_summary(run=run)
    return render(
        request,
        "runs/run_detail.html",
        {
            "run": run, "progress": progress,
            # A page number past the end shows the last page, one that is not a number the first.
            "attempts": Paginator(run_attempts(run=run), ATTEMPTS_PER_PAGE).get_page(request.GET.get("page")),
            "refresh": progress.active or transplants.waiting, "transplants": transplants,
            "manage": run_can_manage(run=run, user=request.user),
            "waiting": run_waiting_notes(run=run),
        },
    )


@login_required
@require_POST
def run_cancel_view(request, pk: int):
    run = _manageable(request, pk)
    cancelled = run_cancel(run=run)
    messages.success(request, f"Run {run.pk} cancelled: {cancelled} queued attempt(s) will not run; running ones finish.")
    return _back(request, run)


@login_required
@require_POST
def run_retry_failed_view(request, pk: int):
    run = _manageable(request, pk)
    try:
        retried = run_retry_failed(run=run)
    except RedisError as error:
        messages.error(request, f"Run {run.pk}: failed attempts are queued again but Redis is unreachable ({error}); resume the run once it is back.")
        return _back(request, run)
    if retried:
        messages.success(request, f"Run {run.pk}: {retried} failed attempt(s) queued again.")
    else:
        messages.info(request, f"Run {run.pk} has no failed attempts to retry.")
    return _back(request, run)


@login_required
@require_POST
def run_resume_view(request, pk: int):
    run = _manageable(request, pk)
    try:
        report = run_resume(run=run)
    except RedisError as error:
        messages.error(request, f"Run {run.pk} could not be resumed: Redis is unreachable ({error}).")
        return _back(request, run)
    messages.success(
        request,
        f"Run {run.pk} resumed: {report.recovered} attempt(s) of dead workers recovered, "
        f"{report.uncancelled} un-cancelled, {report.enqueued} job(s) enqueued.",
    )
    return _back(request, run)


@login_required
@require_POST
def run_set_hidden_view(request, pk: int, hidden: bool):
    run = _manageable(request, pk)
    runs_set_hidden(runs=[run], hidden=hidden)
    if hidden:
        messages.success(request, f"Run {run.pk} is hidden: only its owner and staff see it; the leaderboard leaves it out.")
    else:
        messages.success(request, f"Run {run.pk} is public again.")
    return _back(request, run)
