"""Facts of a stored trajectory, and the exceptions in a text. Pure: no ORM, no Django models.

A trajectory comes as stored (runs.agents.trajectory's format, as a dict); uploads may hold odd
values anywhere, so everything here reads leniently and never raises: a field of the wrong type
counts as absent.

An experiment run is a step that ran a command (it recorded an exit code or a time-out, or its
tool runs commands: ours, or another agent's shell or Python tool) and that command ran Python
code (our Python tool, a foreign Python tool, or a command that invokes python or a .py file).
It crashed when it exited non-zero, timed out or printed a Python traceback; it worked when it
exited 0 (or recorded no exit code), printed no traceback and printed something besides the
status line our tools append. Step numbers are 1-based positions, the replay's #step-N.

Exceptions (`exceptions_in`) are the final lines of the Python tracebacks in a text
("ValueError: ..."), their message normalised into a pattern (numbers, paths, shapes and
addresses masked; quoted identifiers kept) so that the same error in different runs groups.
"""
from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from typing import Any

from runs.analysis.marks import TRACEBACK_TEXT, error_kind, exit_code_of, step_marks, step_text

# Our tools that run a command (runs.agents.tools), and the one that always runs Python.
COMMAND_TOOLS = frozenset({"execute_python_script", "execute_bash_script", "command_line"})
PYTHON_TOOL = "execute_python_script"
# Other agents' tools that run commands or code (mini-swe-agent's and SWE-agent's "bash", Inspect's
# "bash" and "python", ...): recognised by name.
_FOREIGN_COMMAND_TOOL = re.compile(r"bash|shell|\bsh\b|terminal|command|exec|python|run_code|code_interpreter|cmd", re.I)
_FOREIGN_PYTHON_TOOL = re.compile(r"python|code_interpreter|run_code|execute_code", re.I)
# The arguments that hold what a command tool runs.
_COMMAND_ARGUMENTS = ("command", "cmd", "code", "script", "content", "input", "source", "arguments", "path")

# How much of a step's text is read: observations can be 100 kB; tracebacks and status lines are
# near the end, commands near the start.
MAX_SCAN_CHARS = 64_000
MAX_EXCEPTIONS_PER_TEXT = 20
MAX_MESSAGE_CHARS = 500
MAX_PATTERN_CHARS = 300
MAX_ERROR_LINE_CHARS = 300
MAX_TYPE_CHARS = 200

# The status line runs.agents.tools appends to a command's output (its last line), and its
# placeholder for none. Matched on the last line alone, whole: searched for across a 64 KB
# observation ("[timed out after ; ; ; ..."), the old pattern backtracked for minutes.
_STATUS_LINE = re.compile(r"\[(?:exit code -?\d+|timed out after [^\];\n]*); [^\]\n]*\]")
_NO_OUTPUT = "(no output)"


@dataclass(frozen=True)
class FoundException:
    """One exception: its type ("ValueError", "torch.cuda.OutOfMemoryError"), its message with
    numbers, paths and shapes masked, and the line as printed (cut)."""

    type: str
    pattern: str
    message: str


@dataclass
class StepException:
    step: int
    exception: FoundException


@dataclass
class TrajectoryFacts:
    steps: int = 0
    experiment_runs: int = 0
    first_run_step: int | None = None
    first_run_crashed: bool | None = None  # None: no experiment ran
    working_run_step: int | None = None
    seconds_to_working: float | None = None
    cost_to_working: float | None = None  # None: no working run, or a step's cost is unknown
    first_error_step: int | None = None
    first_error_line: str = ""
    exceptions: list[StepException] = field(default_factory=list)


# --- reading steps leniently ----------------------------------------------------------------------


def trajectory_steps(trajectory: Any) -> list:
    """The stored steps of a trajectory document ([] for anything that is not one)."""
    if not isinstance(trajectory, dict):
        return []
    steps = trajectory.get("steps")
    return steps if isinstance(steps, list) else []


def _field(step: Any, name: str) -> Any:
    return step.get(name) if isinstance(step, dict) else None


