"""Public leaderboard pages and their JSON / CSV exports. Thin: selectors compute, templates show."""
import json

from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET
from pydantic import BaseModel

from autoexperiment_site.abuse import heavy_page
from leaderboard import api_models
from leaderboard import reference as paper
from leaderboard.exports import csv_response, csv_streaming_response
from leaderboard.failure_analysis import error_taxonomy, failure_analysis
from leaderboard.failure_figures import failure_figure_payload
from leaderboard.figures import (
    SHOWN_SYSTEMS,
    cost_figure_payload,
    curve_figure_payload,
    figure_payload,
    tolerance_figure_payload,
)
from leaderboard.forms import LeaderboardFilterForm
from leaderboard.metrics import DIAGNOSIS_GROUPS
from leaderboard.paging import BadPage, page_get
from leaderboard.rules import NEAR_MISS_FACTOR, TOLERANCES, tolerance_label
from leaderboard.selectors import (
    FLAT_COLUMNS,
    LEADERBOARD_PER_PAGE,
    filter_choices,
    function_difficulty,
    leaderboard_flat_rows,
    leaderboard_get,
    leaderboard_page,
    system_detail,
    system_sample_rows,
    system_samples_page,
)
from leaderboard.table import leaderboard_rows_html, table_n_values
from runs.models import Attempt
from runs.suites.selectors import suites_gold_stability

FORMATS = ("html", "json", "csv")
ASCENDING_FIRST = {"name", "cost", "seconds", "errors"}

RULES = [
    "A system is suite + agent + model + agent configuration + context condition; its runs are pooled.",
    (
        "Only attempts with status done count; errors (sandbox, worker or model provider failures) never count "
        "for or against a model and are shown separately."
    ),
    (
        "Only attempts the harness re-executed count (a run's and an upload's alike): one passes only if the reported "
        "answer and the re-run both pass. An upload that is never re-executed is not on the leaderboard unless you "
        "ask for it (“include unverified uploads”, ?unverified=1): its attempts are then judged by their reported "
        "numbers, not re-executed, and its system is marked unverified."
    ),
    (
        "Pass@1 is the mean over samples of c/m (c of m attempts passed), with a 95% percentile bootstrap "
        "interval over samples (10,000 resamples, seed 0)."
    ),
    (
        "Pass@k uses the unbiased estimator per sample (k: the largest attempts per sample among the system's "
        "runs), averaged over samples with at least k counted attempts."
    ),
    (
        "Verifier-selected Pass@1 is the share of samples whose attempt chosen by the verifier passes; "
        "the oracle verifier is the upper bound."
    ),
    (
        "Cost and time are means per counted attempt; attempts whose cost is unknown are left out of the mean "
        "and counted."
    ),
    (
        "Cost against accuracy: at each n, a system is on the Pareto frontier when no other system shown is at most "
        "as costly per attempt and at least as accurate (Pass@1), one of them strictly. A system with any counted "
        "attempt of unknown cost at that n is not placed (a missing cost is not zero) and is never on the frontier."
    ),
    (
        "Pass@1 at another relative tolerance t (“Pass@1 also at”, and each system's page) scales every number's tolerance, "
        "relative and absolute, by t / 5%: an experiment with its own or a widened tolerance scales in proportion. "
        "It is computed from the stored scores, without re-running anything; at 5% it is Pass@1."
    ),
    (
        "n50 summarises how the pass rate falls as n grows: a logistic curve in n (pass rate = 1 / (1 + e^-(a + b·n))) "
        "is fitted by maximum likelihood over every n the system has, each sample weighing the same (its c/m, as in "
        "Pass@1), under the counting rule shown; n50 = -a/b is where it crosses 50% and b its slope (log-odds per "
        "masked function; about b/4 of pass rate per function at n50). Intervals: 95% cluster bootstrap over samples "
        "within each n (400 resamples, seed 0); an open bound reaches beyond what the n measured can say. Not "
        "determined with fewer than two n, when every sample passed or none did, when the rate jumps from 100% to 0%, "
        "when the curve does not fall, or when it crosses 50% further than the measured range of n again beyond "
        "either end (shown as beyond that n). Undetermined n50 sorts last either way."
    ),
]


def _form(request):
    choices = filter_choices()
    form = LeaderboardFilterForm(request.GET, suites=choices["suites"], agents=choices["agents"])
    form.is_valid()
    return form


