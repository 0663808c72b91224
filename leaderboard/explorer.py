"""The attempts explorer and the search across trajectories (/explore/): read side.

One page lists attempts across runs and submissions (a submission is a run) that the viewer may
see (runs.visibility: hidden runs only for their owner and staff), filtered by the contract's URL
parameters combined with AND, sorted, 50 a page. With a search (`q`) it lists instead the steps
whose public text (runs.models.StepText: what the anonymous replay shows, gold code left out)
matches, with the same filters applied to their attempts.

Every page costs a fixed handful of queries, whatever the number of attempts or hits:

- a page's rows are read in one query (attempt, run, sample and analysis joined), never per row;
- counts stop at a cap (COUNT(*) over a LIMITed subquery): past it the page says "10,000+";
- a search selects the page's step ids first, ordered newest attempt first (Postgres walks the
  (attempt, step) index backwards, or the GIN index for a rare phrase), and only then computes
  `ts_headline` for those 50 steps.

Only attempts that ended (done or error) are listed: queued, running and cancelled ones have no
outcome to explore yet.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

from django.contrib.postgres.search import SearchHeadline, SearchQuery
from django.db import connections
from django.db.models import Exists, F, Func, OuterRef, Q, Value

from leaderboard.models import SystemStanding
from leaderboard.rules import (
    ENDED_STATUSES,
    NEAR_MISS_FACTOR,
    canonical_config,
    passes_q,
    runs_frame,
    system_key_q,
    system_name,
    system_slug,
)
from runs.analysis.links import step_url_maker
from runs.analysis.outcomes import shown_outcome_expression
from runs.models import Attempt, AttemptException, Run, Sample, StepText
from runs.visibility import runs_visible_q

PAGE_SIZE = 50
# Counts of attempts and of hits stop here (the page then says "10,000+"): a count of millions of
# rows would cost more than the page it sits on.
COUNT_CAP = 10_000
HIT_COUNT_CAP = 1_000
# Exports hold at most this many rows (and say so when there were more); pages go as deep.
EXPORT_LIMIT = 10_000
MAX_PAGE = EXPORT_LIMIT // PAGE_SIZE

LISTED_STATUSES = ENDED_STATUSES
OUTCOME_LABELS = dict(Attempt.Outcome.choices)

# sort key -> the attempt field it orders by; "-key" is descending. Ties always fall to the id.
SORT_FIELDS = {
    "id": "id",
    "n": "sample__n",
    "steps": "analysis__steps",
    "cost": "cost",
    "seconds": "agent_seconds",
    "ratio": "tolerance_ratio",
}
DEFAULT_SORT = "-id"
SORT_KEYS = tuple(key for name in SORT_FIELDS for key in (name, f"-{name}"))

# ts_headline marks hits with these; the text is headlined with them removed first, so every one
# in the headline is a mark (see `_marked_text`), and the template escapes all text between them.
START_SEL = "\x02"
STOP_SEL = "\x03"
_SNIPPET_CONTEXT = 80  # characters either side of a substring match (other databases)


@dataclass(frozen=True)
class ExplorerFilters:
    """What the URL asks for (validated by leaderboard.explorer_forms.ExplorerForm). None: any."""

    suite: str | None = None
    system: str | None = None  # a system slug
    paper: str | None = None
    sample: str | None = None  # a sample id (unique in a paper; the samples pages pass the paper too)
    function: tuple[str, int] | None = None  # (paper_id, func_id)
    n: int | None = None
    status: str | None = None  # one of LISTED_STATUSES
    outcome: str | None = None
    exception: str | None = None
    exit_status: str | None = None
    verified: bool | None = None
    mismatch: bool | None = None
    near_miss: bool | None = None
    crashed_first: bool | None = None
    recovered: bool | None = None
    q: str = ""
    sort: str = DEFAULT_SORT


# --- which attempts ----------------------------------------------------------------------------------


def system_run_ids(slug: str, *, user) -> list[int]:
    """The runs of the system `slug` that `user` may see: its public runs (as the leaderboard
    groups them) and the hidden runs of the same system key that are the viewer's to see."""
    key = system_key_q(SystemStanding.objects.filter(slug=slug).first())
    public = runs_frame(key)
    run_ids = [int(pk) for pk in public.loc[public["slug"] == slug, "run_id"]]
    hidden = Run.objects.filter(Q(hidden=True) & runs_visible_q(user=user) & key).values_list(
        "id", "suite__name", "agent", "model", "agent_config", "context"
    )
    run_ids += [
        pk for pk, suite, agent, model, config, context in hidden
        if system_slug(suite=suite, agent=agent, model=model, config_json=canonical_config(config), context=context) == slug
    ]
    return sorted(run_ids)