def _number(value: Any) -> float:
    """A duration or cost as a finite non-negative float (0 for anything else)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return 0.0
    value = float(value)
    return value if math.isfinite(value) and value > 0 else 0.0


def _head_and_tail(text: str, limit: int = MAX_SCAN_CHARS) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n{text[-half:]}"


def _command_text(step: dict) -> str:
    """What a command step ran, as far as its arguments say (bounded)."""
    arguments = step.get("arguments")
    if isinstance(arguments, str):
        return arguments[:MAX_SCAN_CHARS]
    if not isinstance(arguments, dict):
        return ""
    parts = [arguments[name] for name in _COMMAND_ARGUMENTS if isinstance(arguments.get(name), str)]
    return "\n".join(parts)[:MAX_SCAN_CHARS]


# --- experiment runs -------------------------------------------------------------------------------

# Where a command word may start: the start of a line or command, after a pipe, a quote or a paren.
_SEGMENT_SPLIT = re.compile(r"[;&|\n\"'`()]|\$\(")
# Words that run the next word (sudo, timeout 60, env X=1, ...) or set its environment.
_WRAPPERS = frozenset({"sudo", "nohup", "time", "exec", "env", "nice", "stdbuf", "xvfb-run", "command", "then", "do", "else", "!"})
_ASSIGNMENT = re.compile(r"^[A-Za-z_]\w*=")
_PYTHON_WORD = re.compile(r"^(?:\S*/)?(?:python(?:\d+(?:\.\d+)?)?|ipython\d*|pypy\d*)$")
_SCRIPT_WORD = re.compile(r"^\S*\.py$")


def invokes_python(command: str) -> bool:
    """Whether a shell command line (or script) runs Python: some command in it is python,
    python3, python3.11, /usr/bin/python, ... or a .py file. Arguments do not count (`cat run.py`
    runs no Python)."""
    for segment in _SEGMENT_SPLIT.split(command[:MAX_SCAN_CHARS]):
        words = segment.split()
        position = 0
        while position < len(words):
            word = words[position]
            if _ASSIGNMENT.match(word) or word in _WRAPPERS:
                position += 1
            elif word in ("timeout", "uv", "poetry", "conda", "pipenv") and position + 1 < len(words):
                position += 2  # timeout 60 python ..., uv run python ...
                while position < len(words) and words[position].startswith("-"):
                    position += 1
            else:
                break
        if position < len(words) and (_PYTHON_WORD.match(words[position]) or _SCRIPT_WORD.match(words[position])):
            return True
    return False


def ran_command(step: Any) -> bool:
    """Whether a step ran a command: it recorded an exit code or a time-out, or its tool runs
    commands (ours, or a foreign one recognised by name)."""
    if not isinstance(step, dict):
        return False
    if exit_code_of(step.get("exit_code")) is not None or step.get("timed_out") is True:
        return True
    tool = step.get("tool")
    return isinstance(tool, str) and (tool in COMMAND_TOOLS or bool(_FOREIGN_COMMAND_TOOL.search(tool)))


def is_experiment_run(step: Any) -> bool:
    """Whether a step ran the paper's code: a command that runs Python."""
    if not ran_command(step):
        return False
    tool = step.get("tool") if isinstance(step.get("tool"), str) else ""
    if tool == PYTHON_TOOL or (tool not in COMMAND_TOOLS and _FOREIGN_PYTHON_TOOL.search(tool)):
        return True
    return invokes_python(_command_text(step))


def program_output(observation: str) -> str:
    """A command's output without the status line our tools append ("[exit code 0; 1.2 s; cwd
    code]") and without the placeholder they print for no output."""
    text = observation.rstrip()
    newline = text.rfind("\n")
    if _STATUS_LINE.fullmatch(text, newline + 1):
        text = text[:max(newline, 0)]
    return "" if text.strip() == _NO_OUTPUT else text


def run_crashed(step: dict) -> bool:
    """An experiment run crashed: it exited non-zero, timed out or printed a Python traceback."""
    code = exit_code_of(step.get("exit_code"))
    return (code is not None and code != 0) or step.get("timed_out") is True or TRACEBACK_TEXT in step_text(step.get("observation"))


