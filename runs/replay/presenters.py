"""Trajectory replay: an Attempt's stored trajectory and scores turned into plain view data.

Everything here returns text and flags, never HTML: templates render it with autoescaping, so
whatever a model or an uploader wrote (thoughts, tool arguments, observations, file names, diffs,
answers, patches) reaches the browser as text. Syntax highlighting is a list of {"c": css class,
"t": text} segments per diff line, computed here and escaped by the template like any other text.

Reading is one query for the attempt (with its run, sample and paper), one for the page of its
trajectory (runs.replay.pages: the database slices the stored JSON) plus one small query for
the other attempts at the same sample; nothing is queried per step. A page shows
`REPLAY_STEPS_PER_PAGE` steps, each with its text cut and its diffs bounded (runs.limits), and the
head of the final patch, so the work of one request is bounded whatever was stored; the whole
patch is a plain-text download. The attempt page builds whole StepViews for its first screen of
steps only (`first_screen_steps`) and a StepLine (number, tool, error, one-line summary) for every
step of the page; `attempt_step_bodies` builds the others when the page's script asks, and
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

import json
import math
import re
import shlex
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from django.core.paginator import Paginator
from django.db.models import QuerySet
from django.db.models.fields.json import KT
from django.urls import NoReverseMatch, reverse
from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer
from pygments.token import STANDARD_TYPES, _TokenType

from runs.agents.trajectory import (
    FileChange,
    FinalAnswer,
    Header,
    Step,
    Trajectory,
    TrajectoryFormatError,
)
from runs.analysis.gold_text import NOTHING, GoldRedaction, gold_redaction_for
from runs.analysis.public import GOLD_CODE_AGENTS, HIDDEN, OUTPUT_HIDDEN, gold_code_redaction, public_traceback
from runs.benchmark.patches import PatchError, parse_patch
from runs.benchmark.text import format_seconds, shorten_at_word
from runs.limits import ReplayBounds, cut_text, replay_bounds, trajectory_limits
from runs.models import Attempt, AttemptAnalysis, StepText, TrajectorySource
from runs.replay.pages import TrajectoryPage, error_kind, step_marks, trajectory_page
from runs.visibility import GoldAccess, runs_visible_q

# The gold-code rule (which agents, which tools) is runs.analysis.public's, shared with the search.
GOLD_CODE_NOTICE = "The reference implementation of this suite, and what it printed, are shown to staff only."
# In the score table, for a viewer who may not see the gold numbers.
WITHHELD = "withheld"

# Observations and diffs longer than this are collapsed (<details>) by default.
COLLAPSE_CHARS = 1200
COLLAPSE_LINES = 20
# At most this many lines of one diff are put in the page (the harness already cuts diffs at
# 50,000 characters; this bounds the DOM of a long trajectory). A step shows at most
# runs.limits.PAGE_STEP_DIFF_LINES in all, and the final patch PAGE_PATCH_LINES.
MAX_DIFF_LINES = 600
# Characters of changed lines token-highlighted per page (see HighlightBudget).
HIGHLIGHT_CHARS = 16_000
# The Pygments style whose token classes colour the code. Its rules are in static/css/replay.css,
# prefixed "tk-" (no inline styles: the page's CSP forbids them); tests/replay check that the two agree.
HIGHLIGHT_STYLE = "vs"

_TRUNCATION_MARKER = re.compile(r"\n?\[\.\.\. \d+ characters truncated \.\.\.\]\n?")
# A Python traceback inside an observation: the header, indented frame lines, then the exception line.
_TRACEBACK = re.compile(r"Traceback \(most recent call last\):\n(?:(?:[ \t].*)?\n)*[^\s].*")
_SECRET_KEY = re.compile(r"key|token|secret|password|authorization", re.IGNORECASE)


# --- Python highlighting (Pygments) ----------------------------------------------------------------

_PYTHON_LEXER = PythonLexer()
# Token classes the style gives a look; other tokens stay plain text, so a line holds a few spans.
_STYLED_CLASSES = frozenset(HtmlFormatter(style=HIGHLIGHT_STYLE).class2style)


@cache
def _token_class(token_type: _TokenType) -> str:
    """Pygments' short CSS class of a token type ("k", "s1", "c1", ...), "" for an unstyled one."""
    while token_type not in STANDARD_TYPES:
        token_type = token_type.parent
    css = STANDARD_TYPES[token_type]
    return css if css in _STYLED_CLASSES else ""


def highlight_python(line: str) -> list[dict[str, str]]:
    """`line` as segments {"c": Pygments token class or "" (plain), "t": text}.

    One line at a time (a diff interleaves old and new lines), through the lexer's unprocessed
    tokens, which cover the text exactly: joining the segments' "t" gives `line` back, so the
    highlighting cannot change what is shown. Neighbouring tokens of one class are one segment.
    Segments are dicts because the template looks them up thousands of times per page and a dict
    is Django's cheapest lookup.
    """
    segments: list[dict[str, str]] = []
    for _, token_type, text in _PYTHON_LEXER.get_tokens_unprocessed(line):
        css = _token_class(token_type)
        if segments and segments[-1]["c"] == css:
            segments[-1]["t"] += text
        else:
            segments.append({"c": css, "t": text})
    return segments



def highlight_python_lines(text: str) -> list[list[dict[str, str]]]:
    """Each line of `text` (a whole file: split at "\n", without it) as highlight_python's
    segments. The file is lexed whole, so a docstring or a bracket spanning lines is coloured as
    Python reads it, then the tokens are split at the newlines; the segments of a line join to it."""
    lines: list[list[dict[str, str]]] = [[]]
    for _, token_type, value in _PYTHON_LEXER.get_tokens_unprocessed(text):
        css = _token_class(token_type)
        for position, piece in enumerate(value.split("\n")):
            if position:
                lines.append([])
            if not piece:
                continue
            segments = lines[-1]
            if segments and segments[-1]["c"] == css:
                segments[-1]["t"] += piece
            else:
                segments.append({"c": css, "t": piece})
    return lines

