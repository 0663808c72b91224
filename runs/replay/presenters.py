"""One attempt's replay page as plain view data: its header, a page of its steps, its final patch
and its verdicts (`attempt_replay`), the bodies of further steps and a search within them when the
page's script asks (`attempt_step_bodies`, `attempt_step_search`).

Everything here returns text and flags, never HTML: templates render it with autoescaping, so
whatever a model or an uploader wrote (thoughts, tool arguments, observations, file names, diffs,
answers, patches) reaches the browser as text. The pieces are presented by runs.replay.steps (a
step), runs.replay.calls (its tool call), runs.replay.diffs (diffs and highlighting) and
runs.replay.scores (the verdicts); the comparison page is runs.replay.comparison.

Reading is one query for the attempt (runs.replay.selectors), one for the page of its trajectory
(runs.replay.pages: the database slices the stored JSON) plus one small query for the other
attempts at the same sample; nothing is queried per step. A page shows `REPLAY_STEPS_PER_PAGE`
steps, each with its text cut and its diffs bounded (runs.limits), and the head of the final
patch, so the work of one request is bounded whatever was stored; the whole patch is a plain-text
download. The attempt page builds whole StepViews for its first screen of steps only
(`first_screen_steps`) and a StepLine (number, tool, error, one-line summary) for every step of
the page; `attempt_step_bodies` builds the others when the page's script asks, and
`attempt_step_search` says which steps hold a search.

Gold: every function here takes the viewer's `GoldAccess` for the run's suite (runs.visibility.gold_access,
the one rule). The `gold` and `mutant` baselines restore masked functions from the reference
implementation, so their diffs, final patch, and the arguments of the steps that write code hold
the gold bodies, and their programs print the gold numbers: a viewer without `access.code` gets
none of that code, and one without `access.numbers` none of their output, answers or numbers.
For such a viewer every other text of the page (observations, tracebacks, thoughts, arguments,
diffs, the re-execution's output, errors) has the lines quoting a gold body and the gold numbers
in full withheld (runs.analysis.gold_text), the score table no gold column, and the per-function
verdicts no numbers unless `access.staff` (runs.replay.functions).
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from django.core.paginator import InvalidPage, Paginator
from django.urls import NoReverseMatch, reverse

from runs.agents.trajectory import FileChange, FinalAnswer, Header, Trajectory, TrajectoryFormatError
from runs.analysis.gold_text import NOTHING, GoldRedaction, gold_redaction_for
from runs.analysis.links import step_page
from runs.analysis.public import GOLD_CODE_AGENTS, OUTPUT_HIDDEN
from runs.benchmark.text import format_seconds
from runs.limits import ReplayBounds, replay_bounds, trajectory_limits
from runs.models import Attempt, AttemptAnalysis, StepText
from runs.replay.diffs import FileDiff, HighlightBudget, file_diff, more_files, patch_files
from runs.replay.pages import TrajectoryPage, trajectory_page
from runs.replay.scores import ExperimentRows, score_table
from runs.replay.selectors import attempt_is_live
from runs.replay.steps import FILES_TOTAL_KEY, StepLine, StepView, step_line, step_view
from runs.replay.text import as_text, cut_to_page, format_cost, pretty_json
from runs.visibility import GoldAccess

# The gold-code rule (which agents, which tools) is runs.analysis.public's, shared with the search.
GOLD_CODE_NOTICE = "The reference implementation of this suite, and what it printed, are shown to staff only."

_SECRET_KEY = re.compile(r"key|token|secret|password|authorization", re.IGNORECASE)


@dataclass
class AttemptReplay:
    """Everything the attempt page shows, as text and flags."""

    attempt: Attempt
    sample_id: str
    paper_id: str
    agent: str
    model: str
    exit_status: str
    exit_message: str
    failure_label: str
    started_at: str
    ended_at: str
    config: str
    steps: list[StepView]  # this page's
    pager: Pager
    input_tokens: int
    output_tokens: int
    cost: str
    agent_seconds: str
    total_seconds: str
    final_answer_raw: str | None  # cut to the page bounds (only answers stored before the limits are longer)
    final_answer_parsed: str
    final_answer_error: str
    experiments: list[ExperimentRows]
    reported_error: str
    reexecuted_error: str
    final_patch: list[FileDiff]
    out_of_scope: list[FileDiff]  # what re-execution dropped from the final patch (runs.benchmark.scope)
    patch_hidden: bool
    gold_code_hidden: bool
    patch_cut: bool = False  # only the head of the final patch is shown
    patch_chars: int = 0  # the whole final patch's length
    patch_url: str = ""  # the whole final patch as plain text
    run_url: str = ""
    trajectory_problem: str = ""
    marks_note: str = ""  # why errors are marked in part of the trajectory only
    lines: list[StepLine] = field(default_factory=list)  # this page's steps, one line each (the attempt page)
    failure_detail: str = ""
    reexecution_output: str = ""  # the re-run experiments' output, as this viewer may read it

    @property
    def step_count(self) -> int:
        return self.pager.total

    @property
    def first_error(self) -> int | None:
        return self.pager.errors[0] if self.pager.errors else None

    @property
    def error_count(self) -> int:
        return len(self.pager.errors)

    @property
    def live(self) -> bool:
        """Whether the attempt may still record steps: its page follows them (runs.evaluation.live)."""
        return attempt_is_live(self.attempt)

    @property
    def pending_steps(self) -> tuple[int, int] | None:
        """The first and last of the page's steps whose bodies load on demand (None: none do)."""
        numbers = [line.number for line in self.lines if line.body is None]
        return (numbers[0], numbers[-1]) if numbers else None