def run_worked(step: dict) -> bool:
    """An experiment run worked: it exited 0 (an exit code not recorded counts as none to go by),
    printed no traceback and printed something."""
    if run_crashed(step):
        return False
    return bool(program_output(step_text(step.get("observation"))).strip())


# --- facts -------------------------------------------------------------------------------------------


def trajectory_facts(trajectory: Any, *, max_steps: int | None = None) -> TrajectoryFacts:
    """The facts of a stored trajectory (see the module's docstring). Only the first `max_steps`
    steps are read (trajectories stored before the upload limits may hold 250,000); `steps` is
    the whole count. Never raises."""
    steps = trajectory_steps(trajectory)
    facts = TrajectoryFacts(steps=len(steps))
    seconds = 0.0
    cost: float | None = 0.0
    for number, step in enumerate(steps[:max_steps] if max_steps is not None else steps, start=1):
        if not isinstance(step, dict):
            continue
        seconds += _number(step.get("duration"))
        if cost is not None:
            cost = None if step.get("cost_unknown") is True else cost + _number(step.get("cost"))
        found = step_exceptions(step)
        facts.exceptions.extend(StepException(number, exception) for exception in found)
        kind = error_kind(step_marks(number, step))
        if kind and facts.first_error_step is None:
            facts.first_error_step = number
            facts.first_error_line = _error_line(step, found, kind)
        if not is_experiment_run(step):
            continue
        facts.experiment_runs += 1
        if facts.first_run_step is None:
            facts.first_run_step = number
            facts.first_run_crashed = run_crashed(step)
        if facts.working_run_step is None and run_worked(step):
            facts.working_run_step = number
            facts.seconds_to_working = seconds
            facts.cost_to_working = cost
    return facts


_ERROR_WORDS = re.compile(r"error|exception|failed|fatal|not found|no such|denied|killed", re.I)


def _error_line(step: dict, found: list[FoundException], kind: str) -> str:
    """The line that says what went wrong in an error step: its first exception, else the first
    output line that speaks of an error, else its last output line, else the error's kind."""
    if found:
        line = found[0].message
    else:
        output = program_output(_head_and_tail(step_text(step.get("observation"))))
        lines = [line.strip() for line in output.splitlines() if line.strip()]
        line = next((line for line in lines if _ERROR_WORDS.search(line)), lines[-1] if lines else kind)
    return line[:MAX_ERROR_LINE_CHARS]


# --- exceptions --------------------------------------------------------------------------------------

# The line that ends a traceback: a (dotted) exception type, then ": message" or nothing.
_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w]*(?:\.[A-Za-z_][\w]*)*)(?::\s?(.*))?$")
_EXCEPTION_NAME = re.compile(r"(?:Error|Exception|Interrupt|Exit|Warning|Iteration|Fault|Failure|Timeout)$")
_CHAINED = ("During handling of the above exception", "The above exception was the direct cause")


def step_exceptions(step: Any) -> list[FoundException]:
    """The exceptions of one stored step: in its observation and in its `traceback` field (the
    harness's record of a tool that failed). Bounded."""
    if not isinstance(step, dict):
        return []
    found = exceptions_in(step_text(step.get("observation")))
    traceback = step.get("traceback")
    if isinstance(traceback, str) and traceback.strip():
        from_field = exceptions_in(traceback) or _last_line_exception(traceback)
        found.extend(from_field)
    return found[:MAX_EXCEPTIONS_PER_TEXT]


def _last_line_exception(text: str) -> list[FoundException]:
    """A traceback field without the "Traceback" header: its last line, if it reads as one."""
    lines = [line for line in text[-MAX_SCAN_CHARS:].splitlines() if line.strip()]
    found = _exception_from_line(lines[-1].strip()) if lines else None
    return [found] if found is not None else []


def exceptions_in(text: Any) -> list[FoundException]:
    """The exception that ends each Python traceback in `text`, in order (at most
    MAX_EXCEPTIONS_PER_TEXT). Never raises."""
    if not isinstance(text, str) or TRACEBACK_TEXT not in text:
        return []
    text = _head_and_tail(text)
    found: list[FoundException] = []
    position = text.find(TRACEBACK_TEXT)
    while position >= 0 and len(found) < MAX_EXCEPTIONS_PER_TEXT:
        end = text.find(TRACEBACK_TEXT, position + len(TRACEBACK_TEXT))
        block = text[position + len(TRACEBACK_TEXT): end if end >= 0 else len(text)]
        exception = _traceback_exception(block)
        if exception is not None:
            found.append(exception)
        position = end
    return found


