"""The paired comparison of two systems, `/compare/?a=<slug>&b=<slug>`: thin, leaderboard.comparison computes.

Also where the leaderboard's row picking lands: its checkboxes send `pick=<slug>` twice, which is
redirected to the canonical `?a=&b=` address (no JavaScript needed).
"""
from urllib.parse import urlencode

from django import forms
from django.http import HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from autoexperiment_site.abuse import heavy_page
from leaderboard import api_models
from leaderboard.comparison import (
    DIFFERENCES_LIMIT,
    PASS_SHARE,
    UnknownSystem,
    comparable_systems_page,
    systems_compare,
)
from leaderboard.comparison_figures import comparison_figure_payload
from leaderboard.forms import MAX_N, FlagField
from leaderboard.paging import BadPage
from leaderboard.views import _page_urls

FORMATS = ("html", "json")

RULES = [
    "Systems, counted attempts and verdicts are the leaderboard's: public runs only, attempts with status done "
    "and re-executed by the harness (with “include unverified”, uploads' reported numbers, not re-executed, too), "
    "a system's runs pooled per sample.",
    "Only samples both systems attempted (at least one counted attempt each) are compared, separately at each n.",
    "A system's score at a sample is c/m, c of its m counted attempts passing. The difference is Pass@1 of A minus "
    "Pass@1 of B on the shared samples, with a paired percentile bootstrap over samples (10,000 resamples, seed 0): "
    "its 95% interval, and a two-sided p-value for “no difference”.",
    f"In the outcome table a system passes a sample when c/m ≥ {float(PASS_SHARE):g} (with one attempt per sample: "
    "that attempt's verdict); the bootstrap uses c/m itself.",
    f"Samples where they differ are those whose scores differ, largest gap first (the first {DIFFERENCES_LIMIT} "
    "are listed); each links to a passing attempt of the better system beside a failing one of the other.",
]


class ComparisonForm(forms.Form):
    # The words are the OpenAPI description's (autoexperiment_site.openapi); the page has its own form.
    a = forms.SlugField(required=False, max_length=64, help_text="system A's id, as in /systems/<id>/")
    b = forms.SlugField(required=False, max_length=64, help_text="system B's id (another system)")
    n = forms.IntegerField(required=False, min_value=1, max_value=MAX_N, help_text="only this n (default: every n)")
    unverified = FlagField(required=False, help_text="1: uploads' reported numbers, not re-executed, count too")
    format = forms.ChoiceField(required=False, choices=[(value, value) for value in FORMATS])

    def problems(self) -> list[str]:
        """Each error as one sentence naming its parameter."""
        return [f"{name}={self.data.get(name, '')!r}: {error}" for name, errors in self.errors.items() for error in errors]


def _address(**parameters) -> str:
    query = urlencode({key: value for key, value in parameters.items() if value not in (None, "", False)})
    return reverse("leaderboard:compare") + (f"?{query}" if query else "")


def _picking(request, *, a: str = "", b: str = "") -> tuple[dict, str | None]:
    """The picking form's context: a page of the systems to choose from (`choices_page`), the chosen
    ones always among them; and what was wrong with the page asked for (None: nothing, else the first page is given)."""
    try:
        page, systems = comparable_systems_page(number=request.GET.get("choices_page"), chosen=(a, b))
        problem = None
    except BadPage as error:
        page, systems = comparable_systems_page(number=None, chosen=(a, b))
        problem = str(error)
    urls = _page_urls(request, page, "choices_page")
    return {"systems": systems, "choices_page": page, "choices_urls": urls, "chosen_a": a, "chosen_b": b,
            "rules": RULES}, problem


def _problem(request, message: str, *, status: int, output: str, a: str = "", b: str = ""):
    """A 400 or 404 that says what was wrong, with the form to pick two systems."""
    if output == "json":
        return JsonResponse({"error": message}, status=status)
    context, _ = _picking(request, a=a, b=b)
    return render(request, "leaderboard/compare.html", {**context, "problem": message}, status=status)


