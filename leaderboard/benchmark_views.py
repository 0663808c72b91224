"""The public benchmark pages (a suite, a paper, a function, an experiment, the samples of one n)
and their JSON (`?format=json`). Thin: leaderboard.benchmark reads, templates escape.

Gold is for those runs.visibility.gold_access allows, the one rule the replay follows too (staff;
everybody for a suite whose gold is public): a function's gold body and an experiment's gold
numbers (its result and the per-number spreads of its gold runs) are neither rendered nor put in
the JSON for anyone else. Everybody sees the masked stub, as the agent does.
"""
import json

from django.core.paginator import Page
from django.http import Http404, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from autoexperiment_site.abuse import heavy_page
from leaderboard import benchmark_api_models
from leaderboard.benchmark import (
    CODE_TREE_LIMIT,
    PAPER_TEXT_CHARS,
    BadSamplesRequest,
    experiment_detail,
    function_detail,
    paper_detail,
    samples_page,
    suite_overview,
)
from leaderboard.paging import BadPage, page_get
from leaderboard.views import _json, _page_payload, _page_urls, query_with
from runs.models import Suite
from runs.visibility import gold_access

FORMATS = ("html", "json")


def _output(request) -> str | None:
    value = request.GET.get("format", "html") or "html"
    return value if value in FORMATS else None


def _bad_format(request) -> JsonResponse:
    return JsonResponse({"error": f"format={request.GET.get('format')!r} is not one of: {', '.join(FORMATS)}"}, status=400)


def _function_url(suite: str, paper_id: str, func_id: int) -> str:
    return reverse("leaderboard:benchmark_function", args=[suite, paper_id, func_id])


def _experiment_url(suite: str, paper_id: str, exp_id: int) -> str:
    return reverse("leaderboard:benchmark_experiment", args=[suite, paper_id, exp_id])


def _system_url(slug: str) -> str:
    return reverse("leaderboard:system", args=[slug])


@require_GET
def suite(request, suite: str):
    """A suite: its papers with their counts, its samples by n, gold stability and task downloads."""
    if (output := _output(request)) is None:
        return _bad_format(request)
    overview = suite_overview(name=suite)
    if overview is None:
        raise Http404(f"no suite {suite}")
    if not gold_access(user=request.user, suite=overview.suite).code:
        overview.downloads = []  # a sample's task holds the gold bodies of every function it leaves unmasked
    stability = overview.gold_stability
    if output == "json":
        return _json({
            "suite": overview.suite.name,
            "version": overview.suite.version,
            "description": overview.suite.description,
            "papers": [
                {**paper.as_dict(), "url": reverse("leaderboard:benchmark_paper", args=[suite, paper.paper_id])}
                for paper in overview.papers
            ],
            "functions": overview.functions,
            "experiments": overview.experiments,
            "samples_by_n": {str(n): count for n, count in overview.samples_by_n.items()},
            "gold_stability": stability and {
                "experiments": stability.experiments, "unstable": stability.unstable, "policy": stability.policy,
                "held_out_checked": stability.held_out_checked,
            },
            "task_downloads": [item.model_dump() for item in overview.downloads],
            # Parquet files and a dataset card, no gold: for everybody (leaderboard.datasets)
            "dataset_url": reverse("leaderboard:suite_dataset", args=[suite]),
        }, model=benchmark_api_models.BenchmarkSuite)
    return render(request, "leaderboard/benchmark_suite.html", {
        "overview": overview,
        "suite": overview.suite,
        "samples_url": reverse("leaderboard:benchmark_samples", args=[suite]),
        "json_url": query_with(request, format="json"),
    })