class HighlightBudget:
    """How many more characters of changed lines may be token-highlighted on one page.

    Line colours (added, removed, hunk) are always there; token colours cost lexing time (Pygments
    takes about 3 µs a character of typical code, 12 µs at worst: a token per character) and a few
    elements per line, so a page stops adding them after `HIGHLIGHT_CHARS` characters (the final
    patch is highlighted first) and a 500-step trajectory stays quick to render and light in the
    browser. A diff is highlighted whole or not at all.
    """

    def __init__(self, chars: int | None = None) -> None:
        self.left = HIGHLIGHT_CHARS if chars is None else chars

    def take(self, count: int) -> bool:
        if count > self.left:
            self.left = 0
            return False
        self.left -= count
        return True


# --- diffs -------------------------------------------------------------------------------------------


@dataclass
class FileDiff:
    """One file's change as display lines. `hidden` means the diff exists but is not shown.

    Each line is a dict {"kind", "text", "segs"}: kind "add", "del", "hunk", "meta" (file headers),
    "ctx" or "note" (a "\\ No newline at end of file" line); segs the highlighted segments or None.
    """

    path: str
    change: str
    note: str = ""
    lines: list[dict] = field(default_factory=list)
    additions: int = 0
    deletions: int = 0
    omitted_lines: int = 0
    has_diff: bool = False
    hidden: bool = False
    collapsed: bool = True
    omitted_hint: str = "the final patch holds the whole change"

    @property
    def line_count(self) -> int:
        return len(self.lines) + self.omitted_lines


_LINE_KINDS = {"+": "add", "-": "del", "\\": "note"}


def _line_kind(raw: str) -> str:
    if raw.startswith(("+++ ", "--- ", "diff ", "Binary files ")):
        return "meta"
    if raw.startswith("@@"):
        return "hunk"
    return _LINE_KINDS.get(raw[:1], "ctx")


def diff_lines(
    diff: str, *, python: bool, max_lines: int | None = MAX_DIFF_LINES, budget: HighlightBudget | None = None,
    redaction: GoldRedaction = NOTHING,
) -> tuple[list[dict], int, int, int]:
    """(lines, additions, deletions, omitted) of a unified diff. Changed lines of Python files get
    token segments while `budget` allows (no budget: always). In a multi-file patch, each
    `+++ b/path` header decides whether the following lines are Python. `redaction` withholds the
    gold quoted by any line's text (the agent's added lines too: a line of gold is gold, whoever wrote it)."""
    raw_lines = diff.splitlines()
    kinds = [_line_kind(raw) for raw in raw_lines]
    additions, deletions = kinds.count("add"), kinds.count("del")
    omitted = 0
    if max_lines is not None and len(raw_lines) > max_lines:
        omitted = len(raw_lines) - max_lines
        raw_lines, kinds = raw_lines[:max_lines], kinds[:max_lines]
    if redaction:
        raw_lines = [raw[:1] + redaction.text(raw[1:]) if kind in ("add", "del", "ctx") else raw
                     for raw, kind in zip(raw_lines, kinds)]
    changed_chars = sum(len(raw) for raw, kind in zip(raw_lines, kinds) if kind in ("add", "del"))
    highlight = budget.take(changed_chars) if budget is not None else True
    lines: list[dict] = []
    is_python = python
    for raw, kind in zip(raw_lines, kinds):
        segments = None
        if kind == "meta" and raw.startswith("+++ "):
            is_python = raw.rstrip().endswith(".py")
        elif highlight and is_python and (kind == "add" or kind == "del"):
            segments = [{"c": "", "t": raw[0]}, *highlight_python(raw[1:])]
        lines.append({"kind": kind, "text": raw, "segs": segments})
    return lines, additions, deletions, omitted


_CHANGES = frozenset({"added", "modified", "deleted", "dropped"})


def file_diff(
    change: FileChange, *, hidden: bool = False, budget: HighlightBudget | None = None, max_lines: int | None = MAX_DIFF_LINES,
    redaction: GoldRedaction = NOTHING,
) -> FileDiff:
    """One step's change to one file, at most `max_lines` of it shown. `hidden`: counted, never
    kept (the lines hold gold code)."""
    path = _text(change.path)
    kind = _text(change.change)
    view = FileDiff(path=path, change=kind if kind in _CHANGES else "changed", note=_text(change.note),
                    has_diff=change.diff is not None)
    if change.diff is None:
        return view
    if hidden:
        _, view.additions, view.deletions, _ = diff_lines(_text(change.diff), python=False, max_lines=0)
        view.hidden = True
        return view
    view.lines, view.additions, view.deletions, view.omitted_lines = diff_lines(
        _text(change.diff), python=path.endswith(".py"), budget=budget, max_lines=max_lines, redaction=redaction
    )
    return view


def patch_files(
    patch: str, *, budget: HighlightBudget | None = None, max_lines: int | None = None, max_files: int | None = None,
    redaction: GoldRedaction = NOTHING,
) -> list[FileDiff]:
    """A multi-file unified diff split per file, shown open; at most `max_lines` lines in all and
    `max_files` files (None: all), then one entry saying how many more files there are.

    Sections come from `runs.benchmark.patches.parse_patch`, the parser re-execution uses. Stored patches
    predate it and may be malformed (or touch files outside code/), and a page must still show
    them: on PatchError the text is split leniently at each "--- a/" or "--- /dev/null" line.
    """
    try:
        sections = [(section.path, section.change, section.text) for section in parse_patch(patch)]
    except PatchError:
        sections = _patch_sections_lenient(patch)
    files: list[FileDiff] = []
    left = max_lines
    for path, change, text in sections[:max_files]:
        lines, additions, deletions, omitted = diff_lines(text, python=path.endswith(".py"), max_lines=left, budget=budget,
                                                          redaction=redaction)
        if left is not None:
            left -= len(lines)
        files.append(FileDiff(path=path, change=change, lines=lines, additions=additions, deletions=deletions,
                              omitted_lines=omitted, has_diff=True, collapsed=False,
                              omitted_hint="download the whole patch to read them"))
    if max_files is not None and len(sections) > max_files:
        files.append(_more_files(len(sections) - max_files, "in the patch: not listed here; download the whole patch"))
    return files


def _more_files(count: int, where: str) -> FileDiff:
    return FileDiff(path="…", change="changed", note=f"{count:,} more file{'s' if count != 1 else ''} {where}")


