"""One step of a trajectory as a viewer sees it: its whole body (`StepView`: thought, the call as
people read it, the observation with its tracebacks marked, the changed files, tokens and cost) or
its line in the page's list of steps (`StepLine`). The gold rule (runs.analysis.public.
gold_code_redaction) is applied to every text of it, bounded by the page's limits (runs.limits).
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from runs.agents.trajectory import Step
from runs.analysis.gold_text import NOTHING, GoldRedaction
from runs.analysis.public import gold_code_redaction, public_traceback
from runs.benchmark.text import format_seconds, shorten_at_word
from runs.limits import ReplayBounds, replay_bounds
from runs.replay.calls import CODE_OPEN_LINES, CallView, CodeBlock, call_view, listing_block
from runs.replay.diffs import MAX_DIFF_LINES, FileDiff, HighlightBudget, file_diff, more_files
from runs.replay.pages import error_kind, step_marks
from runs.replay.text import as_text, cut_to_page, format_cost, pretty_json

# Observations and diffs longer than this are collapsed (<details>) by default.
COLLAPSE_CHARS = 1200
COLLAPSE_LINES = 20
# A thought longer than this is folded: its first words show, the whole text one click away.
THOUGHT_FOLD_CHARS = 600
THOUGHT_FOLD_LINES = 8
THOUGHT_HEAD_CHARS = 160

_TRUNCATION_MARKER = re.compile(r"\n?\[\.\.\. \d+ characters truncated \.\.\.\]\n?")
# A Python traceback inside an observation: the header, indented frame lines, then the exception line.
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):\n(?:(?:[ \t].*)?\n)*[^\s].*")

# Set on each raw step by runs.replay.presenters (whatever the stored step says): how many files it
# changed before its list was cut to the files a page shows.
FILES_TOTAL_KEY = "_replay_files_total"


@dataclass
class TextPart:
    kind: str  # "" plain, "tb" a traceback, "cut" the truncation marker
    text: str


@dataclass
class StepView:
    number: int  # position in the trajectory, 1-based: the page's #step-N
    index: Any  # as recorded
    started_at: str
    duration: str
    model_seconds: str
    thought: str
    tool: str
    arguments: str  # pretty JSON
    observation: list[TextPart]
    observation_chars: int
    observation_lines: int
    observation_collapsed: bool
    truncated: bool
    error_kind: str  # "" when the step went fine
    traceback: str
    files: list[FileDiff]
    input_tokens: int
    output_tokens: int
    cost: str
    notes: list[str]
    summary: str
    redacted: bool = False  # gold code left out for this viewer
    call: CallView | None = None  # the call as people read it (`arguments` is its JSON, for the search)
    listing: CodeBlock | None = None  # an inspection's observation as numbered lines; `observation` keeps its text
    listing_head: str = ""  # the listing's first line: "code/stats.py lines 1-40 of 120:"
    thought_folded: bool = False  # a long thought: shown as `thought_head`, the whole of it folded under
    thought_head: str = ""

    @property
    def is_error(self) -> bool:
        return bool(self.error_kind)


def observation_parts(text: str) -> list[TextPart]:
    """The observation split into plain text, Python tracebacks and truncation markers."""
    parts: list[TextPart] = []
    position = 0
    marks = sorted(
        [(m.start(), m.end(), "tb") for m in _TRACEBACK.finditer(text)]
        + [(m.start(), m.end(), "cut") for m in _TRUNCATION_MARKER.finditer(text)]
    )
    for start, end, kind in marks:
        if start < position:
            continue  # a marker inside a traceback: keep the traceback whole
        if start > position:
            parts.append(TextPart("", text[position:start]))
        parts.append(TextPart(kind, text[start:end]))
        position = end
    if position < len(text):
        parts.append(TextPart("", text[position:]))
    return parts


def step_error_kind(step: Step) -> str:
    """Why a step counts as an error ("" when it does not), by the rule that also marks the steps
    of other pages (runs.replay.pages.error_kind)."""
    return error_kind(step_marks(0, step))


def _step_files(
    step: Step, *, hidden: bool, budget: HighlightBudget | None, bounds: ReplayBounds, redaction: GoldRedaction = NOTHING
) -> list[FileDiff]:
    """The step's changed files, at most `bounds.step_files` of them and `bounds.step_diff_lines`
    diff lines in all (a step of an upload may change thousands of files)."""
    changes = step.files_changed if isinstance(step.files_changed, list) else []
    total = step.extra.get(FILES_TOTAL_KEY, len(changes)) if isinstance(step.extra, dict) else len(changes)
    files, left = [], bounds.step_diff_lines
    for change in changes[: bounds.step_files]:
        view = file_diff(change, hidden=hidden, budget=budget, max_lines=min(MAX_DIFF_LINES, left), redaction=redaction)
        left -= len(view.lines)
        files.append(view)
    if total > bounds.step_files:
        files.append(more_files(total - bounds.step_files, "changed in this step: not listed here"))
    return files


def _notes(notes: Any, bounds: ReplayBounds, redaction: GoldRedaction = NOTHING) -> list[str]:
    notes = notes if isinstance(notes, list) else [notes] if notes else []
    shown = [redaction.text(cut_to_page(as_text(note), bounds)) for note in notes[: bounds.step_notes]]
    if len(notes) > bounds.step_notes:
        shown.append(f"... and {len(notes) - bounds.step_notes:,} more notes, not shown here")
    return shown


def step_view(
    step: Step, number: int, *, hide_gold_code: bool, budget: HighlightBudget | None = None,
    bounds: ReplayBounds | None = None, hide_gold_output: bool = False, redaction: GoldRedaction = NOTHING,
) -> StepView:
    """One step as a viewer sees it: the rule of runs.analysis.public.gold_code_redaction (with
    `hide_gold_code`, `hide_gold_output` and `redaction`) on every text of it."""
    bounds = bounds or replay_bounds()
    tool = as_text(step.tool)
    observation = cut_to_page(as_text(step.observation), bounds)
    shown = gold_code_redaction(
        tool=tool, thought=cut_to_page(as_text(step.thought), bounds), arguments=step.arguments, observation=observation,
        changes_files=bool(step.files_changed), hide_gold_code=hide_gold_code, hide_gold_output=hide_gold_output,
        redaction=redaction,
    )
    redacted, thought, arguments, observation = shown.redacted, shown.thought, shown.arguments, shown.observation
    files = _step_files(step, hidden=hide_gold_code, budget=budget, bounds=bounds, redaction=redaction)
    call = call_view(tool, arguments, redacted=redacted, budget=budget, bounds=bounds)
    listing = listing_block(observation, budget=budget) if call is not None and call.kind == "read" else None
    if call is not None and call.kind in ("file", "edit", "script"):
        # What the write changed, open beside the file: the diff against what was there before.
        for diff in files:
            if diff.change == "modified" and not diff.hidden and diff.line_count <= CODE_OPEN_LINES:
                diff.collapsed = False
    lines = observation.count("\n") + 1 if observation else 0
    thought_lines = thought.count("\n") + 1
    return StepView(
        number=number,
        index=step.index,
        started_at=as_text(step.started_at),
        duration=format_seconds(step.duration),
        model_seconds=format_seconds(step.model_seconds) if step.model_seconds else "",
        thought=thought,
        tool=tool,
        arguments=cut_to_page(pretty_json(arguments), bounds) if arguments not in (None, {}) else "",
        observation=observation_parts(observation),
        observation_chars=len(observation),
        observation_lines=lines,
        observation_collapsed=len(observation) > COLLAPSE_CHARS or lines > COLLAPSE_LINES,
        truncated=bool(step.truncated) or bool(_TRUNCATION_MARKER.search(observation)),
        error_kind=step_error_kind(step),
        traceback=public_traceback(cut_to_page(as_text(step.traceback), bounds), hide_gold_output=hide_gold_output, redaction=redaction),
        files=files,
        input_tokens=step.input_tokens if isinstance(step.input_tokens, int) else 0,
        output_tokens=step.output_tokens if isinstance(step.output_tokens, int) else 0,
        cost=format_cost(step.cost, bool(step.cost_unknown)),
        notes=_notes(step.notes, bounds, redaction),
        summary=redaction.text(cut_to_page(as_text(step.summary), bounds)),
        redacted=redacted,
        call=call,
        listing=listing[1] if listing else None,
        listing_head=listing[0] if listing else "",
        thought_folded=len(thought) > THOUGHT_FOLD_CHARS or thought_lines > THOUGHT_FOLD_LINES,
        thought_head=shorten_at_word(thought, THOUGHT_HEAD_CHARS),
    )


# --- a step's line in the page's list ------------------------------------------------------------------

# Characters of a step's one-line summary in the page's list of steps.
LINE_SUMMARY_CHARS = 160


@dataclass
class StepLine:
    """One step of a page as the page lists it: its number, tool, error badge and a one-line
    summary; `body` is the whole StepView for the steps of the first screen, None for the steps
    whose body the browser fetches on demand (runs.replay.views.attempt_steps)."""

    number: int
    tool: str
    error_kind: str
    summary: str
    body: StepView | None = None

    @property
    def is_error(self) -> bool:
        return bool(self.error_kind)


def _one_line(text: str) -> str:
    for line in text.splitlines():
        line = line.strip()
        if line:
            return line if len(line) <= LINE_SUMMARY_CHARS else line[: LINE_SUMMARY_CHARS - 1] + "…"
    return ""


def step_line(step: Step, number: int, *, hide_gold_code: bool, redaction: GoldRedaction = NOTHING) -> StepLine:
    """The list line of a step: the first line of its thought, else of its arguments, as this
    viewer may see them (the gold rule of step_view applies)."""
    tool = as_text(step.tool)
    shown = gold_code_redaction(
        tool=tool, thought=as_text(step.thought)[:4 * LINE_SUMMARY_CHARS], arguments=step.arguments, observation="",
        changes_files=bool(step.files_changed), hide_gold_code=hide_gold_code, redaction=redaction,
    )
    summary = _one_line(shown.thought)
    if not summary and shown.arguments not in (None, {}, ""):
        arguments = shown.arguments
        if isinstance(arguments, dict) and len(arguments) > 0:
            arguments = next(iter(arguments.values()))
        summary = _one_line(arguments if isinstance(arguments, str) else pretty_json(arguments)[:4 * LINE_SUMMARY_CHARS])
    return StepLine(number=number, tool=tool, error_kind=step_error_kind(step), summary=summary)
