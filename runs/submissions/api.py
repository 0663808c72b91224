"""The submissions API: token-authenticated JSON, for results uploaded by scripts and CI.

    POST /api/submissions/[?reexecute=1]
    Authorization: Token <key>
    body: the JSONL file or the zip itself (any Content-Type but multipart), or multipart/form-data
          with the file in the field "file" (and optionally reexecute=1)

    201 {"id", "url", "run_id", "status", "verified", "reexecution_requested", "summary": {...}}
    400 {"error", "problem_count", "problems": ["line 3: cost: must not be negative, got -1", ...],
         "details": [{"line", "field", "member", "message", "text"}, ...]}
    401 no or unknown token (WWW-Authenticate: Token); 403 revoked token or inactive account;
    405 other methods; 413 {"error", "limit_bytes"} for a body over the limit.

    GET /api/submissions/<id>/   the same summary as the 201 (hidden ones: uploader and staff only)

CSRF does not apply (no cookies are used: the token is the credential).
"""
from __future__ import annotations

from django.core.exceptions import (
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from runs.models import Submission
from runs.submissions import uploads
from runs.submissions.selectors import (
    submission_can_view,
    submission_get,
    submission_summary,
)
from runs.submissions.services import TokenError, submission_create, token_authenticate
from runs.submissions.validation import (
    SubmissionInvalid,
    SubmissionTooLarge,
    max_upload_bytes,
    too_large_message,
)

TRUE_VALUES = {"1", "true", "yes", "on"}


def _error(status: int, message: str, **extra) -> JsonResponse:
    response = JsonResponse({"error": message, **extra}, status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Token realm="submissions"'
    return response


def _authenticate(request):
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, key = header.partition(" ")
    if header and scheme.lower() not in ("token", "bearer"):
        raise TokenError("unsupported authorization scheme: send 'Authorization: Token <key>'", 401)
    return token_authenticate(key=key if header else "")


def _too_large(size: int | None) -> JsonResponse:
    limit = max_upload_bytes()
    return _error(413, too_large_message(size, limit), limit_bytes=limit)


def _representation(request, submission: Submission) -> dict:
    return {
        "id": submission.pk,
        "url": request.build_absolute_uri(reverse("submissions:detail", args=[submission.pk])),
        "run_id": submission.run_id,
        "suite": submission.run.suite.name,
        "agent": submission.agent,
        "model": submission.model,
        "status": submission.status,
        "status_detail": submission.status_detail,
        "verified": submission.verified,
        "verified_at": submission.verified_at.isoformat() if submission.verified_at else None,
        "reexecution_requested": submission.reexecution_requested_at is not None,
        "hidden": submission.hidden,
        "flagged": submission.flagged,
        "summary": submission_summary(submission=submission).as_dict(),
    }


@csrf_exempt
def submissions(request):
    if request.method != "POST":
        response = _error(405, "POST the results file to this URL")
        response["Allow"] = "POST"
        return response
    try:
        token = _authenticate(request)
    except TokenError as error:
        return _error(error.status, str(error))

    limit = max_upload_bytes()
    reexecute = request.GET.get("reexecute", "").lower() in TRUE_VALUES
    content_type = request.META.get("CONTENT_TYPE", "")
    if content_type.startswith("multipart/form-data"):
        handler = uploads.install(request, limit=limit)
        try:
            files, post = request.FILES, request.POST
        except (MultiPartParserError, RequestDataTooBig, TooManyFieldsSent, TooManyFilesSent) as error:
            return _error(400, f"the multipart body could not be read: {error}")
        if handler.exceeded:
            return _too_large(handler.content_length)
        upload = files.get("file")
        if upload is None:
            return _error(400, "a multipart body needs the results file in a field named 'file'")
        data = uploads.read_uploaded(upload, limit=limit)
        if data is None:
            return _too_large(upload.size)
        filename = upload.name or ""
        reexecute = reexecute or post.get("reexecute", "").lower() in TRUE_VALUES
    else:
        try:
            data = uploads.read_body(request, limit=limit)
        except uploads.BodyTooLarge as error:
            return _too_large(error.size)
        filename = request.headers.get("X-Filename", "")[:255]
    try:
        submission = submission_create(
            data=data, filename=filename, uploader=token.user, reexecute=reexecute, token=token, channel=Submission.API
        )
    except SubmissionTooLarge as error:
        return _too_large(error.size)
    except SubmissionInvalid as error:
        return _error(
            400,
            f"the submission was not stored: {error.count} problem(s) found",
            problem_count=error.count,
            problems=error.messages(),
            details=[problem.as_dict() for problem in error.problems],
        )
    submission.refresh_from_db()
    response = JsonResponse(_representation(request, submission), status=201)
    response["Location"] = reverse("submissions:api_detail", args=[submission.pk])
    return response


@csrf_exempt
def submission_detail(request, pk: int):
    if request.method != "GET":
        response = _error(405, "only GET is allowed here")
        response["Allow"] = "GET"
        return response
    try:
        token = _authenticate(request)
    except TokenError as error:
        return _error(error.status, str(error))
    try:
        submission = submission_get(pk=pk)
    except Submission.DoesNotExist:
        return _error(404, f"no submission {pk}")
    if not submission_can_view(submission=submission, user=token.user):
        return _error(404, f"no submission {pk}")
    return JsonResponse(_representation(request, submission))