def _format(request):
    value = request.GET.get("format", "html") or "html"
    return value if value in FORMATS else None


def _bad_format(request):
    return JsonResponse(
        {"error": f"format={request.GET.get('format')!r} is not one of: {', '.join(FORMATS)}"}, status=400
    )


def query_with(request, **changes) -> str:
    """The current query string with `changes` applied (None removes a parameter): links that keep the filters."""
    query = request.GET.copy()
    for key, value in changes.items():
        if value is None:
            query.pop(key, None)
        else:
            query[key] = value
    encoded = query.urlencode()
    return f"?{encoded}" if encoded else "?"


def _page_urls(request, page, parameter: str) -> dict:
    """The previous and next pages' query strings (None at an end), keeping every other parameter."""
    return {
        "previous": query_with(request, **{parameter: page.previous_page_number()}) if page.has_previous() else None,
        "next": query_with(request, **{parameter: page.next_page_number()}) if page.has_next() else None,
    }


def _page_payload(request, page, urls: dict) -> dict:
    """A page of a list as the JSON exports describe it: where it is, and the URLs of its neighbours."""
    return {"number": page.number, "pages": page.paginator.num_pages, "count": page.paginator.count,
            "per_page": page.paginator.per_page, **{key: request.path + url if url else None for key, url in urls.items()}}


def _json(payload: dict, *, model: type[BaseModel], status: int = 200) -> HttpResponse:
    """`payload` as JSON, checked against its leaderboard.api_models model (a key the model does not
    describe fails the page, so the OpenAPI description cannot drift from it), compact."""
    return HttpResponse(api_models.page_json(model, payload), status=status, content_type="application/json")


def _csv(filename: str, rows: list[dict], columns: list[str]) -> HttpResponse:
    return csv_response(filename, rows, columns)  # every cell neutralised for spreadsheets


def _parse_request(request):
    """(output format, filter form, filters, status) of a table request; None for an unknown format.

    Bad filters still give a page (status 400) that says which parameter was wrong.
    """
    output = _format(request)
    if output is None:
        return None
    form = _form(request)
    return output, form, form.filters(), 400 if form.errors else 200


COUNTING = {
    True: "re-executed attempts only",
    False: "unverified included: uploads' reported numbers, not re-executed, count too (rows with verified false)",
}


def _filters_payload(form, filters) -> dict:
    return {
        "suite": filters.suite, "agent": filters.agent, "context": filters.context,
        "verified_only": filters.verified_only, "unverified": not filters.verified_only, "n_min": filters.n_min,
        "n_max": filters.n_max, "tolerance": filters.tolerance, "counting": COUNTING[filters.verified_only],
        "errors": form.problems(),
    }


def _counting_urls(request) -> dict:
    """The same view counting re-executed attempts only, and with unverified uploads included."""
    return {"verified_url": query_with(request, unverified=None), "unverified_url": query_with(request, unverified="1")}


@require_GET
def home(request):
    """The leaderboard: one row per system, columns by n, the paper's numbers apart."""
    if (parsed := _parse_request(request)) is None:
        return _bad_format(request)
    output, form, filters, status = parsed
    board = leaderboard_get(filters=filters)
    reference = paper.reference_rows(agent=filters.agent, n_min=filters.n_min, n_max=filters.n_max)
    if output == "csv":  # every system
        return _csv("leaderboard.csv", leaderboard_flat_rows(board, reference), list(FLAT_COLUMNS))
    try:
        page = page_get(board.rows, number=request.GET.get("page"), per_page=LEADERBOARD_PER_PAGE, parameter="page",
                        what="systems")
        problem = None
    except BadPage as error:
        if output == "json":
            return JsonResponse({"error": str(error)}, status=400)
        problem = str(error)  # the first page, with the message
        page = page_get(board.rows, number=None, per_page=LEADERBOARD_PER_PAGE, parameter="page", what="systems")
    # The board as this page shows it: its rows, and the charts placing them (the frontier is every system's).
    shown = leaderboard_page(board, list(page.object_list))
    page_urls = _page_urls(request, page, "page")
    if output == "json":
        return _json(_home_payload(request, form=form, filters=filters, board=board, shown=shown, reference=reference,
                                   page=page, page_urls=page_urls), model=api_models.Leaderboard, status=status)
    context = {
        "form": form,
        "problems": form.problems() + ([problem] if problem else []),
        "board": shown,
        "page": page,
        "page_urls": page_urls,
        "figure": figure_payload(shown, reference) if shown.rows or reference else None,
        "cost_figure": cost_figure_payload(shown) if shown.rows else None,
        **_home_table(request, board=board, shown=shown, reference=reference, tolerance=filters.tolerance),
        **_home_links(request),
        "gold_stability": suites_gold_stability(names={row.suite for row in board.rows}),
    }
    return render(request, "leaderboard/home.html", context, status=400 if problem else status)