def _patch_sections_lenient(patch: str) -> list[tuple[str, str, str]]:
    """(path, change, text) per "--- " header, guessed from the header lines; never raises."""
    sections = []
    for chunk in re.split(r"(?m)^(?=--- (?:a/|/dev/null))", patch):
        if not chunk.strip():
            continue
        new = re.search(r"(?m)^\+\+\+ (?:b/)?(.*)$", chunk)
        old = re.search(r"(?m)^--- (?:a/)?(.*)$", chunk)
        path = (new.group(1) if new else old.group(1) if old else "patch").strip()
        if path == "/dev/null" and old:
            path = old.group(1).strip()
        change = "added" if "--- /dev/null" in chunk else "deleted" if "+++ /dev/null" in chunk else "modified"
        sections.append((path, change, chunk))
    return sections


# --- steps -------------------------------------------------------------------------------------------


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


def _text(value: Any) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def pretty_json(value: Any) -> str:
    try:
        return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False, default=str)
    except (TypeError, ValueError):
        return repr(value)


def format_cost(cost: Any, unknown: bool) -> str:
    known = isinstance(cost, (int, float)) and not isinstance(cost, bool) and math.isfinite(cost)
    if not known or (unknown and not cost):
        return "unknown"
    text = f"${cost:.4f}" if cost < 1 else f"${cost:.2f}"
    return f"{text} + unknown" if unknown else text


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


# Set on each raw step by _trajectory (whatever the stored step says): how many files it changed
# before its list was cut to the files a page shows.
_FILES_TOTAL = "_replay_files_total"


def _step_files(
    step: Step, *, hidden: bool, budget: HighlightBudget | None, bounds: ReplayBounds, redaction: GoldRedaction = NOTHING
) -> list[FileDiff]:
    """The step's changed files, at most `bounds.step_files` of them and `bounds.step_diff_lines`
    diff lines in all (a step of an upload may change thousands of files)."""
    changes = step.files_changed if isinstance(step.files_changed, list) else []
    total = step.extra.get(_FILES_TOTAL, len(changes)) if isinstance(step.extra, dict) else len(changes)
    files, left = [], bounds.step_diff_lines
    for change in changes[: bounds.step_files]:
        view = file_diff(change, hidden=hidden, budget=budget, max_lines=min(MAX_DIFF_LINES, left), redaction=redaction)
        left -= len(view.lines)
        files.append(view)
    if total > bounds.step_files:
        files.append(_more_files(total - bounds.step_files, "changed in this step: not listed here"))
    return files


def _cut(value: str, bounds: ReplayBounds) -> str:
    # Only trajectories stored before the limits hold longer text; the marker says what was left out.
    return cut_text(value, bounds.text_bytes)[0] if len(value) > bounds.text_bytes // 4 else value


def _notes(notes: Any, bounds: ReplayBounds, redaction: GoldRedaction = NOTHING) -> list[str]:
    notes = notes if isinstance(notes, list) else [notes] if notes else []
    shown = [redaction.text(_cut(_text(note), bounds)) for note in notes[: bounds.step_notes]]
    if len(notes) > bounds.step_notes:
        shown.append(f"... and {len(notes) - bounds.step_notes:,} more notes, not shown here")
    return shown


# --- tool calls as people read them ------------------------------------------------------------------
#
# A step's call is shown in the tool's own terms, never as the JSON the model sent: a command as a
# shell block, a file written as the file (numbered, Python highlighted; the step's diff against
# what was there before is in its changed files, shown open), an inspection as the lines it read
# with their numbers, and anything else (another harness's tools, arguments not in the tool's form)
# as formatted JSON. Every presentation is built from the arguments gold_code_redaction left for
# this viewer, so it can show no more than the JSON did.

# Lines of one file, script or listing put in the page (as MAX_DIFF_LINES for a diff).
MAX_CODE_LINES = MAX_DIFF_LINES
# A file or listing is shown open up to this many lines, folded beyond (and a diff likewise).
CODE_OPEN_LINES = 80
# A thought longer than this is folded: its first words show, the whole text one click away.
THOUGHT_FOLD_CHARS = 600
THOUGHT_FOLD_LINES = 8
THOUGHT_HEAD_CHARS = 160

# Other harnesses' tools (imported trajectories, runs.agents.foreign) that run one shell command,
# with the argument that holds it: mini-swe-agent and SWE-agent ("bash", command), Inspect ("bash",
# cmd), the original AutoExperiment harness ("execute_bash", command).
_SHELL_ARGUMENT = {"command_line": "command", "bash": ("command", "cmd"), "execute_bash": "command"}


@dataclass
class CodeBlock:
    """Text shown as numbered lines: a file written, a script, the lines an inspection read.

    Each line is a dict {"n": its number in the file ("" for a line that is none of the file's, such
    as a tool's note), "text", "segs": highlighted segments or None}; `hidden`: the text is gold
    code this viewer may not see (no lines are kept)."""

    lines: list[dict] = field(default_factory=list)
    omitted_lines: int = 0
    collapsed: bool = False
    hidden: bool = False
    python: bool = False

    @property
    def line_count(self) -> int:
        return len(self.lines) + self.omitted_lines


@dataclass
class CallView:
    """A step's tool call as people read it.

    `kind`: "command" (`command`, a shell block), "file" (a file written: `target` its path, `code`
    the file), "script" (a script run: `command` how, `code` the script when the call wrote it),
    "read" (an inspection: `target` the lines asked for; the lines themselves are the step's
    listing), "edit" and "ask" (a path and, in `fields`, an instruction or a question), "answer"
    (the final answer, formatted, in `json`), "call" (another of our tools: `target` in words), or
    "json" (an unknown tool, or arguments not in the tool's form: `json`, formatted). `fields` are
    the other arguments as (name, text)."""

    kind: str
    title: str
    target: str = ""
    command: str = ""
    code: CodeBlock | None = None
    fields: list[tuple[str, str]] = field(default_factory=list)
    json: str = ""

    def text(self) -> str:
        """What a reader sees of the call, for the search."""
        code = [line["text"] for line in self.code.lines] if self.code else []
        return "\n".join([self.target, self.command, *code, *(f"{name} {value}" for name, value in self.fields), self.json])


