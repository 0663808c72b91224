"""Trajectory replay pages. Public (the leaderboard links here); of the replayed run's suite's gold,
each view shows only what runs.visibility.gold_access allows the viewer (`_gold_access`, at every
view; runs.replay.presenters applies it). Thin: runs.replay.presenters and runs.replay.functions build the data, templates escape all of it.

Steps come a page at a time (`?page=N`, runs.limits.replay_bounds), so one request's work is
bounded whatever was uploaded; the page renders the bodies of its first screen of steps and lists
the others a line each, and its script fetches their bodies (`attempt_steps`, an escaped HTML
fragment) and asks which steps hold a search (`attempt_search`, JSON step numbers); the whole final patch is a plain-text download, and the original file
of a trajectory converted from another tool's an attachment."""
import re

from django.http import Http404, HttpResponse, HttpResponseBadRequest, JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from runs.limits import replay_bounds
from runs.models import Attempt
from runs.replay.comparison import ComparisonError, attempts_compare
from runs.replay.functions import attempt_function_verdicts, attempt_implementations
from runs.replay.presenters import (
    GOLD_CODE_NOTICE,
    SEARCH_QUERY_CHARS,
    ReplayPageError,
    attempt_replay,
    attempt_step_bodies,
    attempt_step_search,
)
from runs.replay.selectors import (
    attempt_get_for_replay,
    attempt_live_state,
    attempt_patch_download,
    attempt_siblings,
    attempt_source_download,
    attempt_trajectory_source,
)
from runs.visibility import GoldAccess, gold_access, run_can_manage


class _BadPage(ValueError):
    pass


# ASCII digits, not too many: str.isdigit() also takes "²", which int() refuses, and int() refuses
# more than 4,300 digits (sys.get_int_max_str_digits).
_WHOLE_NUMBER = re.compile(r"[0-9]{1,18}")


def _whole_number(value: str) -> int | None:
    return int(value) if _WHOLE_NUMBER.fullmatch(value) else None


def _page(request) -> int:
    value = request.GET.get("page", "1").strip()
    number = _whole_number(value)
    if number is None or number < 1:
        raise _BadPage(f"The page of steps must be a whole number from 1 up (?page=1), got {value[:40]!r}.")
    return number


def _page_error(request, message: str, status: int, first_page: str = "?page=1"):
    return render(request, "replay/page_error.html", {"message": message, "first_page": first_page}, status=status)


def _gold_access(request, attempt: Attempt) -> GoldAccess:
    # The suite comes with the attempt (attempt_get_for_replay): no query.
    return gold_access(user=request.user, suite=attempt.run.suite)


def _source_allowed(request, attempt: Attempt, access: GoldAccess) -> bool:
    # The file is the uploader's as uploaded: it may quote gold that the page withholds, so on a
    # private suite it goes back to its uploader (who has it) and to staff alone.
    return (access.code and access.numbers) or run_can_manage(run=attempt.run, user=request.user)


def _attempt_or_404(pk, user) -> Attempt:
    try:
        return attempt_get_for_replay(pk=pk, user=user)
    except Attempt.DoesNotExist:
        raise Http404(f"no attempt {pk}") from None


@require_GET
def attempt_detail(request, pk: int):
    attempt = _attempt_or_404(pk, request.user)
    access = _gold_access(request, attempt)
    try:
        replay = attempt_replay(attempt=attempt, access=access, page=_page(request))
    except _BadPage as error:
        return _page_error(request, str(error), HttpResponseBadRequest.status_code)
    except ReplayPageError as error:
        return _page_error(request, f"Attempt {pk}: {error}.", 404)
    return render(request, "replay/attempt.html", {
        "replay": replay, "siblings": attempt_siblings(attempt=attempt, user=request.user), "notice": GOLD_CODE_NOTICE,
        "source": attempt_trajectory_source(attempt=attempt) if _source_allowed(request, attempt, access) else None,
        "verdicts": attempt_function_verdicts(attempt=attempt, access=access),
        # The gold bodies themselves: by the same rule as the gold agents' diffs above.
        "implementations": attempt_implementations(attempt=attempt) if access.code else None,
    })


def _plain_bad_request(message: str) -> HttpResponse:
    # The page's script reads these; a person opening the URL reads them too.
    return HttpResponseBadRequest(message, content_type="text/plain; charset=utf-8")


def _step_range(request) -> tuple[int, int]:
    """?first=N&last=M: at most a page of steps (REPLAY_STEPS_PER_PAGE). Raises _BadPage."""
    numbers = []
    for name in ("first", "last"):
        value = request.GET.get(name, "").strip()
        number = _whole_number(value)
        if number is None or number < 1:
            raise _BadPage(f"{name} must be a step number from 1 up (?first=1&last=20), got {value[:40]!r}.")
        numbers.append(number)
    first, last = numbers
    most = replay_bounds().steps_per_page
    if not first <= last < first + most:
        raise _BadPage(f"last must be from first to first + {most - 1}: at most {most} steps a request.")
    return first, last