def _home_payload(request, *, form, filters, board, shown, reference, page, page_urls) -> dict:
    """The leaderboard's JSON: this page's systems, then the paper's reference rows."""
    return {
        "filters": {**_filters_payload(form, filters), "sort": board.sort},
        "rules": RULES,
        "n_values": board.n_values,
        "computing": board.computing,  # systems with new results not computed yet (not in rows)
        "cost_accuracy": [chart.as_dict() for chart in shown.cost_accuracy],  # the Pareto frontier by n
        "rows": [row.as_dict() for row in shown.rows]
        + [ref.as_dict() for ref in reference],
        "page": _page_payload(request, page, page_urls),
        "reference_findings": [{**finding, "reference": True} for finding in paper.FINDINGS],
        "gold_stability": [
            {"suite": item.name, "experiments": item.experiments, "unstable": item.unstable, "policy": item.policy,
             "held_out_checked": item.held_out_checked}
            for item in suites_gold_stability(names={row.suite for row in board.rows})
        ],
    }


def _sort_link(request, board, key: str) -> dict:
    """The link that sorts the leaderboard by `key`. A first click puts the best first (highest
    rate, lowest cost, newest, A to Z); a second reverses."""
    active = board.sort.lstrip("-") == key
    first = key if key in ASCENDING_FIRST else f"-{key}"
    target = (key if board.sort.startswith("-") else f"-{key}") if active else first
    return {"url": query_with(request, sort=target), "active": active, "descending": board.sort.startswith("-")}


def _home_table(request, *, board, shown, reference, tolerance: float | None) -> dict:
    """The leaderboard table's parts: its columns by n with their sort links, its rows, and the
    paper's reference rows under them."""
    display_n = table_n_values(board, reference)
    columns_by_n = [
        {
            "n": n,
            "pass1": _sort_link(request, board, f"pass1_n{n}"),
            "passk": _sort_link(request, board, f"passk_n{n}"),
            "verifier": _sort_link(request, board, f"verifier_n{n}"),
            "samples": _sort_link(request, board, f"samples_n{n}"),
            "pass1_tol": _sort_link(request, board, f"pass1_tol_n{n}") if tolerance is not None else None,
        }
        for n in display_n
    ]
    per_n_columns = 4 if tolerance is None else 5
    reference_table = [
        {
            "row": ref,
            "cells": [
                {
                    "pass1": ref.pass1[n] / 100 if n in ref.pass1 else None,
                    "passk": (ref.passk[n][0], ref.passk[n][1] / 100) if n in ref.passk else None,
                }
                for n in display_n
            ],
        }
        for ref in reference
    ]
    return {
        "rows_html": leaderboard_rows_html(shown, display_n),
        "columns_by_n": columns_by_n,
        "totals": {key: _sort_link(request, board, key) for key in ("name", "cost", "seconds", "attempts", "errors", "date", "n50")},
        "reference": reference_table,
        "show_tolerance": True,
        "tolerance_label": tolerance_label(tolerance) if tolerance is not None else None,
        "per_n_columns": per_n_columns,
        "column_count": 1 + per_n_columns * len(display_n) + 7,
    }


def _home_links(request) -> dict:
    """The paper's findings and source, the rules, and the links to this board as JSON and CSV and to related pages."""
    return {
        "findings": paper.FINDINGS,
        "source": paper.SOURCE,
        "source_url": paper.SOURCE_URL,
        "rules": RULES,
        "shown_systems": SHOWN_SYSTEMS,
        "json_url": query_with(request, format="json"),
        "csv_url": query_with(request, format="csv"),
        "functions_url": reverse("leaderboard:functions") + query_with(request, sort=None, format=None),
        **_counting_urls(request),
    }


FUNCTION_COLUMNS = [
    "suite", "paper", "func_id", "file", "name", "attempts", "right", "wrong", "undecided", "right_rate",
    "passes", "pass_rate", "attempts_n1", "passes_n1", "pass_rate_n1", "systems",
]