class _NotTheToolsForm(ValueError):
    """The arguments do not have the form the tool takes (a content that is no string, a missing
    path): the call is shown as its JSON."""


def code_block(
    text: str, *, python: bool, budget: HighlightBudget | None, bounds: ReplayBounds, max_lines: int = MAX_CODE_LINES
) -> CodeBlock:
    """`text` as numbered lines from 1, at most `max_lines` of them; Python highlighted (the whole
    block or none of it, while `budget` allows)."""
    raw = _cut(text, bounds).split("\n")
    if len(raw) > 1 and raw[-1] == "":
        raw.pop()  # the file's final newline ends its last line; it starts none
    omitted = max(0, len(raw) - max_lines)
    raw = raw[:max_lines]
    segments = None
    if python and (budget is None or budget.take(sum(map(len, raw)))):
        segments = highlight_python_lines("\n".join(raw))
    lines = [{"n": number, "text": line, "segs": segments[number - 1] if segments else None}
             for number, line in enumerate(raw, start=1)]
    return CodeBlock(lines=lines, omitted_lines=omitted, collapsed=len(raw) + omitted > CODE_OPEN_LINES, python=python)


# An inspect_file_lines observation (runs.agents.tools.inspect_file_lines): a head line, then each
# line numbered by tools._numbered ("{number:>width} | {line}"), maybe a note after them.
_LISTING_HEAD = re.compile(r"(?P<path>.+) lines \d+-\d+ of \d+:")
_LISTING_LINE = re.compile(r" *(\d+) \| ?(.*)")


def listing_block(observation: str, *, budget: HighlightBudget | None) -> tuple[str, CodeBlock] | None:
    """(head, lines) of an inspection's observation, each line with the number the tool gave it;
    None when the observation is not a listing (an error, or hidden)."""
    head, _, body = observation.partition("\n")
    found = _LISTING_HEAD.fullmatch(head)
    if not found or not body:
        return None
    raw = body.split("\n")
    omitted = max(0, len(raw) - MAX_CODE_LINES)
    lines = []
    for line in raw[:MAX_CODE_LINES]:
        numbered = _LISTING_LINE.fullmatch(line)
        lines.append({"n": int(numbered[1]), "text": numbered[2], "segs": None} if numbered else {"n": "", "text": line, "segs": None})
    code = [line for line in lines if line["n"] != ""]
    python = found["path"].endswith(".py")
    if python and code and (budget is None or budget.take(sum(len(line["text"]) for line in code))):
        for line, segments in zip(code, highlight_python_lines("\n".join(line["text"] for line in code))):
            line["segs"] = segments
    return head, CodeBlock(lines=lines, omitted_lines=omitted, collapsed=len(lines) + omitted > CODE_OPEN_LINES, python=python)


def _string(arguments: dict, name: str, *, required: bool = True) -> str:
    value = arguments.get(name)
    if value is None and not required:
        return ""
    if not isinstance(value, str):
        raise _NotTheToolsForm(name)
    return value


def _line_number(arguments: dict, name: str) -> int | None:
    value = arguments.get(name)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
        raise _NotTheToolsForm(name)
    return int(value)


def _fields(arguments: dict, shown: tuple[str, ...], *, redacted: bool) -> list[tuple[str, str]]:
    """The arguments not shown otherwise, by name: a timeout in seconds, text as it is, anything
    else as compact JSON; a value gold_code_redaction hid is left out (the step says why)."""
    fields = []
    for name, value in arguments.items():
        if name in shown or value is None or (redacted and value == HIDDEN):
            continue
        if name == "timeout" and isinstance(value, (int, float)) and not isinstance(value, bool):
            text = f"{value:g} s"
        elif isinstance(value, str):
            text = value
        else:
            text = json.dumps(value, ensure_ascii=False, default=str)
        fields.append((_text(name), text))
    return fields


def _file_code(content: str, path: str, *, redacted: bool, budget: HighlightBudget | None, bounds: ReplayBounds,
               python: bool | None = None) -> CodeBlock:
    if redacted and content == HIDDEN:
        return CodeBlock(hidden=True)
    return code_block(content, python=path.endswith(".py") if python is None else python, budget=budget, bounds=bounds)


def _present_call(tool: str, arguments: dict, *, redacted: bool, budget: HighlightBudget | None,
                  bounds: ReplayBounds) -> CallView | None:
    """The presentation of one of the tools this site knows; None for another tool."""
    def rest(*shown: str) -> list[tuple[str, str]]:
        return _fields(arguments, shown, redacted=redacted)

    if tool in _SHELL_ARGUMENT:
        names = _SHELL_ARGUMENT[tool]
        name = next((n for n in ((names,) if isinstance(names, str) else names) if n in arguments), "command")
        return CallView("command", "Command", command=_cut(_string(arguments, name), bounds), fields=rest(name))
    if tool == "write_file":
        path = _string(arguments, "path")
        return CallView("file", "File written", target=path,
                        code=_file_code(_string(arguments, "content"), path, redacted=redacted, budget=budget, bounds=bounds),
                        fields=rest("path", "content"))
    if tool in ("execute_python_script", "execute_bash_script"):
        path, content = _string(arguments, "path"), _string(arguments, "content", required=False)
        words = _string(arguments, "arguments", required=False)
        interpreter = "python3" if tool == "execute_python_script" else "bash"
        command = f"{interpreter} {shlex.quote(path)}" + (f" {words}" if words else "")
        code = None
        if "content" in arguments and arguments["content"] is not None:
            code = _file_code(content, path, redacted=redacted, budget=budget, bounds=bounds,
                              python=tool == "execute_python_script")
        return CallView("script", "Script run", target=path if code else "", command=_cut(command, bounds), code=code,
                        fields=rest("path", "content", "arguments"))
    if tool == "python":  # Inspect's python tool: the code is run as it is
        return CallView("script", "Python run", code=_file_code(_string(arguments, "code"), "", redacted=redacted,
                                                             budget=budget, bounds=bounds, python=True), fields=rest("code"))
    if tool == "inspect_file_lines":
        path = _string(arguments, "path")
        start, end = _line_number(arguments, "start_line"), _line_number(arguments, "end_line")
        where = f"lines {start or 1}–{end}" if end is not None else f"from line {start or 1}"
        return CallView("read", "Read", target=f"{path}, {where}", fields=rest("path", "start_line", "end_line"))
    if tool in ("edit_file", "understand_file"):
        path = _string(arguments, "path")
        asked = "instruction" if tool == "edit_file" else "question"
        _string(arguments, asked)
        return CallView("edit" if tool == "edit_file" else "ask", "Edit" if tool == "edit_file" else "Question about",
                        target=path, fields=rest("path"))
    if tool == "list_files":
        recursive = arguments.get("recursive")
        if recursive is not None and not isinstance(recursive, bool):
            raise _NotTheToolsForm("recursive")
        path = _string(arguments, "path", required=False) or "."
        return CallView("call", "List files", target=path + (" (with subdirectories)" if recursive else ""),
                        fields=rest("path", "recursive"))
    if tool == "change_directory":
        return CallView("call", "Change directory", target=_string(arguments, "path"), fields=rest("path"))
    if tool == "move":
        return CallView("call", "Move", target=f"{_string(arguments, 'source')} → {_string(arguments, 'destination')}",
                        fields=rest("source", "destination"))
    if tool == "final_answer":
        if "answer" not in arguments:
            raise _NotTheToolsForm("answer")
        answer = arguments["answer"]
        if isinstance(answer, str):  # the tool takes the answer as JSON text too
            try:
                answer = json.loads(answer)
            except ValueError:
                pass
        return CallView("answer", "Final answer", json=_cut(answer if isinstance(answer, str) else pretty_json(answer), bounds),
                        fields=rest("answer"))
    return None