class ReplayPageError(ValueError):
    """A page of steps the trajectory does not have; the message says which pages there are."""


@dataclass
class Pager:
    """Which steps one page shows and how to reach the others, by Django's Paginator over the step
    numbers: `prefix` + a page number is the URL of that page (a query string, relative to the
    page's own path)."""

    page: int
    per_page: int
    total: int  # steps in the trajectory (the longer one, when comparing)
    prefix: str
    errors: list[int]  # the number of every step marked as an error, on any page

    @cached_property
    def _paginator(self) -> Paginator:
        return Paginator(range(1, self.total + 1), self.per_page, allow_empty_first_page=True)

    @property
    def steps(self) -> range:
        """The numbers of the steps this page shows: a range (a slice of a range is one), empty on
        the only page of a trajectory without steps."""
        return self._paginator.page(self.page).object_list

    @property
    def page_count(self) -> int:
        return self._paginator.num_pages

    @property
    def first(self) -> int:
        return self.steps.start

    @property
    def last(self) -> int:
        return self.steps.stop - 1

    @property
    def previous(self) -> int | None:
        page = self._paginator.page(self.page)
        return page.previous_page_number() if page.has_previous() else None

    @property
    def next(self) -> int | None:
        page = self._paginator.page(self.page)
        return page.next_page_number() if page.has_next() else None

    def page_of(self, number: int) -> int:
        return step_page(number, self.per_page)

    def href(self, number: int) -> str:
        """A link to step `number`: its anchor on this page, or its page and anchor."""
        if self.page_of(number) == self.page:
            return f"#step-{number}"
        return f"{self.prefix}{self.page_of(number)}#step-{number}"

    @property
    def first_error_href(self) -> str:
        return self.href(self.errors[0]) if self.errors else ""

    @property
    def errors_attribute(self) -> str:
        return " ".join(map(str, self.errors))

    @property
    def links(self) -> list[dict]:
        """The page links to show: {"number", "current"} or {"ellipsis": True} (Django's elision)."""
        return [
            {"ellipsis": True} if number == Paginator.ELLIPSIS else {"number": number, "current": number == self.page}
            for number in self._paginator.get_elided_page_range(self.page, on_each_side=2, on_ends=1)
        ]

    def check(self) -> None:
        """Raises ReplayPageError, saying which pages there are, when the trajectory has no page `page`."""
        try:
            self._paginator.validate_number(self.page)
        except InvalidPage as error:
            raise ReplayPageError(
                f"there is no page {self.page} of steps: the trajectory has {self.total:,} step"
                f"{'s' if self.total != 1 else ''}, shown {self.per_page} to a page on "
                f"{self.page_count} page{'s' if self.page_count != 1 else ''}"
            ) from error


def shows_gold_code(attempt: Attempt, header: Header | None = None) -> bool:
    """Whether the attempt's code changes contain the reference implementation."""
    return attempt.run.agent in GOLD_CODE_AGENTS or (header is not None and header.agent in GOLD_CODE_AGENTS)