@require_GET
def paper(request, suite: str, paper_id: str):
    """A paper: the start of its text, its code tree, its functions and experiments."""
    if (output := _output(request)) is None:
        return _bad_format(request)
    detail = paper_detail(suite=suite, paper_id=paper_id)
    if detail is None:
        raise Http404(f"no paper {paper_id} in suite {suite}")
    if output == "json":
        return _json({
            "suite": suite,
            "paper_id": detail.paper.paper_id,
            "title": detail.paper.title,
            "source_url": detail.paper.source_url,
            "text_start": detail.text_start,
            "text_truncated": detail.text_truncated,
            "functions": [
                {"func_id": f.func_id, "file": f.file, "name": f.name, "url": _function_url(suite, paper_id, f.func_id)}
                for f in detail.functions
            ],
            "experiments": [
                {"exp_id": e.exp_id, "description": e.description, "depends_on": [f.func_id for f in e.dependencies.all()],
                 "url": _experiment_url(suite, paper_id, e.exp_id)}
                for e in detail.experiments
            ],
            "samples_by_n": {str(n): count for n, count in detail.samples_by_n.items()},
            "code_tree": {"files": [entry.model_dump() for entry in detail.tree.files], "truncated": detail.tree.truncated,
                          "limit": CODE_TREE_LIMIT, "problem": detail.tree.problem},
        }, model=benchmark_api_models.BenchmarkPaper)
    return render(request, "leaderboard/benchmark_paper.html", {
        "detail": detail,
        "paper": detail.paper,
        "suite_name": suite,
        "text_chars": PAPER_TEXT_CHARS,
        "tree_limit": CODE_TREE_LIMIT,
        "json_url": query_with(request, format="json"),
    })


# A function's or an experiment's pass rates list their systems this many at a time.
RATES_PER_PAGE = 100


def _rates_page(request, rates: list) -> tuple[Page, dict, str | None]:
    """The page of `rates` that `?page=` asks for, its neighbours' query strings and None; or, for a
    page they do not have, the first page and what was wrong."""
    try:
        page, problem = page_get(rates, number=request.GET.get("page"), per_page=RATES_PER_PAGE, parameter="page",
                                 what="systems"), None
    except BadPage as error:
        page, problem = page_get(rates, number=None, per_page=RATES_PER_PAGE, parameter="page", what="systems"), str(error)
    return page, _page_urls(request, page, "page"), problem


def _rates_payload(rates) -> list[dict]:
    return [{**rate.as_dict(), "url": _system_url(rate.system.slug)} for rate in rates]


@heavy_page
@require_GET
def function(request, suite: str, paper_id: str, func_id: int):
    """A function: where it is, its description and excerpt, the masked stub (gold body: runs.visibility.gold_access)
    and how often each system implements it."""
    if (output := _output(request)) is None:
        return _bad_format(request)
    detail = function_detail(suite=suite, paper_id=paper_id, func_id=func_id, user=request.user)
    if detail is None:
        raise Http404(f"no function {func_id} in paper {paper_id} of suite {suite}")
    sees_gold = detail.access.code
    f = detail.function
    rates, rate_urls, problem = _rates_page(request, detail.rates)
    if problem and output == "json":
        return JsonResponse({"error": problem}, status=400)
    experiments = [{"exp_id": e.exp_id, "url": _experiment_url(suite, paper_id, e.exp_id)} for e in detail.experiments]
    if output == "json":
        payload = {
            "suite": suite, "paper_id": paper_id, "func_id": f.func_id, "file": f.file, "name": f.name,
            "description": f.description, "relevant_paper": f.relevant_paper,
            "masked_stub": detail.stub, "masked_stub_problem": detail.stub_problem,
            "experiments": experiments,
            "systems": _rates_payload(rates.object_list),
            "systems_page": _page_payload(request, rates, rate_urls),
        }
        if sees_gold:
            payload["gold_body"] = detail.gold_body
        return _json(payload, model=benchmark_api_models.BenchmarkFunction)
    return render(request, "leaderboard/benchmark_function.html", {
        "detail": detail,
        "function": f,
        "suite_name": suite,
        "paper_id": paper_id,
        "paper_url": reverse("leaderboard:benchmark_paper", args=[suite, paper_id]),
        "experiments": experiments,
        "rates": [{"rate": rate, "url": _system_url(rate.system.slug)} for rate in rates.object_list],
        "rates_page": rates,
        "rate_urls": rate_urls,
        "rates_problem": problem,
        "sees_gold": sees_gold,
        "json_url": query_with(request, format="json"),
    }, status=400 if problem else 200)


