"""Diffs and Python highlighting for the replay: a unified diff as display lines (added, removed,
hunk, ...), the changed lines of Python files as token segments, and a final patch split per file,
all bounded per page (`MAX_DIFF_LINES`, `HighlightBudget`).

Nothing here returns HTML: highlighting is a list of {"c": css class, "t": text} segments per line,
which the templates (runs.templatetags.replay_html) escape like any other text.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import cache

from pygments.formatters import HtmlFormatter
from pygments.lexers import PythonLexer
from pygments.token import STANDARD_TYPES, _TokenType

from runs.agents.trajectory import FileChange
from runs.analysis.gold_text import NOTHING, GoldRedaction
from runs.benchmark.patch_parsing import parse_patch
from runs.benchmark.patches import PatchError
from runs.replay.text import as_text

# At most this many lines of one diff are put in the page (the harness already cuts diffs at
# 50,000 characters; this bounds the DOM of a long trajectory). A step shows at most
# runs.limits.PAGE_STEP_DIFF_LINES in all, and the final patch PAGE_PATCH_LINES.
MAX_DIFF_LINES = 600
# Characters of changed lines token-highlighted per page (see HighlightBudget).
HIGHLIGHT_CHARS = 16_000
# The Pygments style whose token classes colour the code. Its rules are in static/css/replay.css,
# prefixed "tk-" (no inline styles: the page's CSP forbids them); tests/replay check that the two agree.
HIGHLIGHT_STYLE = "vs"


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

    Line colours (added, removed, hunk) are always there; token colours cost lexing time (in
    proportion to the characters lexed, most with a token per character) and a few elements per
    line, so a page stops adding them after `HIGHLIGHT_CHARS` characters (the final patch is
    highlighted first) and a long trajectory stays quick to render and light in the browser. A diff is highlighted whole or not at all.
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
    path = as_text(change.path)
    kind = as_text(change.change)
    view = FileDiff(path=path, change=kind if kind in _CHANGES else "changed", note=as_text(change.note),
                    has_diff=change.diff is not None)
    if change.diff is None:
        return view
    if hidden:
        _, view.additions, view.deletions, _ = diff_lines(as_text(change.diff), python=False, max_lines=0)
        view.hidden = True
        return view
    view.lines, view.additions, view.deletions, view.omitted_lines = diff_lines(
        as_text(change.diff), python=path.endswith(".py"), budget=budget, max_lines=max_lines, redaction=redaction
    )
    return view


def patch_files(
    patch: str, *, budget: HighlightBudget | None = None, max_lines: int | None = None, max_files: int | None = None,
    redaction: GoldRedaction = NOTHING,
) -> list[FileDiff]:
    """A multi-file unified diff split per file, shown open; at most `max_lines` lines in all and
    `max_files` files (None: all), then one entry saying how many more files there are.

    Sections come from `runs.benchmark.patch_parsing.parse_patch`, the parser re-execution uses. Stored patches
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
        files.append(more_files(len(sections) - max_files, "in the patch: not listed here; download the whole patch"))
    return files


def more_files(count: int, where: str) -> FileDiff:
    """The entry that ends a list of files cut short: how many more there are, and where."""
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