def _flag(q: Q, value: bool | None) -> Q:
    return Q() if value is None else (q if value else ~q)


def attempts_q(filters: ExplorerFilters, *, user, prefix: str = "") -> Q:
    """The attempts `user` may see that match `filters` (not `q`), on Attempt or, with `prefix`
    ("attempt__"), on a model pointing at it."""
    def p(name: str) -> str:
        return f"{prefix}{name}"

    q = Q(**{p("status__in"): LISTED_STATUSES}) & runs_visible_q(user=user, prefix=p("run__"))
    if filters.suite:
        q &= Q(**{p("run__suite__name"): filters.suite})
    if filters.system:
        q &= Q(**{p("run_id__in"): system_run_ids(filters.system, user=user)})
    if filters.paper:
        q &= Q(**{p("sample__paper__paper_id"): filters.paper})
    if filters.sample:
        q &= Q(**{p("sample__sample_id"): filters.sample})
    if filters.function:
        paper_id, func_id = filters.function
        masks = Sample.functions.through.objects.filter(
            sample_id=OuterRef(p("sample_id")), function__paper__paper_id=paper_id, function__func_id=func_id
        )
        q &= Q(Exists(masks))
    if filters.n is not None:
        q &= Q(**{p("sample__n"): filters.n})
    if filters.status:
        q &= Q(**{p("status"): filters.status})
    if filters.outcome:
        # The shown outcome: failure_label for an error, the scored outcome for a done attempt.
        q &= Q(**{p("status"): Attempt.DONE, p("outcome"): filters.outcome}) | Q(
            **{p("status"): Attempt.ERROR, p("failure_label"): filters.outcome}
        )
    if filters.exception:
        seen = AttemptException.objects.filter(attempt_id=OuterRef(p("id")), exception_type=filters.exception)
        q &= Q(Exists(seen))
    if filters.exit_status:
        q &= Q(**{p("exit_status"): filters.exit_status})
    q &= _flag(Q(**{p("reexecution_passed__isnull"): False}), filters.verified)
    q &= _flag(Q(**{p("mismatch"): True}), filters.mismatch)
    near = (
        Q(**{p("status"): Attempt.DONE, p("tolerance_ratio__gt"): 1, p("tolerance_ratio__lte"): NEAR_MISS_FACTOR})
        & ~passes_q(prefix, reported=True)  # the explorer lists unverified attempts too, by their reported verdict
    )
    q &= _flag(near, filters.near_miss)
    if filters.crashed_first is not None:
        q &= Q(**{p("analysis__first_run_crashed"): filters.crashed_first})
    if filters.recovered is not None:
        q &= Q(**{p("analysis__isnull"): False, p("analysis__working_run_step__isnull"): not filters.recovered})
    return q


def _ordering(sort: str) -> list:
    descending = sort.startswith("-")
    name = SORT_FIELDS[sort.lstrip("-")]
    tie = "-id" if descending else "id"
    if name == "id":
        return [tie]
    # Unknown values (no cost, not analysed) last in both directions.
    expression = F(name).desc(nulls_last=True) if descending else F(name).asc(nulls_last=True)
    return [expression, tie]


# --- the attempt list --------------------------------------------------------------------------------