@heavy_page
@require_GET
def compare(request):
    """Two systems sample by sample, per n: the outcome table, the paired bootstrap, the samples where they differ."""
    form = ComparisonForm(request.GET)
    valid = form.is_valid()
    data = form.cleaned_data
    output = data.get("format") or ("json" if request.GET.get("format") == "json" else "html")
    if not valid:
        return _problem(request, "; ".join(form.problems()), status=400, output=output,
                        a=data.get("a") or "", b=data.get("b") or "")
    unverified = data["unverified"]

    picked = list(dict.fromkeys(slug.strip() for slug in request.GET.getlist("pick") if slug.strip()))
    if "pick" in request.GET:
        if len(picked) != 2:
            return _problem(request, f"pick: tick exactly two systems to compare (you ticked {len(picked)}).",
                            status=400, output=output, a=picked[0] if picked else "")
        return HttpResponseRedirect(_address(a=picked[0], b=picked[1], unverified="1" if unverified else None,
                                             format=data.get("format")))

    slug_a, slug_b = data.get("a") or "", data.get("b") or ""
    if not slug_a and not slug_b and output == "html":
        # Nothing asked yet (or "compare with..." from a system page): the picking form.
        context, problem = _picking(request, a=request.GET.get("with", ""))
        return render(request, "leaderboard/compare.html", {**context, "problem": problem}, status=400 if problem else 200)
    missing = [name for name, value in (("a", slug_a), ("b", slug_b)) if not value]
    if missing:
        return _problem(request, f"{' and '.join(missing)}: missing; give two system ids, as ?a=<id>&b=<id>.",
                        status=400, output=output, a=slug_a, b=slug_b)
    if slug_a == slug_b:
        return _problem(request, f"a and b are the same system ({slug_a!r}): choose two different systems.",
                        status=400, output=output, a=slug_a)
    try:
        comparison = systems_compare(slug_a=slug_a, slug_b=slug_b, verified_only=not unverified, n=data.get("n"))
    except UnknownSystem as error:
        return _problem(request, str(error), status=404, output=output,
                        a="" if error.parameter == "a" else slug_a, b="" if error.parameter == "b" else slug_b)

    if output == "json":
        return HttpResponse(api_models.page_json(api_models.Comparison, _comparison_payload(comparison)),
                            content_type="application/json")
    here = {"a": slug_a, "b": slug_b, "n": data.get("n"), "unverified": "1" if unverified else None}
    return render(request, "leaderboard/compare.html", _comparison_context(comparison, here=here))


def _comparison_payload(comparison) -> dict:
    """The comparison's JSON."""
    return {
        "a": comparison.a.as_dict(),
        "b": comparison.b.as_dict(),
        "verified_only": comparison.verified_only,
        "n": comparison.n,
        "pass_share": float(PASS_SHARE),
        "rules": RULES,
        "by_n": [row.as_dict() for row in comparison.by_n],
        "differing_samples": [difference.as_dict() for difference in comparison.differences],
        "differing_samples_total": comparison.differences_total,
        "differing_samples_limit": DIFFERENCES_LIMIT,
    }


def _comparison_context(comparison, *, here: dict) -> dict:
    """The comparison page's context; `here` is the page's query (a, b, n, unverified), which its links vary."""
    return {
        "comparison": comparison,
        "figure": comparison_figure_payload(comparison),
        "rules": RULES,
        "limit": DIFFERENCES_LIMIT,
        "json_url": _address(**here, format="json"),
        "swap_url": _address(**{**here, "a": here["b"], "b": here["a"]}),
        "unverified_url": _address(**{**here, "unverified": None if here["unverified"] else "1"}),
        "all_n_url": _address(**{**here, "n": None}) if here["n"] else None,
        "by_n": [{"row": row, "url": _address(**{**here, "n": row.n})} for row in comparison.by_n],
        "change_url": _address(**{"with": here["a"]}),
    }