def call_view(
    tool: str, arguments: Any, *, redacted: bool = False, budget: HighlightBudget | None = None,
    bounds: ReplayBounds | None = None,
) -> CallView | None:
    """How a step's call reads (None: a step without arguments). `arguments` are those this viewer
    may see (gold_code_redaction's), `redacted` whether they were redacted: the content a gold
    write hid becomes a hidden block. An unknown tool, or arguments not in the tool's form, show as
    formatted JSON: whatever was recorded is shown, never dropped."""
    bounds = bounds or replay_bounds()
    if arguments in (None, {}, ""):
        return None
    if isinstance(arguments, dict):
        try:
            view = _present_call(tool, arguments, redacted=redacted, budget=budget, bounds=bounds)
        except _NotTheToolsForm:
            view = None
        if view is not None:
            return view
    return CallView("json", "Arguments", json=_cut(pretty_json(arguments), bounds))


def step_view(
    step: Step, number: int, *, hide_gold_code: bool, budget: HighlightBudget | None = None,
    bounds: ReplayBounds | None = None, hide_gold_output: bool = False, redaction: GoldRedaction = NOTHING,
) -> StepView:
    """One step as a viewer sees it: the rule of runs.analysis.public.gold_code_redaction (with
    `hide_gold_code`, `hide_gold_output` and `redaction`) on every text of it."""
    bounds = bounds or replay_bounds()
    tool = _text(step.tool)
    observation = _cut(_text(step.observation), bounds)
    shown = gold_code_redaction(
        tool=tool, thought=_cut(_text(step.thought), bounds), arguments=step.arguments, observation=observation,
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
        started_at=_text(step.started_at),
        duration=format_seconds(step.duration),
        model_seconds=format_seconds(step.model_seconds) if step.model_seconds else "",
        thought=thought,
        tool=tool,
        arguments=_cut(pretty_json(arguments), bounds) if arguments not in (None, {}) else "",
        observation=observation_parts(observation),
        observation_chars=len(observation),
        observation_lines=lines,
        observation_collapsed=len(observation) > COLLAPSE_CHARS or lines > COLLAPSE_LINES,
        truncated=bool(step.truncated) or bool(_TRUNCATION_MARKER.search(observation)),
        error_kind=step_error_kind(step),
        traceback=public_traceback(_cut(_text(step.traceback), bounds), hide_gold_output=hide_gold_output, redaction=redaction),
        files=files,
        input_tokens=step.input_tokens if isinstance(step.input_tokens, int) else 0,
        output_tokens=step.output_tokens if isinstance(step.output_tokens, int) else 0,
        cost=format_cost(step.cost, bool(step.cost_unknown)),
        notes=_notes(step.notes, bounds, redaction),
        summary=redaction.text(_cut(_text(step.summary), bounds)),
        redacted=redacted,
        call=call,
        listing=listing[1] if listing else None,
        listing_head=listing[0] if listing else "",
        thought_folded=len(thought) > THOUGHT_FOLD_CHARS or thought_lines > THOUGHT_FOLD_LINES,
        thought_head=shorten_at_word(thought, THOUGHT_HEAD_CHARS),
    )


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
    tool = _text(step.tool)
    shown = gold_code_redaction(
        tool=tool, thought=_text(step.thought)[:4 * LINE_SUMMARY_CHARS], arguments=step.arguments, observation="",
        changes_files=bool(step.files_changed), hide_gold_code=hide_gold_code, redaction=redaction,
    )
    summary = _one_line(shown.thought)
    if not summary and shown.arguments not in (None, {}, ""):
        arguments = shown.arguments
        if isinstance(arguments, dict) and len(arguments) > 0:
            arguments = next(iter(arguments.values()))
        summary = _one_line(arguments if isinstance(arguments, str) else pretty_json(arguments)[:4 * LINE_SUMMARY_CHARS])
    return StepLine(number=number, tool=tool, error_kind=step_error_kind(step), summary=summary)


# --- final answer against gold -------------------------------------------------------------------


@dataclass
class ScoreCell:
    """One reported (or re-executed) number against its gold number."""

    predicted: str
    predicted_full: str
    relative_error: str
    passed: bool
    reason: str


@dataclass
class NumberRow:
    key: str
    gold: str
    gold_full: str
    reported: ScoreCell | None
    reexecuted: ScoreCell | None

    @property
    def mismatch(self) -> bool:
        """The reported number passes but the re-executed code does not print it."""
        return bool(self.reported and self.reported.passed and self.reexecuted is not None and not self.reexecuted.passed)