_ROW_FIELDS = (
    "id", "run_id", "run__suite__name", "run__agent", "run__model", "run__agent_config", "run__context",
    "sample__sample_id", "sample__paper__paper_id", "sample__n", "status", "shown_outcome", "exit_status",
    "reexecution_passed", "mismatch", "tolerance_ratio", "analysis__steps", "cost", "agent_seconds",
    "analysis__first_error_step", "analysis__first_error_line",
)

EXPORT_COLUMNS = [
    "attempt_id", "url", "run_id", "system", "slug", "suite", "paper", "sample_id", "n", "status", "outcome",
    "exit_status", "verified", "mismatch", "tolerance_ratio", "steps", "cost", "seconds", "first_error_step",
    "first_error_line",
]


@dataclass
class _AttemptPlace:
    """Where an attempt listed by the explorer belongs: its run, system, suite, paper and sample, and its
    shown outcome (failure_label of an error, outcome of a done attempt)."""

    run_id: int
    system: str
    slug: str
    suite: str
    paper: str
    sample_id: str
    n: int
    outcome: str

    @property
    def outcome_label(self) -> str:
        return OUTCOME_LABELS.get(self.outcome, self.outcome)


@dataclass
class AttemptRow(_AttemptPlace):
    pk: int
    url: str | None  # the replay at its first error step (its first page when none)
    status: str
    exit_status: str
    verified: bool
    mismatch: bool
    tolerance_ratio: float | None
    steps: int | None
    cost: float | None
    seconds: float | None
    first_error_step: int | None
    first_error_line: str

    def as_dict(self) -> dict:
        return {
            "attempt_id": self.pk, "url": self.url, "run_id": self.run_id, "system": self.system, "slug": self.slug,
            "suite": self.suite, "paper": self.paper, "sample_id": self.sample_id, "n": self.n, "status": self.status,
            "outcome": self.outcome, "exit_status": self.exit_status, "verified": self.verified,
            "mismatch": self.mismatch, "tolerance_ratio": self.tolerance_ratio, "steps": self.steps, "cost": self.cost,
            "seconds": self.seconds, "first_error_step": self.first_error_step, "first_error_line": self.first_error_line,
        }


class _Systems:
    """Run id -> (system name, slug), each run's slug computed once per request."""

    def __init__(self):
        self._known: dict[int, tuple[str, str]] = {}

    def of(self, run_id, suite, agent, model, config, context) -> tuple[str, str]:
        if run_id not in self._known:
            slug = system_slug(suite=suite, agent=agent, model=model, config_json=canonical_config(config), context=context)
            self._known[run_id] = (system_name(model=model, agent=agent), slug)
        return self._known[run_id]


def _attempt_rows(queryset) -> list[AttemptRow]:
    step_url = step_url_maker()
    systems = _Systems()
    rows = []
    rows_read = queryset.annotate(shown_outcome=shown_outcome_expression()).values_list(*_ROW_FIELDS)
    for (pk, run_id, suite, agent, model, config, context, sample_id, paper, n, status, outcome,
         exit_status, reexecuted, mismatch, ratio, steps, cost, seconds, error_step, error_line) in rows_read:
        name, slug = systems.of(run_id, suite, agent, model, config, context)
        rows.append(AttemptRow(
            pk=pk, url=step_url(pk, error_step), run_id=run_id, system=name, slug=slug, suite=suite, paper=paper,
            sample_id=sample_id, n=n, status=status, outcome=outcome,
            exit_status=exit_status, verified=reexecuted is not None, mismatch=mismatch, tolerance_ratio=ratio,
            steps=steps, cost=cost, seconds=seconds, first_error_step=error_step, first_error_line=error_line or "",
        ))
    return rows


@dataclass
class ResultPage:
    """One page of rows (attempts or hits) and how many there are, up to `cap`."""

    rows: list
    page: int
    has_next: bool
    count: int  # exact when not `capped`; else the cap
    capped: bool

    @property
    def count_label(self) -> str:
        return f"{self.count:,}+" if self.capped else f"{self.count:,}"

    @property
    def start(self) -> int:
        return (self.page - 1) * PAGE_SIZE + 1

    @property
    def end(self) -> int:
        return self.start + len(self.rows) - 1

    @property
    def past_end(self) -> bool:
        return self.page > 1 and not self.rows


