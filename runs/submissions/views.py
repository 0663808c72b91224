"""Submission pages: upload, a submission, my submissions, API tokens. Thin: services act, selectors read."""
from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.core.exceptions import (
    PermissionDenied,
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.core.paginator import Paginator
from django.http import Http404
from django.http.multipartparser import MultiPartParserError
from django.shortcuts import get_object_or_404, redirect, render
from django.utils.text import capfirst
from django.views.decorators.csrf import csrf_exempt, csrf_protect
from django.views.decorators.http import require_POST

from autoexperiment_site.abuse import rate_limit
from runs.agents import foreign
from runs.evaluation.services import runs_set_hidden
from runs.limits import human_bytes, iter_limits
from runs.models import ApiToken, Submission
from runs.submissions import uploads
from runs.submissions.forms import TokenCreateForm, UploadForm
from runs.submissions.problems import SubmissionInvalid, SubmissionTooLarge, too_large_message
from runs.submissions.schema import (
    FORMAT,
    HEADER_EXAMPLE,
    RECORD_EXAMPLE,
    AttemptRecord,
    SubmissionHeader,
    example_json,
    format_fields,
)
from runs.submissions.selectors import (
    submission_attempts,
    submission_get,
    submission_summary,
    submissions_of,
)
from runs.submissions.services import (
    ReexecutionRefused,
    submission_create,
    submission_request_reexecution,
    token_create,
    token_revoke,
)
from runs.submissions.upload_limits import max_patch_bytes, max_records, max_uncompressed_bytes, max_upload_bytes
from runs.visibility import submission_can_manage, submission_can_view

NEW_TOKEN_SESSION_KEY = "submissions_new_api_token"

# The upload page's format section, from the models every uploaded line is validated with.
FORMAT_PAGE = {
    "header": format_fields(SubmissionHeader),
    "record": format_fields(AttemptRecord),
    "header_example": example_json(HEADER_EXAMPLE),
    "record_example": example_json(RECORD_EXAMPLE),
    "foreign": foreign.FORMATS,  # trajectories of other tools, converted on upload
}


def _limits() -> dict:
    return {
        "upload": human_bytes(max_upload_bytes()),
        "uncompressed": human_bytes(max_uncompressed_bytes()),
        "patch": human_bytes(max_patch_bytes()),
        "records": max_records(),
        "format": FORMAT,
        "trajectory": list(iter_limits()),  # (setting, value, what it bounds)
    }


# The upload handler must be in place before CsrfViewMiddleware reads request.POST: exempt the
# outer view from the middleware, then check CSRF ourselves once the handler is installed.
@csrf_exempt
@login_required
def upload(request):
    if request.method == "POST" and (problem := uploads.chunked_body_problem(request)):
        return render(request, "submissions/upload.html", {"form": UploadForm(), "problems": [problem], "limits": _limits(), "format": FORMAT_PAGE},
                      status=uploads.LENGTH_REQUIRED)
    handler = uploads.install(request, limit=max_upload_bytes()) if request.method == "POST" else None
    return _upload(request, handler)


@csrf_protect
def _upload(request, handler):
    problems: list[str] = []
    status = 200
    if request.method == "POST":
        rate_limit(request, "upload")  # after the CSRF check: a forged post cannot use up someone's uploads
        try:
            form = UploadForm(request.POST, request.FILES)
            too_large = handler is not None and handler.exceeded
        except (MultiPartParserError, RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent) as error:
            form, too_large = UploadForm(), False
            problems = [f"The upload could not be read: {error}. Nothing was stored."]
            status = 400
        if too_large:
            form = UploadForm(initial={"reexecute": request.POST.get("reexecute") == "on"})
            problems = [too_large_message(handler.content_length, max_upload_bytes())]
            status = 413
        elif not problems and form.is_valid():
            upload_file = form.cleaned_data["file"]
            data = uploads.read_uploaded(upload_file, limit=max_upload_bytes())
            if form.cleaned_data["reexecute"]:
                rate_limit(request, "reexecution")
            try:
                if data is None:
                    raise SubmissionTooLarge(upload_file.size, max_upload_bytes())
                submission = submission_create(
                    data=data,
                    filename=upload_file.name or "",
                    uploader=request.user,
                    reexecute=form.cleaned_data["reexecute"],
                    transplants=not form.cleaned_data["no_transplants"],
                    channel=Submission.Channel.WEB,
                )
            except SubmissionTooLarge as error:
                problems, status = [str(error)], 413
            except SubmissionInvalid as error:
                problems, status = error.messages(), 400
                problems.insert(0, f"The file was not stored: {error.count} problem(s) found.")
            else:
                submission.refresh_from_db()
                refused = form.cleaned_data["reexecute"] and submission.reexecution_requested_at is None
                messages.success(
                    request,
                    f"Submission {submission.pk} stored: {submission.record_count} attempt(s) scored against the gold results."
                    + (" Re-execution is queued." if form.cleaned_data["reexecute"] and not refused else ""),
                )
                if refused:
                    messages.error(request, f"{capfirst(submission.status_detail)}.")
                return redirect("submissions:detail", pk=submission.pk)
        elif not problems:
            problems = [f"{form.fields[name].label if name in form.fields else 'form'}: {message}"
                        for name, errors in form.errors.items() for message in errors]
            status = 400
    else:
        form = UploadForm()
    return render(request, "submissions/upload.html", {"form": form, "problems": problems, "limits": _limits(), "format": FORMAT_PAGE}, status=status)


def _viewable(request, pk: int) -> Submission:
    try:
        submission = submission_get(pk=pk)
    except Submission.DoesNotExist:
        raise Http404(f"no submission {pk}") from None
    if not submission_can_view(submission=submission, user=request.user):
        raise Http404(f"no submission {pk}")
    return submission


def _manageable(request, pk: int) -> Submission:
    """The submission if the user may act on it: hidden and not theirs 404, visible and not theirs 403."""
    submission = _viewable(request, pk)
    if not submission_can_manage(submission=submission, user=request.user):
        raise PermissionDenied(f"only the uploader of submission {pk} and staff may do this")
    return submission


# A submission may hold 10,000 attempts: its page lists them this many at a time.
ATTEMPTS_PER_PAGE = 100


def detail(request, pk: int):
    submission = _viewable(request, pk)
    return render(
        request,
        "submissions/detail.html",
        {
            "submission": submission,
            "run": submission.run,
            "summary": submission_summary(submission=submission),
            "attempts": Paginator(submission_attempts(submission=submission), ATTEMPTS_PER_PAGE).get_page(request.GET.get("page")),
            "manage": submission_can_manage(submission=submission, user=request.user),
        },
    )


@login_required
@require_POST
def reexecute(request, pk: int):
    submission = _manageable(request, pk)
    rate_limit(request, "reexecution")
    try:
        queued = submission_request_reexecution(submission=submission, requested_by=request.user)
    except ReexecutionRefused as refused:
        messages.error(request, f"Re-execution was not queued: {refused}.")
        return redirect("submissions:detail", pk=submission.pk)
    if queued:
        messages.success(request, f"Re-execution queued for {queued} attempt(s).")
    else:
        messages.info(request, "Every attempt is re-executed already.")
    return redirect("submissions:detail", pk=submission.pk)


@login_required
@require_POST
def set_hidden(request, pk: int, hidden: bool):
    submission = _manageable(request, pk)
    runs_set_hidden(runs=[submission.run], hidden=hidden)
    if hidden:
        messages.success(request, f"Submission {pk} is hidden: only its uploader and staff see it; the leaderboard leaves it out.")
    else:
        messages.success(request, f"Submission {pk} is public again.")
    return redirect("submissions:detail", pk=submission.pk)


# An uploader may add 30 submissions an hour: their list shows this many at a time.
SUBMISSIONS_PER_PAGE = 50


@login_required
def mine(request):
    page = Paginator(submissions_of(user=request.user), SUBMISSIONS_PER_PAGE).get_page(request.GET.get("page"))
    submissions = [(submission, submission_summary(submission=submission)) for submission in page.object_list]
    return render(request, "submissions/mine.html", {"submissions": submissions, "page": page})


@login_required
def tokens(request):
    if request.method == "POST":
        form = TokenCreateForm(request.POST)
        if form.is_valid():
            try:
                token, key = token_create(user=request.user, name=form.cleaned_data["name"])
            except ValueError as error:
                form.add_error(None, str(error))
            else:
                # Shown once, on the next page load; a reload does not create another token.
                request.session[NEW_TOKEN_SESSION_KEY] = {"id": token.pk, "key": key}
                return redirect("submissions:tokens")
    else:
        form = TokenCreateForm()
    new_token = request.session.pop(NEW_TOKEN_SESSION_KEY, None) if request.method == "GET" else None
    return render(
        request,
        "submissions/tokens.html",
        {
            "form": form,
            "tokens": ApiToken.objects.filter(user=request.user).order_by("revoked_at", "-created_at"),
            "new_token": new_token,
        },
        status=200 if form.is_bound is False or form.is_valid() else 400,
    )


@login_required
@require_POST
def token_revoke_view(request, pk: int):
    token = get_object_or_404(ApiToken, pk=pk, user=request.user)  # someone else's token: 404
    token_revoke(token=token)
    messages.success(request, f"Token {token.prefix}… revoked; requests with it are refused from now on.")
    return redirect("submissions:tokens")