@dataclass
class ExperimentRows:
    label: str
    exp_id: Any
    tolerance: str
    reported_passed: bool | None
    reexecuted_passed: bool | None
    reported_error: str
    reexecuted_error: str
    rows: list[NumberRow]


def format_number(value: Any) -> tuple[str, str]:
    """(short, full) display of a score's number: floats to 6 significant digits, full repr in
    `full`; non-finite floats arrive as the strings "NaN"/"Infinity"."""
    if value is None:
        return "—", ""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _text(value), _text(value)
    if isinstance(value, int):
        return str(value), str(value)
    if not math.isfinite(value):
        return repr(value), repr(value)
    return f"{value:.6g}", repr(value)


def format_relative_error(value: Any) -> str:
    if value is None:
        return "—"
    if value in ("Infinity", "-Infinity") or (isinstance(value, float) and math.isinf(value)):
        return "∞"
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return _text(value)
    if value == 0:
        return "0%"
    if value < 0.0001:
        return "<0.01%"
    return f"{value:.2%}"


def _score_cell(number: dict, *, values: bool, redaction: GoldRedaction) -> ScoreCell:
    predicted, full = format_number(number.get("predicted"))
    if number.get("predicted") is None and number.get("predicted_text"):
        predicted = full = _text(number.get("predicted_text"))
    if not values:
        predicted, full = WITHHELD, ""
    elif redaction.text(full) != full:  # the gold number in full: what exact code prints
        full = ""
    passed = number.get("passed") is True
    return ScoreCell(
        predicted=predicted,
        predicted_full=full,
        relative_error=format_relative_error(number.get("relative_error")),
        passed=passed,
        reason=_text(number.get("reason")) or ("ok" if passed else ""),
    )


def _experiments(score: Any) -> list[dict]:
    if not isinstance(score, dict):
        return []
    return [item for item in score.get("experiments") or [] if isinstance(item, dict)]


def score_table(
    reported: Any, reexecuted: Any, *, gold_numbers: bool = True, values: bool = True, redaction: GoldRedaction = NOTHING
) -> list[ExperimentRows]:
    """Both verdicts side by side: one row per gold number of each experiment. Without
    `gold_numbers` the gold column says WITHHELD (a viewer who may not see them: runs.visibility),
    without `values` the reported and printed values too (those of a gold-bearing agent are the gold
    numbers); `redaction` withholds the gold any error text quotes, and the full precision of a value
    that is a gold number in full (relative errors and verdicts always show)."""
    table: dict[str, ExperimentRows] = {}
    for side, score in (("reported", reported), ("reexecuted", reexecuted)):
        for experiment in _experiments(score):
            label = _text(experiment.get("experiment_id"))
            rows = table.get(label)
            if rows is None:
                rtol, atol = experiment.get("rtol"), experiment.get("atol")
                tolerance = f"rtol {rtol:g}" if isinstance(rtol, (int, float)) else ""
                if isinstance(atol, (int, float)) and atol:
                    tolerance += f", atol {atol:g}"
                rows = table[label] = ExperimentRows(label, experiment.get("exp_id"), tolerance, None, None, "", "", [])
            setattr(rows, f"{side}_passed", experiment.get("passed") is True)
            setattr(rows, f"{side}_error", redaction.text(_text(experiment.get("error"))))
            by_key = {row.key: row for row in rows.rows}
            for number in experiment.get("numbers") or []:
                if not isinstance(number, dict):
                    continue
                key = _text(number.get("key"))
                row = by_key.get(key)
                if row is None:
                    gold, gold_full = format_number(number.get("gold")) if gold_numbers else (WITHHELD, "")
                    row = by_key[key] = NumberRow(key, gold, gold_full, None, None)
                    rows.rows.append(row)
                setattr(row, side, _score_cell(number, values=values, redaction=redaction))
    return list(table.values())


