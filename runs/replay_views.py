"""Trajectory replay pages. Public (the leaderboard links here); gold code is hidden from anonymous
viewers by the selector. Thin: runs.replay builds the data, templates escape all of it."""
from django.http import Http404, HttpResponseBadRequest
from django.shortcuts import render
from django.views.decorators.http import require_GET

from autoexperiment_site.security import content_security_policy, csp_header
from runs.models import Attempt
from runs.replay import (
    GOLD_CODE_NOTICE,
    ComparisonError,
    attempt_get_for_replay,
    attempt_replay,
    attempt_siblings,
    attempts_compare,
)

CONTENT_SECURITY_POLICY = csp_header()


def _attempt_or_404(pk, user) -> Attempt:
    try:
        return attempt_get_for_replay(pk=pk, user=user)
    except Attempt.DoesNotExist:
        raise Http404(f"no attempt {pk}") from None


@require_GET
@content_security_policy()
def attempt_detail(request, pk: int):
    attempt = _attempt_or_404(pk, request.user)
    replay = attempt_replay(attempt=attempt, show_gold_code=request.user.is_authenticated)
    return render(request, "replay/attempt.html", {"replay": replay, "siblings": attempt_siblings(attempt=attempt), "notice": GOLD_CODE_NOTICE})


def _bad_request(request, message: str):
    return render(request, "replay/compare_error.html", {"message": message}, status=HttpResponseBadRequest.status_code)


@require_GET
@content_security_policy()
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