def _capped_count(queryset, cap: int) -> tuple[int, bool]:
    """COUNT(*) over the first cap + 1 rows: (count, whether there are more than cap)."""
    count = queryset.order_by().values("pk")[: cap + 1].count()
    return min(count, cap), count > cap


def _filtered_attempts(filters: ExplorerFilters, *, user):
    return Attempt.objects.filter(attempts_q(filters, user=user)).order_by(*_ordering(filters.sort))


def explore_attempts(filters: ExplorerFilters, *, user, page: int = 1) -> ResultPage:
    """Page `page` of the attempts matching `filters` (two queries: the page, a capped count)."""
    attempts = _filtered_attempts(filters, user=user)
    offset = (page - 1) * PAGE_SIZE
    rows = _attempt_rows(attempts[offset: offset + PAGE_SIZE + 1])
    if page == 1 and len(rows) <= PAGE_SIZE:
        count, capped = len(rows), False  # all of them are on this page
    else:
        count, capped = _capped_count(attempts, COUNT_CAP)
    return ResultPage(rows=rows[:PAGE_SIZE], page=page, has_next=len(rows) > PAGE_SIZE, count=count, capped=capped)


def export_attempts(filters: ExplorerFilters, *, user) -> tuple[list[AttemptRow], bool]:
    """The first EXPORT_LIMIT attempts in the page's order, and whether there were more."""
    rows = _attempt_rows(_filtered_attempts(filters, user=user)[: EXPORT_LIMIT + 1])
    return rows[:EXPORT_LIMIT], len(rows) > EXPORT_LIMIT


# --- the search --------------------------------------------------------------------------------------

HIT_COLUMNS = ["attempt_id", "step", "url", "run_id", "system", "slug", "suite", "paper", "sample_id", "n", "outcome"]


@dataclass
class StepHit(_AttemptPlace):
    attempt_id: int
    step: int
    url: str | None  # the replay at this step
    snippet: list[tuple[str, bool]] = field(default_factory=list)  # (text, is a hit), to be escaped

    @property
    def snippet_text(self) -> str:
        return "".join(text for text, _ in self.snippet)

    def as_dict(self) -> dict:
        return {
            "attempt_id": self.attempt_id, "step": self.step, "url": self.url, "run_id": self.run_id,
            "system": self.system, "slug": self.slug, "suite": self.suite, "paper": self.paper,
            "sample_id": self.sample_id, "n": self.n, "outcome": self.outcome,
        }


def _full_text() -> bool:
    return connections[StepText.objects.db].vendor == "postgresql"


def _search_query(q: str) -> SearchQuery:
    return SearchQuery(q, search_type="websearch", config="simple")


def _hits(filters: ExplorerFilters, *, user):
    """The matching steps of visible, filtered attempts, newest attempt first, then by step."""
    steps = StepText.objects.filter(attempts_q(filters, user=user, prefix="attempt__"))
    if _full_text():
        steps = steps.filter(document=_search_query(filters.q))
    else:
        steps = steps.filter(text__icontains=filters.q)
    return steps.order_by("-attempt_id", "step")


def split_marked(headline: str) -> list[tuple[str, bool]]:
    """ts_headline's output, marked with START_SEL/STOP_SEL, as (text, is a hit) segments."""
    segments: list[tuple[str, bool]] = []
    for part in headline.split(START_SEL):
        hit, sep, rest = part.partition(STOP_SEL)
        if sep:
            segments.append((hit, True))
            part = rest
        if part:
            segments.append((part.replace(STOP_SEL, ""), False))
    return [segment for segment in segments if segment[0]]


