"""The submissions API: token-authenticated JSON, for results uploaded by scripts and CI.

Version 1 lives under /api/v1/ (described by /api/v1/openapi.json, autoexperiment_site.openapi);
the unversioned /api/submissions/ paths answer the same and are deprecated: their responses carry
`Deprecation: true` and a `Link` to the v1 path. Bodies are built through runs.submissions.api_models.

    POST /api/v1/submissions/[?reexecute=1][&transplants=0]
    Authorization: Token <key>
    body: the JSONL file or the zip itself (any Content-Type but multipart), or multipart/form-data
          with the file in the field "file" (and optionally reexecute=1, transplants=0: no per-function
          verdicts of failed attempts at n >= 2 after re-execution, runs.evaluation.transplants)

    201 {"id", "url", "run_id", "status", "verified", "reexecution_requested", "summary": {...}}
    400 {"error", "problem_count", "problems": ["line 3: cost: must not be negative, got -1", ...],
         "details": [{"line", "field", "member", "message", "text"}, ...]}; a trajectory or final
         patch over the limits of runs.limits (listed on the upload page and in docs/configuration.md) is named with
         its step and the limit: "line 3: trajectory: step 12: observation is 80.0 KB (81,920 bytes); ..."
    401 no or unknown token (WWW-Authenticate: Token); 403 revoked token or inactive account;
    405 other methods; 411 {"error"} for a body sent chunked (no Content-Length);
    413 {"error", "limit_bytes"} for a body over the limit;
    429 {"error", "retry_after"} (and Retry-After) past a rate limit (docs/abuse-limits.md).
    A 201 asked to re-execute but over the uploader's cap on queued re-executions carries
    "reexecution_refused": why nothing was queued (the submission is stored and scored).

    GET /api/v1/submissions/<id>/   the same summary as the 201 (hidden ones: uploader and staff only)

CSRF does not apply (no cookies are used: the token is the credential).
"""
from __future__ import annotations

from typing import NamedTuple

from django.core.exceptions import (
    RequestDataTooBig,
    TooManyFieldsSent,
    TooManyFilesSent,
)
from django.http import JsonResponse
from django.http.multipartparser import MultiPartParserError
from django.urls import reverse
from django.views.decorators.csrf import csrf_exempt

from autoexperiment_site.abuse import rate_check, rate_count, rate_limit
from runs.models import Submission
from runs.submissions import api_models, uploads
from runs.submissions.problems import SubmissionInvalid, SubmissionTooLarge, too_large_message
from runs.submissions.selectors import submission_get, submission_summary
from runs.submissions.services import TokenError, submission_create, token_authenticate
from runs.submissions.upload_limits import max_upload_bytes
from runs.visibility import submission_can_view

TRUE_VALUES = {"1", "true", "yes", "on"}
FALSE_VALUES = {"0", "false", "no", "off"}


def _error(status: int, message: str, **extra) -> JsonResponse:
    model = api_models.UploadRefused if "problems" in extra else api_models.Error
    response = JsonResponse(api_models.dump(model, {"error": message, **extra}), status=status)
    if status == 401:
        response["WWW-Authenticate"] = 'Token realm="submissions"'
    return response


def _authenticate(request):
    """The request's token. Raises TokenError, or RateLimited (a 429, by RATELIMIT_VIEW) past the
    API's rates: per address for every request and for failed ones, per user for the rest."""
    rate_limit(request, "api-address")
    rate_check(request, "api-bad-token")
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, key = header.partition(" ")
    try:
        if header and scheme.lower() not in ("token", "bearer"):
            raise TokenError("unsupported authorization scheme: send 'Authorization: Token <key>'", 401)
        token = token_authenticate(key=key if header else "")
    except TokenError:
        rate_count(request, "api-bad-token")
        raise
    rate_limit(request, "api-user", key=str(token.user_id))
    return token


def _too_large(size: int | None) -> JsonResponse:
    limit = max_upload_bytes()
    return _error(413, too_large_message(size, limit), limit_bytes=limit)


def _representation(request, submission: Submission) -> dict:
    return api_models.dump(api_models.Submission, {
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
    })


def _versioned(view):
    """`view` under a version's path (`version` is the URL pattern's extra argument: "v1"), or,
    without one, under the deprecated unversioned path, saying so and where its successor is."""

    def wrapped(request, *args, version: str | None = None, **kwargs):
        response = view(request, *args, detail_route=f"submissions:api_{version}_detail" if version else "submissions:api_detail", **kwargs)
        if version is None:
            response["Deprecation"] = "true"
            successor = request.path.replace("/api/", "/api/v1/", 1)
            response["Link"] = f'<{successor}>; rel="successor-version"'
        return response

    wrapped.__name__, wrapped.__doc__ = view.__name__, view.__doc__
    return wrapped


class _Upload(NamedTuple):
    data: bytes
    filename: str
    reexecute: bool
    transplants: str  # as sent: "", or one of TRUE_VALUES, FALSE_VALUES, or wrong


def _upload_read(request) -> _Upload | JsonResponse:
    """The uploaded file and the switches sent with it (the query string's, or the multipart
    form's), or the error response when the body is over the limit or cannot be read."""
    limit = max_upload_bytes()
    reexecute = request.GET.get("reexecute", "").lower() in TRUE_VALUES
    transplants = request.GET.get("transplants", "")
    if not request.META.get("CONTENT_TYPE", "").startswith("multipart/form-data"):
        try:
            data = uploads.read_body(request, limit=limit)
        except uploads.BodyTooLarge as error:
            return _too_large(error.size)
        return _Upload(data, request.headers.get("X-Filename", "")[:255], reexecute, transplants)
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
    reexecute = reexecute or post.get("reexecute", "").lower() in TRUE_VALUES
    return _Upload(data, upload.name or "", reexecute, transplants or post.get("transplants", ""))


@csrf_exempt
@_versioned
def submissions(request, *, detail_route: str):
    if request.method != "POST":
        response = _error(405, "POST the results file to this URL")
        response["Allow"] = "POST"
        return response
    try:
        token = _authenticate(request)
    except TokenError as error:
        return _error(error.status, str(error))
    rate_limit(request, "upload", key=str(token.user_id))

    if problem := uploads.chunked_body_problem(request):
        return _error(uploads.LENGTH_REQUIRED, problem)
    upload = _upload_read(request)
    if isinstance(upload, JsonResponse):
        return upload
    data, filename, reexecute, transplants = upload
    if transplants.lower() not in TRUE_VALUES | FALSE_VALUES | {""}:
        return _error(400, f"transplants must be 1 or 0 (true or false), got {transplants[:50]!r}")
    transplants_off = transplants.lower() in FALSE_VALUES
    if reexecute:
        rate_limit(request, "reexecution", key=str(token.user_id))
    try:
        submission = submission_create(
            data=data, filename=filename, uploader=token.user, reexecute=reexecute, transplants=not transplants_off,
            token=token, channel=Submission.Channel.API
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
    body = _representation(request, submission)
    if reexecute and submission.reexecution_requested_at is None:
        body["reexecution_refused"] = submission.status_detail  # stored and scored all the same
        body = api_models.dump(api_models.Submission, body)
    response = JsonResponse(body, status=201)
    response["Location"] = reverse(detail_route, args=[submission.pk])
    return response


@csrf_exempt
@_versioned
def submission_detail(request, pk: int, *, detail_route: str):
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