def _trajectory(attempt: Attempt, window: TrajectoryPage, bounds: ReplayBounds) -> tuple[Trajectory | None, str]:
    """The trajectory's header and this page's steps (its final patch is read apart, bounded)."""
    if not window.exists:
        if attempt.status == Attempt.RUNNING:
            return None, "No steps yet: they appear here as the agent records them."
        if attempt.status == Attempt.QUEUED:
            return None, "No trajectory yet: the attempt has not finished."
        return None, "No trajectory was recorded for this attempt."
    data = window.head
    if isinstance(data, dict):
        steps = []
        for step in window.steps:
            if isinstance(step, dict) and isinstance(step.get("files_changed"), list):
                # Only the files a page lists become objects (an uploaded step may list thousands).
                step = {**step, "files_changed": step["files_changed"][: bounds.step_files],
                        FILES_TOTAL_KEY: len(step["files_changed"])}
            steps.append(step)
        data = {**data, "steps": steps, "final_patch": None}
    try:
        return Trajectory.from_dict(data), ""
    except TrajectoryFormatError as error:
        return None, f"The stored trajectory cannot be read: {error}"


def _first_lines(text: str, count: int) -> tuple[str, bool]:
    """The first `count` lines of `text`, and whether anything was left out."""
    position = -1
    for _ in range(count):
        position = text.find("\n", position + 1)
        if position < 0:
            return text, False
    return text[: position + 1], position + 1 < len(text)


def _patch_url(attempt_id: int) -> str:
    try:
        return reverse("replay:patch", args=[attempt_id])
    except NoReverseMatch:
        return ""


def _run_url(run_id: int) -> str:
    # The run pages belong to the runs app; the replay page must not break while they are absent.
    try:
        return reverse("runs:run_detail", args=[run_id])
    except NoReverseMatch:
        return ""


def _safe_config(config: Any) -> str:
    if not isinstance(config, dict):
        return ""
    return pretty_json({key: ("(hidden)" if _SECRET_KEY.search(str(key)) else value) for key, value in config.items()})


def attempt_replay(*, attempt: Attempt, access: GoldAccess, page: int = 1) -> AttemptReplay:
    """The view data of one page of one attempt for a viewer with `access` to the gold of the run's
    suite (runs.visibility.gold_access; what it withholds: the module docstring). Raises
    ReplayPageError for a page the trajectory does not have."""
    replay = replay_page(attempt=attempt, access=access, page=page, prefix="?page=",
                         first_screen=replay_bounds().first_screen_steps)
    replay.pager.check()
    return replay


@dataclass(frozen=True)
class _Withheld:
    """What one viewer is not shown of one attempt (the module docstring)."""

    code: bool  # a gold-bearing agent's code
    output: bool  # a gold-bearing agent's output, answers and values
    redaction: GoldRedaction  # in every text


def _withheld(attempt: Attempt, access: GoldAccess, header: Header | None) -> _Withheld:
    gold_agent = shows_gold_code(attempt, header)
    redaction = NOTHING if access.code and access.numbers else gold_redaction_for(access=access, paper=attempt.sample.paper, suite=attempt.run.suite)
    return _Withheld(code=gold_agent and not access.code, output=gold_agent and not access.numbers, redaction=redaction)