# --- the page's data -------------------------------------------------------------------------------


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
    """Which steps one page shows and how to reach the others: `prefix` + a page number is the
    URL of that page (a query string, relative to the page's own path)."""

    page: int
    per_page: int
    total: int  # steps in the trajectory (the longer one, when comparing)
    prefix: str
    errors: list[int]  # the number of every step marked as an error, on any page

    @property
    def page_count(self) -> int:
        return max(1, -(-self.total // self.per_page))

    @property
    def first(self) -> int:
        return (self.page - 1) * self.per_page + 1

    @property
    def last(self) -> int:
        return min(self.total, self.page * self.per_page)

    @property
    def previous(self) -> int | None:
        return self.page - 1 if self.page > 1 else None

    @property
    def next(self) -> int | None:
        return self.page + 1 if self.page < self.page_count else None

    def page_of(self, number: int) -> int:
        return (number - 1) // self.per_page + 1

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
        paginator = Paginator(range(self.total), self.per_page, allow_empty_first_page=True)
        return [
            {"ellipsis": True} if number == Paginator.ELLIPSIS else {"number": number, "current": number == self.page}
            for number in paginator.get_elided_page_range(self.page, on_each_side=2, on_ends=1)
        ]

    def check(self) -> None:
        if self.page > self.page_count:
            raise ReplayPageError(
                f"there is no page {self.page} of steps: the trajectory has {self.total:,} step"
                f"{'s' if self.total != 1 else ''}, shown {self.per_page} to a page on "
                f"{self.page_count} page{'s' if self.page_count != 1 else ''}"
            )


def attempt_get_for_replay(*, pk: int, user=None) -> Attempt:
    """The attempt with its run, suite, sample and paper, in one query (Attempt.DoesNotExist otherwise).

    Attempts of a hidden run exist only for its owner and staff (runs.visibility). The original
    file of a converted trajectory comes along, without its content, for the page's link.
    """
    return (
        Attempt.objects.select_related("run", "run__suite", "sample", "sample__paper", "trajectory_source")
        .filter(runs_visible_q(user=user, prefix="run__"))
        # Read a page at a time by the replay (runs.replay.pages), never whole; the original file on download only.
        # held_out_scores: staff-only numbers no replay shows, not even loaded.
        .defer("trajectory", "final_patch", "trajectory_source__content", "held_out_scores")
        .get(pk=pk)
    )


def attempt_siblings(*, attempt: Attempt, user=None, limit: int = 50) -> QuerySet:
    """Other attempts at the same sample that `user` may see (for the compare links), newest runs
    first; light columns only."""
    return (
        Attempt.objects.filter(runs_visible_q(user=user, prefix="run__"), sample_id=attempt.sample_id)
        .exclude(pk=attempt.pk)
        .select_related("run")
        .only("pk", "index", "status", "passed", "mismatch", "run__id", "run__agent", "run__model")
        .order_by("-run__created_at", "-run_id", "index")[:limit]
    )


def attempt_is_live(attempt: Attempt) -> bool:
    """Queued or running: its trajectory may still grow (a worker stores it as the agent works)."""
    return attempt.status in (Attempt.QUEUED, Attempt.RUNNING)


@dataclass(frozen=True)
class LiveState:
    """Where a live attempt stands, for its page's script: counts only, no text (the steps' bodies
    come from attempt_step_bodies, under the replay's gold rule)."""

    status: str
    live: bool
    steps: int
    tries: int


def attempt_live_state(*, attempt: Attempt) -> LiveState:
    """The attempt's status, try and how many steps its stored trajectory holds: one small query
    (the database counts the steps; none is read)."""
    window = trajectory_page(attempt_id=attempt.pk, first=1, count=0, errors_limit=0, patch_chars=0)
    return LiveState(status=attempt.status, live=attempt_is_live(attempt), steps=window.step_count, tries=attempt.tries)


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
                        _FILES_TOTAL: len(step["files_changed"])}
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
    replay = _replay(attempt=attempt, access=access, page=page, prefix="?page=",
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


def _replay(*, attempt: Attempt, access: GoldAccess, page: int, prefix: str, per_page: int | None = None,
            first_screen: int | None = None) -> AttemptReplay:
    """`first_screen`: only that many of the page's steps get their whole body (`steps`); every
    step of the page gets its list line (`lines`). None: every step its body, no lines."""
    bounds = replay_bounds()
    per_page = per_page or bounds.steps_per_page
    marks_limit = trajectory_limits().steps
    window = trajectory_page(
        attempt_id=attempt.pk, first=(page - 1) * per_page + 1, count=per_page,
        errors_limit=marks_limit, patch_chars=bounds.patch_chars,
    )
    trajectory, problem = _trajectory(attempt, window, bounds)
    header = trajectory.header if trajectory else None
    withheld = _withheld(attempt, access, header)
    hide, redaction = withheld.code, withheld.redaction
    budget = HighlightBudget()
    patch, lines_cut = _first_lines(window.patch_head, bounds.patch_lines)
    final_patch = [] if hide else patch_files(patch, budget=budget, max_lines=bounds.patch_lines, max_files=bounds.step_files,
                                              redaction=redaction)
    out_of_scope = [] if hide else _out_of_scope(attempt, budget, bounds, bounds.patch_lines - sum(len(f.lines) for f in final_patch),
                                                 redaction)
    page_steps = trajectory.steps if trajectory else []
    bodies = page_steps if first_screen is None else page_steps[:first_screen]
    steps = [
        step_view(step, number, hide_gold_code=hide, hide_gold_output=withheld.output, redaction=redaction, budget=budget,
                  bounds=bounds)
        for number, step in enumerate(bodies, start=window.first)
    ]
    lines = []
    if first_screen is not None:
        lines = [step_line(step, number, hide_gold_code=hide, redaction=redaction)
                 for number, step in enumerate(page_steps, start=window.first)]
        for line, body in zip(lines, steps):
            line.body = body
    errors = window.errors
    marks_note = ""
    if window.step_count > marks_limit:
        marks_note = (f"This trajectory has {window.step_count:,} steps, more than the {marks_limit:,} this site now accepts; "
                      f"errors are marked among the first {marks_limit:,} only.")

    answer: FinalAnswer | None = trajectory.final_answer if trajectory else None
    raw = attempt.final_answer_raw if attempt.final_answer_raw is not None else (answer.raw if answer else None)
    parsed = attempt.parsed_answer if attempt.parsed_answer is not None else (answer.parsed if answer else None)

    input_tokens = attempt.input_tokens or (header.input_tokens if header else 0)
    output_tokens = attempt.output_tokens or (header.output_tokens if header else 0)
    if attempt.cost is not None:
        cost = format_cost(attempt.cost, False)
    elif header is not None:
        cost = format_cost(header.cost, header.cost_unknown)
    else:
        cost = "unknown"
    reported = attempt.reported_score if isinstance(attempt.reported_score, dict) else {}
    reexecuted = attempt.reexecution_score if isinstance(attempt.reexecution_score, dict) else {}
    if withheld.output:  # the gold code's own answer and output
        raw, parsed = (OUTPUT_HIDDEN if raw is not None else None), None
    text = redaction.text
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
        config=_cut(_safe_config(header.config), bounds) if header else "",
        steps=steps,
        pager=Pager(page=page, per_page=per_page, total=window.step_count, prefix=prefix, errors=errors),
        input_tokens=input_tokens,
        output_tokens=output_tokens,
        cost=cost,
        agent_seconds=format_seconds(attempt.agent_seconds),
        total_seconds=format_seconds(attempt.total_seconds),
        final_answer_raw=text(_cut(_text(raw), bounds)) if raw is not None else None,
        final_answer_parsed=text(_cut(pretty_json(parsed), bounds)) if parsed is not None else "",
        final_answer_error=text(_text(answer.parse_error)) if answer and parsed is None and not withheld.output else "",
        experiments=score_table(reported, reexecuted, gold_numbers=access.numbers, values=not withheld.output,
                                redaction=redaction),
        reported_error=text(_text(reported.get("error"))),
        reexecuted_error=text(attempt.reexecution_error or _text(reexecuted.get("error"))),
        final_patch=final_patch,
        out_of_scope=out_of_scope,
        patch_hidden=hide and window.patch_chars > 0,
        gold_code_hidden=hide,
        patch_cut=lines_cut or window.patch_chars > len(window.patch_head),
        patch_chars=window.patch_chars,
        patch_url=_patch_url(attempt.pk) if window.patch_chars else "",
        run_url=_run_url(attempt.run_id),
        trajectory_problem=problem,
        marks_note=marks_note,
        lines=lines,
        failure_detail=text(attempt.failure_detail),
        reexecution_output=(OUTPUT_HIDDEN if withheld.output and attempt.reexecution_output else text(attempt.reexecution_output)),
    )


def _out_of_scope(
    attempt: Attempt, budget: HighlightBudget, bounds: ReplayBounds, lines: int, redaction: GoldRedaction = NOTHING
) -> list[FileDiff]:
    """What re-execution dropped, within what is left of the page's patch lines."""
    edits = [edit for edit in attempt.out_of_scope_edits or [] if isinstance(edit, dict)] \
        if isinstance(attempt.out_of_scope_edits, list) else []
    views = []
    for edit in edits[: bounds.step_files]:
        view = file_diff(FileChange(path=_text(edit.get("path")), change="dropped", diff=_text(edit.get("diff")) or None,
                                    note=_text(edit.get("reason"))), budget=budget, max_lines=max(0, lines), redaction=redaction)
        lines -= len(view.lines)
        views.append(view)
    if len(edits) > bounds.step_files:
        views.append(_more_files(len(edits) - bounds.step_files, "dropped: not listed here"))
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


def attempt_patch_download(*, attempt: Attempt, access: GoldAccess) -> str | None:
    """The attempt's whole final patch (its own, else its trajectory's) for the plain-text
    download, or None when it holds gold code this viewer may not see; lines quoting a gold body
    withheld as on the page (such a patch no longer applies: it is for reading)."""
    patch, trajectory_patch, header_agent = Attempt.objects.values_list(
        "final_patch", KT("trajectory__final_patch"), KT("trajectory__header__agent")
    ).get(pk=attempt.pk)
    if not access.code and (attempt.run.agent in GOLD_CODE_AGENTS or header_agent in GOLD_CODE_AGENTS):
        return None
    text = patch or trajectory_patch or ""
    if access.code and access.numbers:
        return text
    redaction = gold_redaction_for(access=access, paper=attempt.sample.paper, suite=attempt.run.suite)
    return "".join(line[:1] + redaction.text(line[1:]) if line[:1] in ("+", "-", " ") and not line.startswith(("+++ ", "--- "))
                   else line for line in text.splitlines(keepends=True))


@dataclass(frozen=True)
class SourceLink:
    """The original file of a converted trajectory, as the attempt page's header links it."""

    title: str  # "mini-swe-agent 1.1"
    filename: str
    size: int
    url: str


def attempt_trajectory_source(*, attempt: Attempt) -> SourceLink | None:
    """The link to the original file of the attempt's trajectory, when it was converted from
    another tool's (runs.models.TrajectorySource); read with the attempt (attempt_get_for_replay)."""
    try:
        source = attempt.trajectory_source
    except TrajectorySource.DoesNotExist:
        return None
    version = source.source_version
    # Versions such as "mini-swe-agent-1.1" repeat the format's name: shown once.
    if version.startswith(source.source_format + "-"):
        version = version[len(source.source_format) + 1:]
    try:
        url = reverse("replay:source", args=[attempt.pk])
    except NoReverseMatch:
        return None
    return SourceLink(f"{source.source_format} {version}".strip(), source.filename, source.size, url)


def attempt_source_download(*, attempt: Attempt) -> TrajectorySource | None:
    """The original file of the attempt's trajectory, content included, or None."""
    return TrajectorySource.objects.filter(attempt=attempt).first()


# --- comparison ----------------------------------------------------------------------------------


class ComparisonError(ValueError):
    """Two attempts that cannot be compared (different samples)."""


@dataclass
class StepPair:
    number: int
    left: StepView | None
    right: StepView | None

    @property
    def is_error(self) -> bool:
        return bool((self.left and self.left.is_error) or (self.right and self.right.is_error))


@dataclass
class Comparison:
    left: AttemptReplay
    right: AttemptReplay
    pairs: list[StepPair]  # this page's
    pager: Pager

    @property
    def first_error(self) -> int | None:
        return self.pager.errors[0] if self.pager.errors else None


def attempts_compare(*, left: Attempt, right: Attempt, access: GoldAccess, page: int = 1) -> Comparison:
    """Two attempts at the same sample, steps aligned by position, one page of them. Raises
    ComparisonError when the samples differ (their steps and scores would not be about the same
    task) and ReplayPageError for a page neither trajectory reaches."""
    if left.sample_id != right.sample_id:
        raise ComparisonError(
            f"attempt {left.pk} is at sample {left.sample.sample_id} and attempt {right.pk} at sample "
            f"{right.sample.sample_id}: only attempts at the same sample can be compared"
        )
    prefix = f"?a={left.pk}&b={right.pk}&page="
    # Half an attempt page's steps from each side: a comparison costs what one attempt's page does.
    per_page = max(1, replay_bounds().steps_per_page // 2)
    a = _replay(attempt=left, access=access, page=page, prefix=prefix, per_page=per_page)
    b = _replay(attempt=right, access=access, page=page, prefix=prefix, per_page=per_page)
    pager = Pager(page=page, per_page=a.pager.per_page, total=max(a.step_count, b.step_count), prefix=prefix,
                  errors=sorted(set(a.pager.errors) | set(b.pager.errors)))
    pager.check()
    left_steps = {step.number: step for step in a.steps}
    right_steps = {step.number: step for step in b.steps}
    pairs = [StepPair(number, left_steps.get(number), right_steps.get(number)) for number in range(pager.first, pager.last + 1)]
    return Comparison(a, b, pairs, pager)


__all__ = [
    "GOLD_CODE_AGENTS",
    "GOLD_CODE_NOTICE",
    "AttemptReplay",
    "Comparison",
    "ComparisonError",
    "ReplayPageError",
    "attempt_get_for_replay",
    "attempt_live_state",
    "attempt_replay",
    "attempt_siblings",
    "attempt_step_bodies",
    "attempt_step_search",
    "attempts_compare",
    "attempt_patch_download",
    "highlight_python",
]