@heavy_page
@require_GET
def functions(request):
    """How often each masked function is implemented correctly, across systems."""
    if (parsed := _parse_request(request)) is None:
        return _bad_format(request)
    output, form, filters, status = parsed
    rows = function_difficulty(filters=filters)
    if output == "json":
        return _json({"filters": _filters_payload(form, filters), "rows": [row.as_dict() for row in rows]},
                     model=api_models.FunctionDifficulty, status=status)
    if output == "csv":
        return _csv("function-difficulty.csv", [row.as_dict() for row in rows], FUNCTION_COLUMNS)
    return render(request, "leaderboard/functions.html", {
        "form": form,
        "problems": form.problems(),
        "rows": rows,
        "json_url": query_with(request, format="json"),
        "csv_url": query_with(request, format="csv"),
        "leaderboard_url": reverse("leaderboard:home") + query_with(request, format=None),
    }, status=status)


ATTEMPT_STATUSES = Attempt.Status.values
RUN_COLUMNS = ["run", "created_at", "finished_at", "n_values", "k", *ATTEMPT_STATUSES, "verified"]
BY_N_COLUMNS = [
    "n", "samples", "attempts", "errors", "pass1", "pass1_ci_low", "pass1_ci_high", "k", "passk", "passk_samples",
    "verifier_pass1", "verifier_samples", "cost_mean", "cost_unknown", "seconds_mean",
]
# What broke the failed attempts at n >= 2 (blank at n = 1): their count, then each group's count.
DIAGNOSIS_COLUMNS = ["failed_attempts", *(f"diagnosis_{key}" for key, _, _ in DIAGNOSIS_GROUPS)]
SAMPLE_COLUMNS = ["sample_id", "paper", "n", "attempts", "passes", "errors", "attempt_ids", "passed_attempt_ids", "verifier_choices"]


@heavy_page
@require_GET
def system(request, slug: str):
    """One system: its numbers by n, its newest runs, and its samples a page at a time, each
    summarised with a link to its attempts in the explorer (the CSV exports hold everything)."""
    if (parsed := _parse_request(request)) is None:
        return _bad_format(request)
    output, form, filters, status = parsed
    detail = system_detail(slug=slug, filters=filters)
    if detail is None:
        raise Http404(f"no system {slug}")
    if output == "csv":
        return _system_csv(request, slug, detail, filters)
    problem = None
    try:
        samples_page = system_samples_page(detail=detail, filters=filters, number=request.GET.get("samples_page"))
    except BadPage as error:
        if output == "json":
            return JsonResponse({"error": str(error)}, status=400)
        problem = str(error)  # the first page, with the message
        samples_page = system_samples_page(detail=detail, filters=filters, number=None)
    page_urls = _page_urls(request, samples_page, "samples_page")
    analysis = failure_analysis(slug=slug, standing_pk=detail.standing_pk, filters=filters)
    taxonomy = error_taxonomy(slug=slug, standing_pk=detail.standing_pk, run_ids=detail.run_ids, filters=filters)
    csv_urls = {table: query_with(request, format="csv", table=table, samples_page=None) for table in ("samples", "runs", "by_n")}
    if output == "json":
        return _json(_system_payload(request, slug=slug, form=form, filters=filters, detail=detail,
                                     samples_page=samples_page, page_urls=page_urls, analysis=analysis, taxonomy=taxonomy,
                                     csv_urls=csv_urls), model=api_models.SystemPage, status=status)
    tolerance_rows = detail.tolerance_rows
    problems = form.problems() + ([problem] if problem else [])
    return render(request, "leaderboard/system.html", {
        "samples_page": samples_page,
        "samples_page_urls": page_urls,
        "analysis": analysis,
        "failure_figure": failure_figure_payload(analysis),
        "curve_figure": curve_figure_payload(detail.system),
        "taxonomy": taxonomy,
        "detail": detail,
        "system": detail.system,
        "metrics": [detail.system.by_n[n] for n in detail.n_values],
        "diagnosed": [detail.system.by_n[n] for n in detail.n_values if n >= 2],
        "tolerance_labels": [tolerance_label(t) for t in TOLERANCES],
        "tolerance_rows": tolerance_rows,
        "tolerance_figure": tolerance_figure_payload(tolerance_rows) if tolerance_rows else None,
        "near_miss_factor": NEAR_MISS_FACTOR,
        "problems": problems,
        "json_url": query_with(request, format="json", samples_page=None),
        "csv_urls": csv_urls,
        "verified_only": filters.verified_only,
        **_counting_urls(request),
    }, status=400 if problem else status)


