"""/explore/: the attempts explorer and, with `q`, the search across trajectories. Thin: the
form validates, leaderboard.explorer selects, the template shows."""
from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from autoexperiment_site.abuse import heavy_page
from leaderboard import explorer
from leaderboard.explorer_forms import ExplorerForm
from leaderboard.exports import csv_response
from leaderboard.selectors import filter_choices
from leaderboard.views import query_with

SORT_LABELS = {"id": "Attempt", "n": "n", "steps": "Steps", "cost": "Cost", "seconds": "Time", "ratio": "Tolerance ratio"}


def _cut_note(truncated: bool, what: str) -> str:
    return f"cut: only the first {explorer.EXPORT_LIMIT:,} {what} are included; narrow the filters for the rest" if truncated else ""


def _export(request, form, *, searching: bool):
    filters = form.filters()
    if searching:
        rows, truncated = explorer.export_hits(filters, user=request.user)
        columns, what, name = explorer.HIT_COLUMNS, "hits", "search"
    else:
        rows, truncated = explorer.export_attempts(filters, user=request.user)
        columns, what, name = explorer.EXPORT_COLUMNS, "attempts", "attempts"
    note = _cut_note(truncated, what)
    if form.output == "json":
        return JsonResponse({
            "filters": {key: value for key, value in form.cleaned_data.items() if key not in ("page", "format")},
            "count": len(rows), "truncated": truncated, "note": note, "rows": [row.as_dict() for row in rows],
        }, json_dumps_params={"indent": 1})
    dicts = [row.as_dict() for row in rows]
    if truncated:  # said in the file itself, where a reader of the CSV will see it
        dicts.append({columns[0]: f"# {note}"})
    return csv_response(f"{name}.csv", dicts, columns)


@heavy_page
@require_GET
def explore(request):
    """Attempts across runs and submissions (or, with `q`, the steps whose text matches)."""
    form = ExplorerForm(request.GET, suites=filter_choices()["suites"])
    if not form.is_valid():
        problems = form.problems()
        if request.GET.get("format") in ("json", "csv"):
            return JsonResponse({"errors": problems}, status=400)
        return render(request, "leaderboard/explore.html", {"form": form, "problems": problems}, status=400)
    filters = form.filters()
    searching = bool(filters.q)
    if form.output != "html":
        return _export(request, form, searching=searching)

    page = (explorer.search_steps if searching else explorer.explore_attempts)(filters, user=request.user, page=form.page_number)

    def sort_link(key: str) -> dict:
        active = filters.sort.lstrip("-") == key
        descending = filters.sort.startswith("-")
        target = (key if descending else f"-{key}") if active else f"-{key}"
        return {"label": SORT_LABELS[key], "url": query_with(request, sort=target, page=None), "active": active,
                "descending": descending}

    context = {
        "form": form,
        "filters": filters,
        "searching": searching,
        "result": page,
        "page_size": explorer.PAGE_SIZE,
        "sorts": {key: sort_link(key) for key in explorer.SORT_FIELDS},
        "previous_url": query_with(request, page=str(page.page - 1)) if page.page > 1 else None,
        "next_url": query_with(request, page=str(page.page + 1)) if page.has_next and page.page < explorer.MAX_PAGE else None,
        "first_url": query_with(request, page=None),
        "json_url": query_with(request, format="json", page=None),
        "csv_url": query_with(request, format="csv", page=None),
        "reset_url": "?",
        "export_limit": explorer.EXPORT_LIMIT,
        "max_page": explorer.MAX_PAGE,
        "count_cap": explorer.HIT_COUNT_CAP if searching else explorer.COUNT_CAP,
    }
    return render(request, "leaderboard/explore.html", context, status=404 if page.past_end else 200)