def replay_page(*, attempt: Attempt, access: GoldAccess, page: int, prefix: str, per_page: int | None = None,
                first_screen: int | None = None) -> AttemptReplay:
    """Page `page` of the attempt's replay, `per_page` steps to a page (None: the replay's own), its
    pager's links `prefix` + a page number. `first_screen`: only that many of the page's steps get
    their whole body (`steps`); every step of the page gets its list line (`lines`). None: every step
    its body, no lines. The caller checks the page (`pager.check()`)."""
    bounds = replay_bounds()
    per_page = per_page or bounds.steps_per_page
    window = _page_window(attempt, page, per_page, bounds)
    trajectory, problem = _trajectory(attempt, window, bounds)
    header = trajectory.header if trajectory else None
    withheld = _withheld(attempt, access, header)
    budget = HighlightBudget()
    patch = _patch_view(attempt, window, withheld, budget, bounds)  # first: the final patch is highlighted first
    steps, lines = _step_views(trajectory, window, withheld, budget, bounds, first_screen)
    answer = _answer_view(attempt, trajectory, withheld, bounds)
    verdicts = _verdicts_view(attempt, access, withheld)
    text = withheld.redaction.text
    return AttemptReplay(
        attempt=attempt,
        sample_id=attempt.sample.sample_id,
        paper_id=attempt.sample.paper.paper_id,
        agent=attempt.run.agent,
        model=attempt.run.model or (header.model if header else ""),
        exit_status=attempt.exit_status or (header.exit_status if header else ""),
        exit_message=text(attempt.exit_message or (header.exit_message if header else "")),
        failure_label=attempt.get_failure_label_display() if attempt.failure_label else "",
        started_at=header.started_at if header else "",
        ended_at=(header.ended_at or "") if header else "",
        config=cut_to_page(_safe_config(header.config), bounds) if header else "",
        steps=steps,
        pager=Pager(page=page, per_page=per_page, total=window.step_count, prefix=prefix, errors=window.errors),
        input_tokens=attempt.input_tokens or (header.input_tokens if header else 0),
        output_tokens=attempt.output_tokens or (header.output_tokens if header else 0),
        cost=_cost(attempt, header),
        agent_seconds=format_seconds(attempt.agent_seconds),
        total_seconds=format_seconds(attempt.total_seconds),
        final_answer_raw=answer.raw,
        final_answer_parsed=answer.parsed,
        final_answer_error=answer.error,
        experiments=verdicts.experiments,
        reported_error=verdicts.reported_error,
        reexecuted_error=verdicts.reexecuted_error,
        final_patch=patch.files,
        out_of_scope=patch.out_of_scope,
        patch_hidden=withheld.code and window.patch_chars > 0,
        gold_code_hidden=withheld.code,
        patch_cut=patch.cut,
        patch_chars=window.patch_chars,
        patch_url=_patch_url(attempt.pk) if window.patch_chars else "",
        run_url=_run_url(attempt.run_id),
        trajectory_problem=problem,
        marks_note=_marks_note(window.step_count),
        lines=lines,
        failure_detail=verdicts.failure_detail,
        reexecution_output=verdicts.reexecution_output,
    )


def _page_window(attempt: Attempt, page: int, per_page: int, bounds: ReplayBounds) -> TrajectoryPage:
    """Page `page` of the attempt's stored trajectory, with the numbers of its steps marked as errors
    (on any page) and the head of its final patch."""
    return trajectory_page(
        attempt_id=attempt.pk, first=(page - 1) * per_page + 1, count=per_page,
        errors_limit=trajectory_limits().steps, patch_chars=bounds.patch_chars,
    )


@dataclass(frozen=True)
class _PatchView:
    """The head of the final patch as one page shows it, and what re-execution dropped from it."""

    files: list[FileDiff]
    out_of_scope: list[FileDiff]
    cut: bool  # only the head of the final patch is shown


def _patch_view(attempt: Attempt, window: TrajectoryPage, withheld: _Withheld, budget: HighlightBudget,
                bounds: ReplayBounds) -> _PatchView:
    """The final patch's first `bounds.patch_lines` lines (none for a viewer who may not see its gold code)."""
    patch, lines_cut = _first_lines(window.patch_head, bounds.patch_lines)
    cut = lines_cut or window.patch_chars > len(window.patch_head)
    if withheld.code:
        return _PatchView(files=[], out_of_scope=[], cut=cut)
    files = patch_files(patch, budget=budget, max_lines=bounds.patch_lines, max_files=bounds.step_files,
                        redaction=withheld.redaction)
    out_of_scope = _out_of_scope(attempt, budget, bounds, bounds.patch_lines - sum(len(f.lines) for f in files),
                                 withheld.redaction)
    return _PatchView(files=files, out_of_scope=out_of_scope, cut=cut)