def _system_payload(request, *, slug: str, form, filters, detail, samples_page, page_urls, analysis, taxonomy,
                    csv_urls: dict) -> dict:
    """The system page's JSON: its numbers, its newest runs, one page of its samples, its analyses."""
    return {
        "filters": _filters_payload(form, filters),
        "system": detail.system.as_dict(),
        "runs": [
            {"id": run.pk, "created_at": run.created_at.isoformat(),
             "finished_at": run.finished_at.isoformat() if run.finished_at else None,
             "n_values": run.n_values, "k": run.k, "attempts_by_status": run.counts, "verified": run.verified}
            for run in detail.runs
        ],
        "runs_total": detail.runs_total,  # the newest SYSTEM_RUNS_SHOWN are listed; the runs CSV has them all
        "runs_csv": request.path + csv_urls["runs"],
        "dataset_url": reverse("leaderboard:system_dataset", args=[slug]),  # Parquet: every public attempt
        "samples": [sample.as_dict() for sample in samples_page.object_list],
        "samples_page": {**_page_payload(request, samples_page, page_urls),
                         "all_samples_csv": request.path + csv_urls["samples"]},
        "out_of_scope_attempts": detail.out_of_scope_attempts,
        "not_reexecuted_attempts": detail.not_reexecuted,
        "tolerances": list(TOLERANCES),
        "near_misses": [miss.as_dict() for miss in detail.near_misses],
        "near_miss_total": detail.near_miss_total,
        "failure_analysis": analysis.as_dict(),
        "error_taxonomy": taxonomy.as_dict(),
    }


def _system_csv(request, slug: str, detail, filters):
    table = request.GET.get("table", "samples")
    if table == "runs":
        return _csv(f"system-{slug}-runs.csv", [_run_row(run) for run in detail.all_runs], RUN_COLUMNS)
    if table == "by_n":
        rows = [{**metrics.as_dict(), "verifier_pass1": json.dumps(metrics.verifier, sort_keys=True) if metrics.verifier else "",
                 "verifier_samples": json.dumps(metrics.verifier_samples, sort_keys=True) if metrics.verifier else "",
                 **{_tolerance_column(t): metrics.pass1_at.get(t) for t in TOLERANCES}, **_diagnosis_cells(metrics)}
                for metrics in (detail.system.by_n[n] for n in detail.n_values)]
        return _csv(f"system-{slug}-by-n.csv", rows,
                    BY_N_COLUMNS + [_tolerance_column(t) for t in TOLERANCES] + DIAGNOSIS_COLUMNS)
    if table != "samples":
        return JsonResponse({"error": f"table={table!r} is not one of: samples, runs, by_n"}, status=400)
    # Every sample with every attempt id, whatever the page shows: streamed as the database is read.
    rows = (
        {**row, "attempt_ids": " ".join(map(str, row["attempt_ids"])),
         "passed_attempt_ids": " ".join(map(str, row["passed_attempt_ids"])),
         "verifier_choices": json.dumps(row["verifier_choices"], sort_keys=True) if row["verifier_choices"] else ""}
        for row in system_sample_rows(run_ids=detail.run_ids, filters=filters)
    )
    return csv_streaming_response(f"system-{slug}-samples.csv", rows, SAMPLE_COLUMNS)


def _diagnosis_cells(metrics) -> dict:
    if not metrics.diagnoses:
        return {}
    return {"failed_attempts": metrics.failures, **{f"diagnosis_{item.key}": item.count for item in metrics.diagnosis_shares}}


def _tolerance_column(tolerance: float) -> str:
    """The by-n CSV's column of Pass@1 at `tolerance`: "pass1_at_0.01"."""
    return f"pass1_at_{tolerance:g}"


def _run_row(run) -> dict:
    return {
        "run": run.pk,
        "created_at": run.created_at.isoformat(),
        "finished_at": run.finished_at.isoformat() if run.finished_at else "",
        "n_values": " ".join(map(str, run.n_values)),
        "k": run.k,
        **{status: run.counts.get(status, 0) for status in ATTEMPT_STATUSES},
        "verified": run.verified,
    }