@require_GET
def attempt_steps(request, pk: int):
    """The bodies of steps ?first=N&last=M of an attempt as an HTML fragment, for the attempt page's
    script to insert as they come into view: the page's templates, escaping and gold-code rule, at
    most REPLAY_STEPS_PER_PAGE steps a request."""
    attempt = _attempt_or_404(pk, request.user)
    try:
        first, last = _step_range(request)
    except _BadPage as error:
        return _plain_bad_request(str(error))
    steps, problem = attempt_step_bodies(attempt=attempt, access=_gold_access(request, attempt), first=first, last=last)
    return render(request, "replay/steps_fragment.html", {"steps": steps, "problem": problem, "notice": GOLD_CODE_NOTICE})


@require_GET
def attempt_live(request, pk: int):
    """Where a running attempt stands, as JSON (status, whether it may still record steps, how many
    its stored trajectory holds, which try), for its page's script to fetch the new steps' bodies
    from `attempt_steps`. The page polls it every few seconds: one small query, never cached."""
    attempt = _attempt_or_404(pk, request.user)
    state = attempt_live_state(attempt=attempt)
    response = JsonResponse({"status": state.status, "live": state.live, "steps": state.steps, "tries": state.tries})
    response["Cache-Control"] = "no-store"
    return response


@require_GET
def attempt_search(request, pk: int):
    """The numbers of the attempt's steps whose text holds ?q= (case-insensitive), as JSON: the
    page searches the steps it has loaded itself and asks here for the others, those of its own
    it has not loaded given as ?first=N&last=M (searched exactly; the rest through the index)."""
    attempt = _attempt_or_404(pk, request.user)
    query = request.GET.get("q", "").replace("\x00", "").strip()
    if not query or len(query) > SEARCH_QUERY_CHARS:
        return _plain_bad_request(f"q must be the text to look for, 1 to {SEARCH_QUERY_CHARS} characters.")
    first = last = None
    if "first" in request.GET or "last" in request.GET:
        try:
            first, last = _step_range(request)
        except _BadPage as error:
            return _plain_bad_request(str(error))
    found = attempt_step_search(attempt=attempt, query=query, access=_gold_access(request, attempt), first=first, last=last)
    return JsonResponse({"steps": found.steps, "indexed": found.indexed, "truncated": found.truncated})


def _bad_request(request, message: str):
    return render(request, "replay/compare_error.html", {"message": message}, status=HttpResponseBadRequest.status_code)


@require_GET
def attempt_compare(request):
    ids = []
    for name in ("a", "b"):
        number = _whole_number(request.GET.get(name, "").strip())
        if number is None:
            return _bad_request(request, "Give two attempt ids to compare, as ?a=<id>&b=<id>.")
        ids.append(number)
    left, right = (_attempt_or_404(pk, request.user) for pk in ids)
    try:
        # Attempts at one sample are of one suite; should their runs' suites ever differ, both must allow it.
        first, second = _gold_access(request, left), _gold_access(request, right)
        access = GoldAccess(code=first.code and second.code, numbers=first.numbers and second.numbers,
                            staff=first.staff and second.staff)
        comparison = attempts_compare(left=left, right=right, access=access, page=_page(request))
    except ComparisonError as error:
        return _bad_request(request, f"These attempts cannot be compared: {error}.")
    except (_BadPage, ReplayPageError) as error:
        status = 404 if isinstance(error, ReplayPageError) else HttpResponseBadRequest.status_code
        message = f"Attempts {left.pk} and {right.pk}: {error}." if status == 404 else str(error)
        return _page_error(request, message, status, first_page=f"?a={left.pk}&b={right.pk}&page=1")
    return render(request, "replay/compare.html", {"comparison": comparison, "notice": GOLD_CODE_NOTICE})


@require_GET
def attempt_patch(request, pk: int):
    """The whole final patch as plain text (the page shows its head)."""
    attempt = _attempt_or_404(pk, request.user)
    patch = attempt_patch_download(attempt=attempt, access=_gold_access(request, attempt))
    if patch is None:
        return HttpResponse(GOLD_CODE_NOTICE, status=403, content_type="text/plain; charset=utf-8")
    response = HttpResponse(patch, content_type="text/plain; charset=utf-8")
    response["Content-Disposition"] = f'inline; filename="attempt-{attempt.pk}.patch"'
    return response


# Anything else in an uploader's file name (quotes, slashes, newlines, non-ASCII) becomes "_", so
# the header cannot be broken nor the file land outside the download folder.
_UNSAFE_FILENAME = re.compile(r"[^A-Za-z0-9._-]+")


@require_GET
def attempt_source(request, pk: int):
    """The file another tool wrote, as uploaded, that the attempt's trajectory was converted from:
    an attachment, never rendered, visible as the replay page is; on a suite whose gold the viewer
    may not see, to its uploader and staff only (it is not redacted)."""
    attempt = _attempt_or_404(pk, request.user)
    if not _source_allowed(request, attempt, _gold_access(request, attempt)):
        return HttpResponse(f"{GOLD_CODE_NOTICE} The original trajectory file of an attempt at this suite may quote it: "
                            "it is given to its uploader and staff only.", status=403, content_type="text/plain; charset=utf-8")
    source = attempt_source_download(attempt=attempt)
    if source is None:
        raise Http404(f"attempt {pk} has no original trajectory file")
    filename = _UNSAFE_FILENAME.sub("_", source.filename).strip("._") or "trajectory"
    response = HttpResponse(bytes(source.content), content_type="application/octet-stream")
    response["Content-Disposition"] = f'attachment; filename="attempt-{attempt.pk}-{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    return response