def _step_views(trajectory: Trajectory | None, window: TrajectoryPage, withheld: _Withheld, budget: HighlightBudget,
                bounds: ReplayBounds, first_screen: int | None) -> tuple[list[StepView], list[StepLine]]:
    """The page's step bodies (the first `first_screen` of them; None: all) and, with `first_screen`,
    every step's list line, each holding its body where it has one."""
    page_steps = trajectory.steps if trajectory else []
    bodies = page_steps if first_screen is None else page_steps[:first_screen]
    steps = [
        step_view(step, number, hide_gold_code=withheld.code, hide_gold_output=withheld.output,
                  redaction=withheld.redaction, budget=budget, bounds=bounds)
        for number, step in enumerate(bodies, start=window.first)
    ]
    if first_screen is None:
        return steps, []
    lines = [step_line(step, number, hide_gold_code=withheld.code, redaction=withheld.redaction)
             for number, step in enumerate(page_steps, start=window.first)]
    for line, body in zip(lines, steps):
        line.body = body
    return steps, lines


def _marks_note(step_count: int) -> str:
    """Why errors are marked among the first steps only ("" when they are marked in every step)."""
    marks_limit = trajectory_limits().steps
    if step_count <= marks_limit:
        return ""
    return (f"This trajectory has {step_count:,} steps, more than the {marks_limit:,} this site now accepts; "
            f"errors are marked among the first {marks_limit:,} only.")


@dataclass(frozen=True)
class _AnswerView:
    raw: str | None  # cut to the page bounds (only answers stored before the limits are longer)
    parsed: str
    error: str


def _answer_view(attempt: Attempt, trajectory: Trajectory | None, withheld: _Withheld, bounds: ReplayBounds) -> _AnswerView:
    """The final answer as this viewer may read it: the attempt's own, else its trajectory's."""
    answer: FinalAnswer | None = trajectory.final_answer if trajectory else None
    raw = attempt.final_answer_raw if attempt.final_answer_raw is not None else (answer.raw if answer else None)
    parsed = attempt.parsed_answer if attempt.parsed_answer is not None else (answer.parsed if answer else None)
    if withheld.output:  # the gold code's own answer and output
        raw, parsed = (OUTPUT_HIDDEN if raw is not None else None), None
    text = withheld.redaction.text
    return _AnswerView(
        raw=text(cut_to_page(as_text(raw), bounds)) if raw is not None else None,
        parsed=text(cut_to_page(pretty_json(parsed), bounds)) if parsed is not None else "",
        error=text(as_text(answer.parse_error)) if answer and parsed is None and not withheld.output else "",
    )


@dataclass(frozen=True)
class _VerdictsView:
    """The scores, errors and re-executed output as this viewer may read them."""

    experiments: list[ExperimentRows]
    reported_error: str
    reexecuted_error: str
    failure_detail: str
    reexecution_output: str


def _verdicts_view(attempt: Attempt, access: GoldAccess, withheld: _Withheld) -> _VerdictsView:
    """The reported and re-executed verdicts: one score table, their errors, why it failed and
    what the re-executed experiments printed (none of a gold-bearing agent's output, `withheld.output`)."""
    reported = attempt.reported_score if isinstance(attempt.reported_score, dict) else {}
    reexecuted = attempt.reexecution_score if isinstance(attempt.reexecution_score, dict) else {}
    text = withheld.redaction.text
    return _VerdictsView(
        experiments=score_table(reported, reexecuted, gold_numbers=access.numbers, values=not withheld.output,
                                redaction=withheld.redaction),
        reported_error=text(as_text(reported.get("error"))),
        reexecuted_error=text(attempt.reexecution_error or as_text(reexecuted.get("error"))),
        failure_detail=text(attempt.failure_detail),
        reexecution_output=(OUTPUT_HIDDEN if withheld.output and attempt.reexecution_output else text(attempt.reexecution_output)),
    )


def _cost(attempt: Attempt, header: Header | None) -> str:
    """The attempt's cost as stored, else as its trajectory's header says."""
    if attempt.cost is not None:
        return format_cost(attempt.cost, False)
    if header is not None:
        return format_cost(header.cost, header.cost_unknown)
    return "unknown"


def _out_of_scope(
    attempt: Attempt, budget: HighlightBudget, bounds: ReplayBounds, lines: int, redaction: GoldRedaction = NOTHING
) -> list[FileDiff]:
    """What re-execution dropped, within what is left of the page's patch lines."""
    edits = [edit for edit in attempt.out_of_scope_edits or [] if isinstance(edit, dict)] \
        if isinstance(attempt.out_of_scope_edits, list) else []
    views = []
    for edit in edits[: bounds.step_files]:
        view = file_diff(FileChange(path=as_text(edit.get("path")), change="dropped", diff=as_text(edit.get("diff")) or None,
                                    note=as_text(edit.get("reason"))), budget=budget, max_lines=max(0, lines), redaction=redaction)
        lines -= len(view.lines)
        views.append(view)
    if len(edits) > bounds.step_files:
        views.append(more_files(len(edits) - bounds.step_files, "dropped: not listed here"))
    return views


