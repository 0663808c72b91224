"""Trajectory replay pages. Public (the leaderboard links here); gold code is hidden from anonymous
viewers by the selector. Thin: runs.replay builds the data, templates escape all of it."""
from functools import wraps

from django.http import Http404, HttpResponseBadRequest
from django.shortcuts import render
from django.views.decorators.http import require_GET

from runs.models import Attempt
from runs.replay import (
    GOLD_CODE_NOTICE,
    ComparisonError,
    attempt_get_for_replay,
    attempt_replay,
    attempt_siblings,
    attempts_compare,
)

# Trajectories are written by models and submissions by uploaders: even if some text escaped the
# templates' autoescaping, the browser would run no inline script, load nothing from elsewhere and
# let no other site frame the page.
_CSP_DIRECTIVES = (
    "default-src 'self'",
    "script-src 'self'",
    "style-src 'self'",
    "img-src 'self' data:",
    "connect-src 'self'",
    "object-src 'none'",
    "base-uri 'none'",
    "form-action 'self'",
    "frame-ancestors 'none'",
)
CONTENT_SECURITY_POLICY = "; ".join(_CSP_DIRECTIVES)


def content_security_policy(view):
    """Send `CONTENT_SECURITY_POLICY` with the view's responses."""

    @wraps(view)
    def wrapped(request, *args, **kwargs):
        response = view(request, *args, **kwargs)
        response.headers["Content-Security-Policy"] = CONTENT_SECURITY_POLICY
        response.headers.setdefault("X-Content-Type-Options", "nosniff")
        response.headers.setdefault("Referrer-Policy", "same-origin")
        return response

    return wrapped


def _attempt_or_404(pk, user) -> Attempt:
    try:
        return attempt_get_for_replay(pk=pk, user=user)
    except Attempt.DoesNotExist:
        raise Http404(f"no attempt {pk}") from None


@require_GET
@content_security_policy
def attempt_detail(request, pk: int):
    attempt = _attempt_or_404(pk, request.user)
    replay = attempt_replay(attempt=attempt, show_gold_code=request.user.is_authenticated)
    return render(request, "replay/attempt.html", {"replay": replay, "siblings": attempt_siblings(attempt=attempt), "notice": GOLD_CODE_NOTICE})


def _bad_request(request, message: str):
    return render(request, "replay/compare_error.html", {"message": message}, status=HttpResponseBadRequest.status_code)


@require_GET
@content_security_policy
def attempt_compare(request):
    ids = []
    for name in ("a", "b"):
        value = request.GET.get(name, "").strip()
        if not value.isdigit():
            return _bad_request(request, "Give two attempt ids to compare, as ?a=<id>&b=<id>.")
        ids.append(int(value))
    left, right = (_attempt_or_404(pk, request.user) for pk in ids)
    try:
        comparison = attempts_compare(left=left, right=right, show_gold_code=request.user.is_authenticated)
    except ComparisonError as error:
        return _bad_request(request, f"These attempts cannot be compared: {error}.")
    return render(request, "replay/compare.html", {"comparison": comparison, "notice": GOLD_CODE_NOTICE})
