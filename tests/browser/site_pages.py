"""Every page type of the site, with real rows behind it, for the browser tests that check all pages
(accessibility with axe, tables that fit the screen).

`site_pages()` builds the data and returns the pages as `SitePage`s in the order a browser should
visit them: anonymous pages first, then the pages of a signed-in staff user. To check a new page,
add one line to the list in `site_pages` (and a row it needs to the data above it).
"""
from __future__ import annotations

from dataclasses import dataclass

from django.urls import reverse

from leaderboard.models import SystemStanding
from runs.analysis.services import attempt_analysis_record
from runs.models import Experiment, Function, Paper, Sample
from tests.leaderboard.factories import build_board_data
from tests.replay.factories import make_attempt, make_sample, make_user
from tests.support import import_builtin_suite

ANONYMOUS, STAFF = "anonymous", "staff"


@dataclass(frozen=True)
class SitePage:
    name: str  # what kind of page, for messages
    url: str
    who: str = ANONYMOUS  # ANONYMOUS or STAFF (a signed-in staff user who uploaded a submission)
    status: int = 200


@dataclass
class SiteData:
    pages: list[SitePage]
    staff: object  # the user to sign in as for the STAFF pages


def site_pages() -> SiteData:
    """Rows for every page type (the leaderboard's toy board, the built-in suite, attempts with
    trajectories, a run, a submission) and the pages that show them."""
    from runs.submissions.services import submission_create
    from tests.submissions import helpers as submission_helpers

    board = build_board_data()
    suite = import_builtin_suite()
    paper = Paper.objects.filter(suite=suite).order_by("paper_id").first()
    function = Function.objects.filter(paper=paper).order_by("func_id").first()
    experiment = Experiment.objects.filter(paper=paper).order_by("exp_id").first()
    systems = list(SystemStanding.objects.order_by("slug").values_list("slug", flat=True))

    sample = make_sample()
    attempt = make_attempt(sample=sample)
    other = make_attempt(sample=sample, model="anthropic:claude-3-5-sonnet")
    attempt_analysis_record([attempt.pk, other.pk])

    staff = make_user(is_staff=True)
    builtin_sample = Sample.objects.get(sample_id=submission_helpers.SAMPLE)
    submission = submission_create(
        data=submission_helpers.jsonl(submission_helpers.record(final_answer=submission_helpers.gold_answer(builtin_sample))),
        filename="results.jsonl", uploader=staff,
    )

    benchmark = {"suite": suite.name}
    in_paper = {**benchmark, "paper_id": paper.paper_id}
    pages = [
        SitePage("leaderboard", reverse("leaderboard:home")),
        SitePage("leaderboard with unverified uploads", reverse("leaderboard:home") + "?unverified=1&tolerance=0.01"),
        SitePage("leaderboard with a bad filter", reverse("leaderboard:home") + "?n_min=0", status=400),
        SitePage("system", reverse("leaderboard:system", args=[systems[0]])),
        SitePage("compare: picking", reverse("leaderboard:compare")),
        SitePage("compare: two systems", reverse("leaderboard:compare") + f"?a={systems[0]}&b={systems[1]}&unverified=1"),
        SitePage("per-function difficulty", reverse("leaderboard:functions")),
        SitePage("explorer", reverse("leaderboard:explore")),
        SitePage("explorer search", reverse("leaderboard:explore") + "?q=NotImplementedError"),
        SitePage("benchmark suite", reverse("leaderboard:benchmark_suite", kwargs=benchmark)),
        SitePage("benchmark toy suite", reverse("leaderboard:benchmark_suite", kwargs={"suite": board.suite.name})),
        SitePage("benchmark samples", reverse("leaderboard:benchmark_samples", kwargs=benchmark)),
        SitePage("benchmark paper", reverse("leaderboard:benchmark_paper", kwargs=in_paper)),
        SitePage("benchmark function", reverse("leaderboard:benchmark_function", kwargs={**in_paper, "func_id": function.func_id})),
        SitePage("benchmark experiment", reverse("leaderboard:benchmark_experiment", kwargs={**in_paper, "exp_id": experiment.exp_id})),
        SitePage("replay", reverse("replay:attempt", args=[attempt.pk])),
        SitePage("replay compare", reverse("replay:compare") + f"?a={attempt.pk}&b={other.pk}"),
        SitePage("API reference", "/api/v1/"),
        SitePage("sign in", reverse("login")),
        SitePage("sign up", reverse("signup")),
        SitePage("password reset", reverse("password_reset")),
        SitePage("password reset sent", reverse("password_reset_done")),
        SitePage("password reset link", reverse("password_reset_confirm", args=["MQ", "not-a-token"])),
        SitePage("password reset complete", reverse("password_reset_complete")),
        SitePage("not found", "/no-such-page/", status=404),
        SitePage("runs queue", reverse("runs:queue"), who=STAFF),
        SitePage("run form", reverse("runs:start"), who=STAFF),
        SitePage("run detail", reverse("runs:run_detail", args=[board.run_a.pk]), who=STAFF),
        SitePage("run detail of an upload", reverse("runs:run_detail", args=[submission.run_id]), who=STAFF),
        SitePage("upload", reverse("submissions:upload"), who=STAFF),
        SitePage("submission", reverse("submissions:detail", args=[submission.pk]), who=STAFF),
        SitePage("my submissions", reverse("submissions:mine"), who=STAFF),
        SitePage("API tokens", reverse("submissions:tokens"), who=STAFF),
    ]
    return SiteData(pages=pages, staff=staff)