# --- step bodies and search on demand (the attempt page's script asks for them) --------------------


def attempt_step_bodies(
    *, attempt: Attempt, access: GoldAccess, first: int, last: int, highlight: bool = True
) -> tuple[list[StepView], str]:
    """The whole bodies of steps `first`..`last` (1-based; the caller bounds how many: at most
    `replay_bounds().steps_per_page`) as the page would render them, by the same step_view, bounds
    and gold rule; and the trajectory's problem ("" when it reads). Steps past the end are
    simply not there. One query: the database slices the steps, no error scan, no patch (and the
    paper's gold redaction, built at most once a while: runs.analysis.gold_text)."""
    bounds = replay_bounds()
    window = trajectory_page(attempt_id=attempt.pk, first=first, count=last - first + 1, errors_limit=0, patch_chars=0)
    trajectory, problem = _trajectory(attempt, window, bounds)
    if trajectory is None:
        return [], problem
    withheld = _withheld(attempt, access, trajectory.header)
    budget = HighlightBudget(None if highlight else 0)
    return [step_view(step, number, hide_gold_code=withheld.code, hide_gold_output=withheld.output,
                      redaction=withheld.redaction, budget=budget, bounds=bounds)
            for number, step in enumerate(trajectory.steps, start=window.first)], ""


# A search within one trajectory: the query's length, and how many step numbers one answer lists
# (a trajectory may now hold 1,000 steps; older ones more, and their text is not indexed past that).
SEARCH_QUERY_CHARS = 200
SEARCH_MAX_STEPS = 1000


@dataclass(frozen=True)
class StepSearch:
    steps: list[int]  # matching step numbers, ascending, at most SEARCH_MAX_STEPS
    indexed: bool  # False: the attempt's steps are not in the search index (yet): outside `first`..`last` nothing matches
    truncated: bool  # more steps match than are listed


def _shown_text(view: StepView) -> str:
    """What a viewer reads of a step's body (the page's search looks at its text the same way)."""
    parts = [view.thought, view.tool, view.call.text() if view.call else view.arguments, view.traceback, view.summary, view.error_kind,
             *(part.text for part in view.observation), *view.notes]
    for diff in view.files:
        parts += [diff.path, diff.note, *(line["text"] for line in diff.lines)]
    return "\n".join(parts)


def attempt_step_search(
    *, attempt: Attempt, query: str, access: GoldAccess, first: int | None = None, last: int | None = None
) -> StepSearch:
    """The steps of the attempt whose text holds `query` (case-insensitive).

    Across the trajectory, from the search index runs.analysis keeps (StepText: a step's thought,
    tool, arguments, observation and traceback as the anonymous replay shows them, gold code left
    out, the first few thousand characters of each), so the answer never reveals more than the
    public replay. Steps `first`..`last` (those the page has not loaded; at most a page of them, the
    caller checks) are searched exactly, in what this viewer would see of their bodies, as the page
    searches the steps it has. Bounded: two small queries over the attempt's own index rows and one
    slice of its trajectory."""
    found = list(
        StepText.objects.filter(attempt_id=attempt.pk, text__icontains=query)
        .order_by("step").values_list("step", flat=True)[: SEARCH_MAX_STEPS + 1]
    )
    truncated = len(found) > SEARCH_MAX_STEPS
    indexed = bool(found) or AttemptAnalysis.objects.filter(attempt_id=attempt.pk).exists()
    steps = found[:SEARCH_MAX_STEPS]
    if first is not None and last is not None:
        views, _ = attempt_step_bodies(attempt=attempt, access=access, first=first, last=last, highlight=False)
        needle = query.lower()
        exact = {view.number for view in views if needle in _shown_text(view).lower()}
        steps = sorted({number for number in steps if not first <= number <= last} | exact)
    return StepSearch(steps=steps, indexed=indexed, truncated=truncated)
