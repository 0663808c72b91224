"""The evaluation queue pages, for signed-in users. Thin: selectors read, services act.

Who sees a run and who may press its buttons is runs.visibility's: a hidden run that is not yours
is a 404, a visible run that is not yours (or a command-line run, which is staff's) a 403.
"""
import uuid

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core import signing
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.core.paginator import Paginator
from django.db import transaction
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST
from redis.exceptions import RedisError

from runs.evaluation.forms import RunStartForm
from runs.evaluation.selectors import (
    run_attempts,
    run_cost_estimate,
    run_get,
    run_list_progress,
    run_progress,
    run_transplant_summary,
    run_waiting_notes,
)
from runs.evaluation.services import RunError, run_cancel, run_create, run_resume, run_retry_failed, runs_set_hidden
from runs.models import Run
from runs.visibility import run_can_manage, run_can_start, run_can_view

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
    return render(request, "runs/queue.html", {
        "runs": progress, "refresh": refresh, "manageable": manageable, "can_start": run_can_start(user=request.user),
    })


# An estimate's "Queue it" carries the options it was made for, signed: it queues exactly those, once,
# within this many seconds. Anything else posted (a changed or forged field) gets a new estimate.
ESTIMATE_SALT = "runs.evaluation.views.run_start"
ESTIMATE_MAX_AGE = 3600


@login_required
def run_start(request):
    """The run form: a first POST checks the options and shows the cost estimate; its "Queue it"
    POSTs them again, checked again, and queues the run as run_eval --no-wait does."""
    if not run_can_start(user=request.user):
        raise PermissionDenied("only staff and users granted runs.start_run may start runs")
    if request.method != "POST":
        return render(request, "runs/start.html", {"form": RunStartForm()})
    form = RunStartForm(request.POST)
    if "edit" in request.POST or not form.is_valid():
        return render(request, "runs/start.html", {"form": form}, status=200 if "edit" in request.POST else 400)
    options = form.canonical()
    if "queue" in request.POST:
        nonce = _estimated_nonce(request.POST.get("estimate", ""), options)
        if nonce is None:
            messages.warning(request, "The options are not those of the estimate: here is the estimate of these. Nothing was queued.")
        elif not cache.add(f"run-start:{nonce}", 1, timeout=ESTIMATE_MAX_AGE):
            messages.info(request, "That estimate was queued already (the button was pressed twice): nothing more was queued.")
            return redirect("runs:queue")
        else:
            return _queue(request, form)
    estimate = run_cost_estimate(
        suite=form.suite, agent=options["agent"], model=options["model"], n_values=options["n"], k=options["k"],
        cap=options["cap"], max_cost=options["max_cost"], needs_model=form.needs_model(), priced=form.model_priced(),
        user=request.user,
    )
    token = signing.dumps({"options": options, "nonce": uuid.uuid4().hex}, salt=ESTIMATE_SALT, compress=True)
    return render(request, "runs/start.html", {"form": form, "estimate": estimate, "token": token, "options": options})


def _estimated_nonce(token: str, options: dict) -> str | None:
    """The nonce of the estimate `token` when it was made, recently, for exactly `options`."""
    try:
        signed = signing.loads(token, salt=ESTIMATE_SALT, max_age=ESTIMATE_MAX_AGE)
    except signing.BadSignature:
        return None
    return signed.get("nonce") if signed.get("options") == options else None


def _queue(request, form: RunStartForm):
    run = None
    try:
        # The run's jobs go to Redis when this commits; `run` is known by then even if Redis is not there.
        with transaction.atomic():
            run = run_create(**form.run_create_kwargs(), created_by=request.user, enqueue=True)
    except RunError as error:
        form.add_error(None, str(error))
        return render(request, "runs/start.html", {"form": form}, status=400)
    except RedisError as error:
        if run is None:
            raise
        messages.error(request, f"Run {run.pk} is stored but its attempts could not be queued: Redis is unreachable ({error}); "
                                "resume the run once it is back.")
        return redirect("runs:queue")
    messages.success(request, f"Run {run.pk} queued: {run.attempts.count()} attempt(s) of {run.agent}"
                              f"{' ' + run.model if run.model else ''} on {run.suite.name}.")
    return redirect("runs:queue")


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
