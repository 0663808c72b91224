"""The paper's agent tools, each run through the sandbox against the workspace.

A tool is a `ToolSpec` (what the model sees), the pydantic model of its arguments (the spec's
schema is that model's: runs.agents.tool_arguments) and a function `(ToolContext, arguments) ->
ToolResult`. Call them through `run_tool`, which checks the arguments with that model, turns
every mistake of the agent (bad JSON, unknown tool, a path leaving the workspace, a missing file)
into an error observation the model can read, and truncates observations to a bounded size. Only
two things escape `run_tool` as exceptions: `SandboxFailed` (the sandbox itself broke) and
`ModelFailed` (the model behind `understand_file` / `edit_file` is unreachable), since neither is
anything the agent could fix by trying again.

Paths the agent gives are relative to its current directory (`change_directory`), or absolute
under /workspace; nothing resolving outside the workspace (symlinks included) is accepted.
"""

from __future__ import annotations

import json
import shlex
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from runs.benchmark.answers import ParsedAnswer, parse_answer
from runs.benchmark.patches import unified_diff
from sandbox import Sandbox, SandboxError, fs
from sandbox.base import WORKSPACE_MOUNT
from sandbox.fs import FileKind

from .base import ModelFailed, SandboxFailed
from .llm import ChatModel, Message, ModelError, ToolCall, ToolSpec, Usage
from .tool_arguments import (
    DEFAULT_COMMAND_TIMEOUT,
    ArgumentsError,
    BashScriptArguments,
    ChangeDirectoryArguments,
    CommandLineArguments,
    EditFileArguments,
    FinalAnswerArguments,
    InspectFileLinesArguments,
    ListFilesArguments,
    MoveArguments,
    PythonScriptArguments,
    ToolArguments,
    UnderstandFileArguments,
    WriteFileArguments,
    parse_arguments,
    tool_schema,
)

__all__ = [
    "DEFAULT_COMMAND_TIMEOUT",
    "DEFAULT_MAX_OBSERVATION_CHARS",
    "TOOLS",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolResult",
    "display_path",
    "resolve_path",
    "run_tool",
    "tool_specs",
    "truncate",
]

DEFAULT_MAX_OBSERVATION_CHARS = 10_000
# How many lines inspect_file_lines shows at most; longer ranges are cut with a note.
MAX_INSPECT_LINES = 400
# What understand_file / edit_file hand the helper model at most, in characters (~25k tokens).
MAX_LLM_FILE_CHARS = 100_000
# Below this many seconds left, a command is not started at all.
MIN_COMMAND_SECONDS = 1.0


@dataclass
class ToolContext:
    """What tools act on: the sandbox, its workspace on the host, and the agent's state.

    `cwd` is the agent's current directory, workspace-relative ("." is /workspace). `model` runs
    understand_file / edit_file (None: those tools answer with an error). `time_left` returns the
    seconds left in the run's budget (None: unlimited); command timeouts never exceed it.
    """

    sandbox: Sandbox
    workspace: Path
    cwd: str = "."
    model: ChatModel | None = None
    max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS
    command_timeout: float = DEFAULT_COMMAND_TIMEOUT
    time_left: Callable[[], float | None] = lambda: None
    temperature: float = 0.0

    def __post_init__(self) -> None:
        self.workspace = Path(self.workspace).resolve()


@dataclass
class ToolResult:
    """One tool call's outcome.

    `observation` is what the model is shown (already truncated by `run_tool`; `truncated` says
    so). `error` marks a call that failed (bad arguments, command not found, non-zero exit does
    *not* count: that is information, not a tool failure), with a `traceback` when the harness
    itself raised. `exit_code` and `timed_out` are the outcome of the command a tool ran (None and
    False for tools that run none): callers read them here, never from the status line that
    repeats them at the end of `observation` for the model. `usage` / `cost` / `model_calls`
    account for helper-model calls (cost None: price unknown). `answer` is set by an accepted
    final_answer.
    """

    observation: str
    exit_code: int | None = None
    timed_out: bool = False
    error: bool = False
    truncated: bool = False
    traceback: str | None = None
    usage: Usage = field(default_factory=Usage)
    cost: float | None = 0.0
    model_calls: int = 0
    answer_raw: str | None = None
    answer: ParsedAnswer | None = None

    @property
    def submitted(self) -> bool:
        return self.answer is not None


class ToolError(Exception):
    """The agent used a tool wrongly; the message becomes an error observation."""