def substring_snippet(text: str, needle: str) -> list[tuple[str, bool]]:
    """Around the first match of `needle` (any case), with every match in the window marked."""
    folded, wanted = text.lower(), needle.lower()
    first = folded.find(wanted)
    if not wanted or first < 0:
        return [(text[: 2 * _SNIPPET_CONTEXT], False)]
    start = max(0, first - _SNIPPET_CONTEXT)
    end = min(len(text), first + len(wanted) + _SNIPPET_CONTEXT)
    segments = [("…", False)] if start else []
    pattern = re.compile(re.escape(needle), re.IGNORECASE)
    position = start
    for match in pattern.finditer(text, start, end):
        if match.start() > position:
            segments.append((text[position: match.start()], False))
        segments.append((match.group(0), True))
        position = match.end()
    if position < end:
        segments.append((text[position:end], False))
    if end < len(text):
        segments.append(("…", False))
    return segments


def _marked_text():
    # The marks must mean "hit" and nothing else: drop any such character from the text first.
    return Func(F("text"), Value(START_SEL + STOP_SEL), Value(""), function="translate")


def _snippets(ids: list[int], q: str) -> dict[int, list[tuple[str, bool]]]:
    """StepText id -> its snippet, for the ids of one page (one query)."""
    if not ids:
        return {}
    if _full_text():
        headlines = StepText.objects.filter(id__in=ids).annotate(
            headline=SearchHeadline(
                _marked_text(), _search_query(q), config="simple", start_sel=START_SEL, stop_sel=STOP_SEL,
                max_words=30, min_words=12, max_fragments=2, fragment_delimiter=" … ",
            )
        ).values_list("id", "headline")
        return {pk: split_marked(headline) for pk, headline in headlines}
    return {pk: substring_snippet(text, q) for pk, text in StepText.objects.filter(id__in=ids).values_list("id", "text")}


def _hit_rows(found: list[tuple[int, int, int]], *, q: str | None) -> list[StepHit]:
    """(StepText id, attempt id, step) triples as hits, with snippets when `q` is given (three queries)."""
    step_url = step_url_maker()
    systems = _Systems()
    attempt_ids = sorted({attempt_id for _, attempt_id, _ in found})
    attempts = {
        row[0]: row for row in Attempt.objects.filter(id__in=attempt_ids).annotate(shown_outcome=shown_outcome_expression())
        .values_list("id", "run_id", "run__suite__name", "run__agent", "run__model", "run__agent_config", "run__context",
                     "sample__sample_id", "sample__paper__paper_id", "sample__n", "shown_outcome")
    }
    snippets = _snippets([pk for pk, _, _ in found], q) if q else {}
    hits = []
    for pk, attempt_id, step in found:
        _, run_id, suite, agent, model, config, context, sample_id, paper, n, outcome = attempts[attempt_id]
        name, slug = systems.of(run_id, suite, agent, model, config, context)
        hits.append(StepHit(
            attempt_id=attempt_id, step=step, url=step_url(attempt_id, step), run_id=run_id, system=name, slug=slug,
            suite=suite, paper=paper, sample_id=sample_id, n=n,
            outcome=outcome, snippet=snippets.get(pk, []),
        ))
    return hits


def search_steps(filters: ExplorerFilters, *, user, page: int = 1) -> ResultPage:
    """Page `page` of the steps matching `filters.q` (newest attempt first) with highlighted
    snippets: the page's step ids first, then headlines of those alone, then a capped count."""
    hits = _hits(filters, user=user)
    offset = (page - 1) * PAGE_SIZE
    found = list(hits.values_list("id", "attempt_id", "step")[offset: offset + PAGE_SIZE + 1])
    if page == 1 and len(found) <= PAGE_SIZE:
        count, capped = len(found), False
    else:
        count, capped = _capped_count(hits, HIT_COUNT_CAP)
    rows = _hit_rows(found[:PAGE_SIZE], q=filters.q)
    return ResultPage(rows=rows, page=page, has_next=len(found) > PAGE_SIZE, count=count, capped=capped)


def export_hits(filters: ExplorerFilters, *, user) -> tuple[list[StepHit], bool]:
    """The first EXPORT_LIMIT hits (without snippets), and whether there were more."""
    found = list(_hits(filters, user=user).values_list("id", "attempt_id", "step")[: EXPORT_LIMIT + 1])
    return _hit_rows(found[:EXPORT_LIMIT], q=None), len(found) > EXPORT_LIMIT