@heavy_page
@require_GET
def experiment(request, suite: str, paper_id: str, exp_id: int):
    """An experiment: description, command, answer format, the functions it depends on and the pass
    rate by system (gold numbers: runs.visibility.gold_access)."""
    if (output := _output(request)) is None:
        return _bad_format(request)
    detail = experiment_detail(suite=suite, paper_id=paper_id, exp_id=exp_id, user=request.user)
    if detail is None:
        raise Http404(f"no experiment {exp_id} in paper {paper_id} of suite {suite}")
    sees_gold = detail.access.numbers
    e = detail.experiment
    rates, rate_urls, problem = _rates_page(request, detail.rates)
    if problem and output == "json":
        return JsonResponse({"error": problem}, status=400)
    dependencies = [
        {"func_id": f.func_id, "file": f.file, "name": f.name, "url": _function_url(suite, paper_id, f.func_id)}
        for f in detail.dependencies
    ]
    gold = {"gold_result": e.gold_result, "gold_spreads": e.gold_spreads} if sees_gold else None
    if output == "json":
        return _json({
            "suite": suite, "paper_id": paper_id, "exp_id": e.exp_id, "description": e.description, "command": e.command,
            "answer_format": e.answer_format, "rtol": e.rtol, "atol": e.atol, "timeout_seconds": e.timeout_seconds,
            "gold_unstable": e.gold_unstable, "gold_spread": e.gold_spread, "gold_repeats": e.gold_repeats,
            "depends_on": dependencies,
            "systems": _rates_payload(rates.object_list),
            "systems_page": _page_payload(request, rates, rate_urls),
            **(gold or {}),
        }, model=benchmark_api_models.BenchmarkExperiment)
    return render(request, "leaderboard/benchmark_experiment.html", {
        "detail": detail,
        "experiment": e,
        "suite_name": suite,
        "paper_id": paper_id,
        "paper_url": reverse("leaderboard:benchmark_paper", args=[suite, paper_id]),
        "dependencies": dependencies,
        "answer_format": _json_text(e.answer_format),
        "rates": [{"rate": rate, "url": _system_url(rate.system.slug)} for rate in rates.object_list],
        "rates_page": rates,
        "rate_urls": rate_urls,
        "rates_problem": problem,
        "gold": gold and {key: _json_text(value) if value else "" for key, value in gold.items()},
        "json_url": query_with(request, format="json"),
    }, status=400 if problem else 200)


def _json_text(value) -> str:
    """A JSON value as the agent writes it (and not as Python prints a dict)."""
    return json.dumps(value, indent=1, ensure_ascii=False)


def _n_parameter(request) -> int | None:
    value = request.GET.get("n", "").strip()
    if not value:
        return None
    if not value.isascii() or not value.isdigit() or len(value) > 4:
        raise BadSamplesRequest(f"n={value[:20]!r} is not a whole number of masked functions (e.g. ?n=1)")
    return int(value)


@heavy_page
@require_GET
def samples(request, suite: str):
    """The samples of one n (`?n=1`), a page at a time (`?page=2`), each with a summary of the
    attempts at it the viewer may see and a link to them in the explorer."""
    if (output := _output(request)) is None:
        return _bad_format(request)
    suite_object = Suite.objects.filter(name=suite).first()
    if suite_object is None:
        raise Http404(f"no suite {suite}")
    try:
        listing = samples_page(suite=suite_object, n=_n_parameter(request), page=request.GET.get("page"), user=request.user)
    except BadSamplesRequest as error:
        if output == "json":
            return JsonResponse({"error": str(error)}, status=400)
        return render(request, "leaderboard/benchmark_samples.html",
                      {"suite": suite_object, "error": str(error)}, status=400)
    page = listing.page
    previous_url = query_with(request, page=page.previous_page_number()) if page.has_previous() else None
    next_url = query_with(request, page=page.next_page_number()) if page.has_next() else None
    if output == "json":
        return _json({
            "suite": suite, "n": listing.n, "n_values": listing.n_values,
            "page": page.number, "pages": page.paginator.num_pages, "count": page.paginator.count,
            "previous": previous_url and request.path + previous_url, "next": next_url and request.path + next_url,
            "samples": [
                {"sample_id": row.sample.sample_id, "paper": row.sample.paper.paper_id, "n": row.sample.n,
                 "functions": [{"func_id": f.func_id, "name": f.name} for f in row.functions], **row.summary()}
                for row in listing.rows
            ],
        }, model=benchmark_api_models.BenchmarkSamples)
    return render(request, "leaderboard/benchmark_samples.html", {
        "suite": suite_object,
        "listing": listing,
        "n_links": [{"n": n, "url": query_with(request, n=n, page=None), "active": n == listing.n} for n in listing.n_values],
        "previous_url": previous_url,
        "next_url": next_url,
        "json_url": query_with(request, format="json"),
    })
