"""A step's tool call as people read it, never as the JSON the model sent: a command as a shell
block, a file written as the file (numbered, Python highlighted; the step's diff against what was
there before is in its changed files, shown open), an inspection as the lines it read with their
numbers, and anything else (another harness's tools, arguments not in the tool's form) as
formatted JSON. Every presentation is built from the arguments gold_code_redaction left for this
viewer (runs.analysis.public), so it can show no more than the JSON did.
"""
from __future__ import annotations

import json
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from runs.analysis.public import HIDDEN
from runs.limits import ReplayBounds, replay_bounds
from runs.replay.diffs import MAX_DIFF_LINES, HighlightBudget, highlight_python_lines
from runs.replay.text import as_text, cut_to_page, pretty_json

# Lines of one file, script or listing put in the page (as MAX_DIFF_LINES for a diff).
MAX_CODE_LINES = MAX_DIFF_LINES
# A file or listing is shown open up to this many lines, folded beyond (and a diff likewise).
CODE_OPEN_LINES = 80

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
    raw = cut_to_page(text, bounds).split("\n")
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
        fields.append((as_text(name), text))
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

    def code(content: str, path: str, python: bool | None = None) -> CodeBlock:
        return _file_code(content, path, redacted=redacted, budget=budget, bounds=bounds, python=python)

    if tool in _SHELL_ARGUMENT:
        names = _SHELL_ARGUMENT[tool]
        name = next((n for n in ((names,) if isinstance(names, str) else names) if n in arguments), "command")
        return CallView("command", "Command", command=cut_to_page(_string(arguments, name), bounds), fields=rest(name))
    if tool in _CODE_TOOLS:
        return _code_call(tool, arguments, rest=rest, code=code, bounds=bounds)
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
        return _answer_call(arguments, rest=rest, bounds=bounds)
    return None


# The tools whose call holds code: a file written, a script run, Inspect's python tool.
_CODE_TOOLS = frozenset({"write_file", "execute_python_script", "execute_bash_script", "python"})


def _code_call(tool: str, arguments: dict, *, rest, code, bounds: ReplayBounds) -> CallView:
    """A call of one of `_CODE_TOOLS`: the code it holds as numbered lines (`code`), the other
    arguments as fields (`rest`)."""
    if tool == "write_file":
        path = _string(arguments, "path")
        return CallView("file", "File written", target=path, code=code(_string(arguments, "content"), path),
                        fields=rest("path", "content"))
    if tool == "python":  # Inspect's python tool: the code is run as it is
        return CallView("script", "Python run", code=code(_string(arguments, "code"), "", True), fields=rest("code"))
    path, content = _string(arguments, "path"), _string(arguments, "content", required=False)
    words = _string(arguments, "arguments", required=False)
    interpreter = "python3" if tool == "execute_python_script" else "bash"
    command = f"{interpreter} {shlex.quote(path)}" + (f" {words}" if words else "")
    script = None
    if "content" in arguments and arguments["content"] is not None:
        script = code(content, path, tool == "execute_python_script")
    return CallView("script", "Script run", target=path if script else "", command=cut_to_page(command, bounds), code=script,
                    fields=rest("path", "content", "arguments"))


def _answer_call(arguments: dict, *, rest, bounds: ReplayBounds) -> CallView:
    """A final_answer call: the answer formatted (the tool takes it as JSON text too)."""
    if "answer" not in arguments:
        raise _NotTheToolsForm("answer")
    answer = arguments["answer"]
    if isinstance(answer, str):
        try:
            answer = json.loads(answer)
        except ValueError:
            pass
    return CallView("answer", "Final answer", json=cut_to_page(answer if isinstance(answer, str) else pretty_json(answer), bounds),
                    fields=rest("answer"))


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
    return CallView("json", "Arguments", json=cut_to_page(pretty_json(arguments), bounds))
