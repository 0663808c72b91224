"""The evaluation queue pages, for signed-in users. Thin: selectors read, services act."""
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from redis.exceptions import RedisError

from runs.evaluation import run_cancel, run_resume, run_retry_failed
from runs.models import Run
from runs.selectors import run_attempts, run_get, run_list_progress, run_progress


def _run_or_404(pk: int) -> Run:
    try:
        return run_get(pk=pk)
    except Run.DoesNotExist:
        raise Http404(f"no run {pk}") from None


def _back(request, run: Run):
    target = request.POST.get("next", "")
    if target and url_has_allowed_host_and_scheme(target, allowed_hosts={request.get_host()}, require_https=request.is_secure()):
        return redirect(target)
    return redirect("runs:queue")


@login_required
def queue(request):
    progress = run_list_progress()
    refresh = any(item.active for item in progress)
    return render(request, "runs/queue.html", {"runs": progress, "refresh": refresh})


@login_required
def run_detail(request, pk: int):
    run = _run_or_404(pk)
    progress = run_progress(run=run)
    return render(
        request,
        "runs/run_detail.html",
        {"run": run, "progress": progress, "attempts": run_attempts(run=run), "refresh": progress.active},
    )


@login_required
@require_POST
def run_cancel_view(request, pk: int):
    run = _run_or_404(pk)
    cancelled = run_cancel(run=run)
    messages.success(request, f"Run {run.pk} cancelled: {cancelled} queued attempt(s) will not run; running ones finish.")
    return _back(request, run)


@login_required
@require_POST
def run_retry_failed_view(request, pk: int):
    run = _run_or_404(pk)
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
    run = _run_or_404(pk)
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