def _traceback_exception(block: str) -> FoundException | None:
    """The exception line of one traceback: after its frames (which are indented), the first line
    that reads as an exception with a name that says so (ValueError, KeyboardInterrupt, ...), else
    the first that reads as one at all: what a program prints to stdout may come in between."""
    fallback = None
    looked = 0
    for line in block.splitlines()[1:]:
        if not line.strip() or line[:1] in (" ", "\t") or line.lstrip().startswith("|"):
            continue
        if line.startswith(_CHAINED) or looked >= 10:
            break
        looked += 1
        found = _exception_from_line(line.strip())
        if found is not None and _EXCEPTION_NAME.search(found.type):
            return found
        fallback = fallback or found
    return fallback


def _exception_from_line(line: str) -> FoundException | None:
    match = _EXCEPTION_LINE.match(line[:2000])
    if match is None or len(match.group(1)) > MAX_TYPE_CHARS:
        return None
    message = match.group(2) or ""
    return FoundException(type=match.group(1), pattern=message_pattern(message), message=line[:MAX_MESSAGE_CHARS])


# --- normalising messages ------------------------------------------------------------------------------

_QUOTED = re.compile(r"'[^'\n]{0,300}'|\"[^\"\n]{0,300}\"")
_IDENTIFIER = re.compile(r"[A-Za-z_][\w.\-]*")
_HEX = re.compile(r"\b0x[0-9a-fA-F]+\b")
_TORCH_SIZE = re.compile(r"torch\.Size\(\[[^\]]{0,200}\]\)")
_TUPLE = re.compile(r"\(\s*-?\d+\s*,(?:\s*-?\d+\s*,)*\s*(?:-?\d+\s*)?\)")
_LIST = re.compile(r"\[\s*-?\d+(?:\s*,\s*-?\d+)+\s*\]")
_BY = re.compile(r"(?<![\w.])\d+(?:x\d+)+(?![\w.])")
# A relative path starts where a run of name characters does (not at every word boundary inside
# one) and its runs never give back characters, so a message such as "a.a.a..." cannot make it
# backtrack over every split of the run.
_PATH = re.compile(r"(?:(?<![\w<])(?:[A-Za-z]:\\|~/|\.{1,2}/|/)[^\s'\",:;()\[\]<>]+|(?<![\w.\-])[\w.\-]++(?:/[\w.\-]++)+/?)")
_NUMBER = re.compile(r"(?<![\w])[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w])")
_SPACES = re.compile(r"\s+")


def message_pattern(message: str) -> str:
    """An exception message with what varies between runs masked: hex addresses (<hex>), shapes
    such as torch.Size([3, 4]), (3, 4), [3, 4] or 64x128 (<shape>), file paths (<path>) and
    numbers (<n>). A quoted identifier ('weight', 'fc1.bias') stays: it names what went wrong."""
    parts = []
    position = 0
    message = message[:2000]
    for quoted in _QUOTED.finditer(message):
        parts.append(_mask(message[position:quoted.start()]))
        inner = quoted.group()[1:-1]
        quote = quoted.group()[0]
        parts.append(quoted.group() if _IDENTIFIER.fullmatch(inner) else f"{quote}{_mask(inner)}{quote}")
        position = quoted.end()
    parts.append(_mask(message[position:]))
    return _SPACES.sub(" ", "".join(parts)).strip()[:MAX_PATTERN_CHARS]


def _mask(text: str) -> str:
    text = _HEX.sub("<hex>", text)
    text = _TORCH_SIZE.sub("<shape>", text)
    text = _TUPLE.sub("<shape>", text)
    text = _LIST.sub("<shape>", text)
    text = _BY.sub("<shape>", text)
    text = _PATH.sub("<path>", text)
    return _NUMBER.sub("<n>", text)