@dataclass(frozen=True)
class Tool:
    """A tool: what the model is shown (`spec`, whose schema is `arguments`'), the model its
    arguments are checked with, and the function run with them."""

    spec: ToolSpec
    arguments: type[ToolArguments]
    run: Callable[[ToolContext, Any], ToolResult]

    @property
    def name(self) -> str:
        return self.spec.name


# --- observations and paths ----------------------------------------------------------------------


def truncate(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to about `limit` characters, keeping its head and tail around a marker.

    Both ends matter: the head shows what a command started doing, the tail the error it died of.
    """
    if len(text) <= limit:
        return text, False
    head = limit // 2
    tail = limit - head
    omitted = len(text) - head - tail
    return f"{text[:head]}\n[... {omitted} characters truncated ...]\n{text[-tail:]}", True


def resolve_path(context: ToolContext, path: str) -> str:
    """The workspace-relative POSIX path `path` names from the agent's cwd, resolved lexically.

    Raises ToolError for paths outside the workspace (by `..` or an absolute path elsewhere).
    Links are not resolved here: the file tools never follow them (sandbox.fs), so a path through
    a link is refused when it is used. The host path is never shown to the agent.
    """
    if not isinstance(path, str) or not path.strip() or "\0" in path:
        raise ToolError(f"invalid path {path!r}")
    raw = PurePosixPath(path.strip())
    if raw.is_absolute():
        try:
            joined = raw.relative_to(WORKSPACE_MOUNT)
        except ValueError:
            raise ToolError(f"{path} is outside the workspace ({WORKSPACE_MOUNT})") from None
    else:
        joined = PurePosixPath(context.cwd) / raw
    try:
        parts = fs.split_relative(str(joined))
    except fs.UnsafePath:
        raise ToolError(f"{path} is outside the workspace ({WORKSPACE_MOUNT})") from None
    return "/".join(parts) or "."


def display_path(relative: str) -> str:
    """How a workspace-relative path is shown to the agent: absolute inside the sandbox."""
    return WORKSPACE_MOUNT if relative == "." else f"{WORKSPACE_MOUNT}/{relative}"


def _check_open(context: ToolContext) -> None:
    # File operations raise SandboxError both for the agent's mistakes and for a closed sandbox;
    # only the first is the agent's to fix.
    if context.sandbox.closed:
        raise SandboxFailed("the sandbox is closed")


def _kind(context: ToolContext, relative: str) -> FileKind | None:
    _check_open(context)
    try:
        return context.sandbox.path_kind(relative)
    except SandboxError as error:
        raise ToolError(str(error)) from None


def _read_text(context: ToolContext, relative: str) -> str:
    kind = _kind(context, relative)
    if kind is None:
        raise ToolError(f"{display_path(relative)} does not exist")
    if kind == FileKind.DIR:
        raise ToolError(f"{display_path(relative)} is a directory")
    try:
        return context.sandbox.read_file(relative)
    except SandboxError as error:
        raise ToolError(str(error)) from None


def _write_text(context: ToolContext, relative: str, content: str) -> None:
    if _kind(context, relative) == FileKind.DIR:
        raise ToolError(f"{display_path(relative)} is a directory")
    try:
        context.sandbox.write_file(relative, content)
    except SandboxError as error:
        raise ToolError(str(error)) from None


def _execute(context: ToolContext, command: str, timeout: Any) -> ToolResult:
    """Runs a shell command in the agent's cwd with a timeout capped by the time budget."""
    if timeout is None:
        timeout = context.command_timeout
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or timeout <= 0:
        raise ToolError("timeout must be a positive number of seconds")
    left = context.time_left()
    capped = False
    if left is not None and left < timeout:
        if left < MIN_COMMAND_SECONDS:
            raise ToolError("no time is left in the budget to run a command; submit your final answer")
        timeout, capped = left, True
    if _kind(context, context.cwd) != FileKind.DIR:
        # The agent deleted or moved its own cwd; fall back rather than fail every later command.
        context.cwd = "."
    try:
        result = context.sandbox.execute(command, timeout=float(timeout), cwd=context.cwd)
    except SandboxError as error:
        raise SandboxFailed(f"sandbox failed to run a command: {error}") from error
    status = f"exit code {result.exit_code}"
    if result.timed_out:
        why = " (the time budget's remainder)" if capped else ""
        status = f"timed out after {timeout:.0f} s{why} and was killed"
    header = f"[{status}; {result.duration:.1f} s; cwd {display_path(context.cwd)}]"
    output = result.output if result.output else "(no output)\n"
    return ToolResult(
        observation=f"{output.rstrip()}\n{header}",
        exit_code=result.exit_code,
        timed_out=result.timed_out,
        truncated=result.truncated,
    )


# --- helper-model calls --------------------------------------------------------------------------


def _helper_completion(context: ToolContext, system: str, user: str, *, max_tokens: int) -> tuple[str, ToolResult]:
    """One completion of the agent's model for a tool, and a ToolResult carrying its usage."""
    if context.model is None:
        raise ToolError("this tool needs a language model and none is configured for this run")
    try:
        completion = context.model.complete(
            [Message.system(system), Message.user(user)],
            tools=[],
            max_tokens=max_tokens,
            temperature=context.temperature,
        )
    except ModelError as error:
        if error.retryable:
            raise ModelFailed(f"helper model call failed: {error}") from error
        # A request the provider refuses (a file too large for its context, say) is the agent's to
        # work around, e.g. by inspecting lines instead.
        raise ToolError(f"the helper model refused the request: {error}") from None
    accounting = ToolResult(observation="", usage=completion.usage, cost=completion.cost, model_calls=1)
    return completion.text, accounting


def _numbered(text: str, start: int = 1, width: int | None = None) -> str:
    lines = text.splitlines()
    width = width or len(str(start + len(lines) - 1))
    return "\n".join(f"{number:>{width}} | {line}" for number, line in enumerate(lines, start=start))


def _fenced_body(text: str) -> str | None:
    """The content between the first ``` line and the last ``` line, or None without a fence.

    First and last, not the nearest pair: the file itself may contain fences (Markdown).
    """
    lines = text.splitlines(keepends=True)
    opens = [i for i, line in enumerate(lines) if line.lstrip().startswith("```")]
    if len(opens) < 2:
        return None
    return "".join(lines[opens[0] + 1 : opens[-1]])


# --- the tools -----------------------------------------------------------------------------------


def list_files(context: ToolContext, args: ListFilesArguments) -> ToolResult:
    relative = resolve_path(context, args.path)
    if _kind(context, relative) != FileKind.DIR:
        raise ToolError(f"{display_path(relative)} is not a directory")
    try:
        entries = context.sandbox.list_files(relative, recursive=args.recursive)
    except SandboxError as error:
        raise ToolError(str(error)) from None
    prefix = "" if relative == "." else relative + "/"
    shown = [fs.display_name(entry.removeprefix(prefix)) for entry in entries]
    listing = "\n".join(shown) if shown else "(empty directory)"
    return ToolResult(observation=f"{display_path(relative)}:\n{listing}")


def inspect_file_lines(context: ToolContext, args: InspectFileLinesArguments) -> ToolResult:
    relative = resolve_path(context, args.path)
    text = _read_text(context, relative)
    lines = text.splitlines()
    start = args.start_line
    end = start + MAX_INSPECT_LINES - 1 if args.end_line is None else args.end_line
    if start < 1 or end < start:
        raise ToolError(f"need 1 <= start_line <= end_line; got start_line={start}, end_line={end}")
    if not lines:
        return ToolResult(observation=f"{display_path(relative)} is empty")
    if start > len(lines):
        raise ToolError(f"{display_path(relative)} has only {len(lines)} lines")
    note = ""
    if end - start + 1 > MAX_INSPECT_LINES:
        end = start + MAX_INSPECT_LINES - 1
        note = f"\n[shown {MAX_INSPECT_LINES} lines at most per call; continue from line {end + 1}]"
    end = min(end, len(lines))
    # Numbers as wide as the file's last one, so the columns line up from one call to the next.
    body = _numbered("\n".join(lines[start - 1 : end]), start, width=len(str(len(lines))))
    return ToolResult(observation=f"{display_path(relative)} lines {start}-{end} of {len(lines)}:\n{body}{note}")


def understand_file(context: ToolContext, args: UnderstandFileArguments) -> ToolResult:
    relative = resolve_path(context, args.path)
    text, cut = truncate(_read_text(context, relative), MAX_LLM_FILE_CHARS)
    system = (
        "You help a research engineer understand a codebase. You are given one file with line "
        "numbers and a question about it. Answer the question precisely and concisely from the "
        "file's content, citing line numbers. Say so when the file does not answer it."
    )
    user = (
        f"File {display_path(relative)}{' (truncated in the middle)' if cut else ''}:\n"
        f"```\n{_numbered(text)}\n```\n\nQuestion: {args.question}"
    )
    answer, accounting = _helper_completion(context, system, user, max_tokens=2048)
    accounting.observation = answer.strip() or "(the helper model gave no answer)"
    return accounting


def edit_file(context: ToolContext, args: EditFileArguments) -> ToolResult:
    relative = resolve_path(context, args.path)
    old = _read_text(context, relative) if _kind(context, relative) is not None else None
    if old is not None and len(old) > MAX_LLM_FILE_CHARS:
        raise ToolError(
            f"{display_path(relative)} is too large for edit_file ({len(old)} characters); "
            "edit it with write_file or a script instead"
        )
    system = (
        "You edit files exactly as instructed. You are given a file and an edit instruction. Reply "
        "with the complete new content of the file in a single ``` code block and nothing else: no "
        "explanation, no elisions such as '...' or 'rest unchanged'. Change only what the "
        "instruction asks for."
    )
    shown = "(the file does not exist yet; write its full content)" if old is None else f"```\n{old}```"
    user = f"File {display_path(relative)}:\n{shown}\n\nInstruction: {args.instruction}"
    reply, accounting = _helper_completion(context, system, user, max_tokens=8192)
    new = _fenced_body(reply)
    if new is None:
        accounting.observation = "edit_file failed: the editing model did not return the file in a code block; nothing was changed"
        accounting.error = True
        return accounting
    if old is not None and old.endswith("\n") and not new.endswith("\n"):
        new += "\n"
    _write_text(context, relative, new)
    diff = unified_diff(relative, old, new)
    accounting.observation = f"Edited {display_path(relative)}:\n{diff}" if diff else f"{display_path(relative)}: no changes"
    return accounting


def write_file(context: ToolContext, args: WriteFileArguments) -> ToolResult:
    relative = resolve_path(context, args.path)
    existed = _kind(context, relative) is not None
    _write_text(context, relative, args.content)
    verb = "Overwrote" if existed else "Created"
    return ToolResult(observation=f"{verb} {display_path(relative)} ({len(args.content)} characters)")


def _run_script(context: ToolContext, args: PythonScriptArguments, interpreter: str) -> ToolResult:
    relative = resolve_path(context, args.path)
    if args.content is not None:
        _write_text(context, relative, args.content)
    elif _kind(context, relative) != FileKind.FILE:
        raise ToolError(f"{display_path(relative)} does not exist; pass `content` to create it")
    command = f"{interpreter} {shlex.quote(display_path(relative))}" + (f" {args.arguments}" if args.arguments else "")
    return _execute(context, command, args.timeout)


def execute_python_script(context: ToolContext, args: PythonScriptArguments) -> ToolResult:
    return _run_script(context, args, "python3")


def execute_bash_script(context: ToolContext, args: BashScriptArguments) -> ToolResult:
    return _run_script(context, args, "bash")


def command_line(context: ToolContext, args: CommandLineArguments) -> ToolResult:
    if not args.command.strip():
        raise ToolError("command is empty")
    return _execute(context, args.command, args.timeout)


def move(context: ToolContext, args: MoveArguments) -> ToolResult:
    source = resolve_path(context, args.source)
    destination = resolve_path(context, args.destination)
    if source == ".":
        raise ToolError("cannot move the workspace itself")
    if _kind(context, source) is None:
        raise ToolError(f"{display_path(source)} does not exist")
    command = f"mv -- {shlex.quote(display_path(source))} {shlex.quote(display_path(destination))}"
    try:
        result = context.sandbox.execute(command, timeout=60, cwd=".")
    except SandboxError as error:
        raise SandboxFailed(f"sandbox failed to run a command: {error}") from error
    if not result.ok:
        raise ToolError(f"move failed: {result.output.strip()}")
    return ToolResult(observation=f"Moved {display_path(source)} to {display_path(destination)}")


def change_directory(context: ToolContext, args: ChangeDirectoryArguments) -> ToolResult:
    relative = resolve_path(context, args.path)
    kind = _kind(context, relative)
    if kind == FileKind.SYMLINK:
        raise ToolError(f"{display_path(relative)} is a symbolic link; the file tools never follow links")
    if kind != FileKind.DIR:
        raise ToolError(f"{display_path(relative)} is not a directory")
    context.cwd = relative
    return ToolResult(observation=f"Current directory is now {display_path(relative)}")


def final_answer(context: ToolContext, args: FinalAnswerArguments) -> ToolResult:
    answer = args.answer
    raw = answer if isinstance(answer, str) else json.dumps(answer)
    parsed = parse_answer(answer if isinstance(answer, str) else dict(answer))
    if not parsed.ok:
        # Not a submission: the model gets to fix its answer (at the cost of a step).
        raise ToolError(f"the answer could not be read as a JSON object ({parsed.error}); nothing was submitted")
    return ToolResult(observation="Final answer submitted.", answer_raw=raw, answer=parsed)


# --- specs ---------------------------------------------------------------------------------------

def _tool(name: str, description: str, arguments: type[ToolArguments], run: Callable[[ToolContext, Any], ToolResult]) -> Tool:
    """A tool whose spec shows the model exactly the schema its arguments are checked with."""
    return Tool(ToolSpec(name, description, tool_schema(arguments)), arguments, run)


TOOLS: dict[str, Tool] = {
    tool.name: tool
    for tool in [
        _tool(
            "list_files",
            "List the files and directories in a directory (directories end in '/').",
            ListFilesArguments,
            list_files,
        ),
        _tool(
            "inspect_file_lines",
            f"Show lines start_line..end_line of a text file, numbered (at most {MAX_INSPECT_LINES} lines per call).",
            InspectFileLinesArguments,
            inspect_file_lines,
        ),
        _tool(
            "understand_file",
            "Ask an assistant model a question about one file; it reads the whole file and answers. "
            "Useful for long files.",
            UnderstandFileArguments,
            understand_file,
        ),
        _tool(
            "edit_file",
            "Have an assistant model apply an edit instruction to a file (created if missing); returns the "
            "unified diff of what changed.",
            EditFileArguments,
            edit_file,
        ),
        _tool(
            "write_file",
            "Write text to a file, replacing it if it exists (parent directories are created).",
            WriteFileArguments,
            write_file,
        ),
        _tool(
            "execute_python_script",
            "Run a Python file with python3 in the current directory; with `content`, first write it to `path`. "
            "Returns the output and exit code.",
            PythonScriptArguments,
            execute_python_script,
        ),
        _tool(
            "execute_bash_script",
            "Run a bash script file in the current directory; with `content`, first write it to `path`. "
            "Returns the output and exit code.",
            BashScriptArguments,
            execute_bash_script,
        ),
        _tool(
            "command_line",
            "Run one shell command (bash) in the current directory; returns the output and exit code. "
            "There is no network.",
            CommandLineArguments,
            command_line,
        ),
        _tool(
            "move",
            "Move or rename a file or directory inside the workspace.",
            MoveArguments,
            move,
        ),
        _tool(
            "change_directory",
            "Change the current directory (inside /workspace) for later tools and commands.",
            ChangeDirectoryArguments,
            change_directory,
        ),
        _tool(
            "final_answer",
            "Submit your final answer and end the task: a JSON object with one entry per experiment, "
            "in the answer format of the task. Call it once, with the numbers the experiments printed.",
            FinalAnswerArguments,
            final_answer,
        ),
    ]
}


def tool_specs(names: list[str] | None = None) -> list[ToolSpec]:
    """The specs of the named tools (all of them by default), in a stable order."""
    return [TOOLS[name].spec for name in (names or list(TOOLS))]


# --- dispatch ------------------------------------------------------------------------------------

def run_tool(context: ToolContext, call: ToolCall | tuple[str, dict[str, Any]]) -> ToolResult:
    """Run one tool call and return its (truncated) observation. Never raises for the agent's
    mistakes; raises SandboxFailed / ModelFailed when the infrastructure breaks."""
    name, arguments = (call.name, call.arguments) if isinstance(call, ToolCall) else call
    result = _dispatch(context, name, arguments, invalid=call.invalid_arguments if isinstance(call, ToolCall) else None)
    result.observation, cut = truncate(result.observation, context.max_observation_chars)
    result.truncated = result.truncated or cut
    return result


def _dispatch(context: ToolContext, name: str, arguments: dict[str, Any], *, invalid: str | None) -> ToolResult:
    tool = TOOLS.get(name)
    if tool is None:
        return ToolResult(observation=f"Error: unknown tool {name!r}. Available tools: {', '.join(TOOLS)}", error=True)
    if invalid is not None:
        return ToolResult(
            observation=f"Error: the arguments of {name} are not a JSON object: {invalid[:500]!r}. Call it again with valid JSON.",
            error=True,
        )
    unknown = set(arguments) - set(tool.arguments.model_fields)
    try:
        result = tool.run(context, parse_arguments(name, tool.arguments, arguments))
    except (ArgumentsError, ToolError) as error:
        return ToolResult(observation=f"Error: {error}", error=True)
    except (SandboxFailed, ModelFailed):
        raise
    except Exception as error:  # noqa: BLE001 - a harness bug must not end the run; it is recorded
        return ToolResult(
            observation=f"Error: the tool {name} failed internally ({type(error).__name__}: {error})",
            error=True,
            traceback=traceback.format_exc(),
        )
    if unknown:
        result.observation += f"\n[ignored unknown argument(s): {', '.join(sorted(unknown))}]"
    return result

