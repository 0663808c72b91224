"""Masking functions of a research codebase by AST, not by line numbers.

A masked function keeps its decorators and its whole signature; only its body is replaced by a
stub: the description as a docstring, then `raise NotImplementedError`. Every byte outside the
replaced bodies is kept, and the result must parse (`verify_masked` checks both).

Functions are found by qualified name, a bare or partial name choosing by evidence, never by
guessing (runs.benchmark.locating `locate_function`). Offsets and lines are as
runs.benchmark.source_lines reads them.

Pure Python: no Django here, so the sandbox side and scripts can use it too.
"""
from __future__ import annotations

import ast
import re
import textwrap
import tokenize
from dataclasses import dataclass, field
from typing import TypeGuard

from runs.benchmark import python_ast
from runs.benchmark.locating import (
    FunctionLocation,
    HintStatus,
    MaskingError,
    analyse_source,
    locate_function,
    location_in,
    parsed,
    statements,
)
from runs.benchmark.source_lines import NEWLINE, SourceLines, python_tokens, split_keepends, string_rows

__all__ = [
    "MaskTarget",
    "MaskedFile",
    "STUB_STATEMENT",
    "function_body_source",
    "mask_source",
    "normalise_code",
    "replace_function_body",
    "verify_masked",
]

STUB_STATEMENT = "raise NotImplementedError"


@dataclass(frozen=True)
class MaskTarget:
    """One function to mask: its (qualified, partial or bare) name, description and line hint."""

    name: str
    description: str = ""
    line_hint: int | None = None


@dataclass(frozen=True)
class MaskedFile:
    """The result of masking one file.

    `locations[i]`, `spans[i]` and `replacements[i]` all belong to the i-th target, in the order
    the targets were given; `spans` are offsets into the ORIGINAL source and `replacements` the
    stub text that took each span's place.
    """

    text: str
    locations: list[FunctionLocation]
    spans: list[tuple[int, int]]
    replacements: list[str]
    notes: list[str] = field(default_factory=list)


# --- bodies: reading, stubs, replacing ----------------------------------------------------------


def _dedent_body(text: str, indent: str, *, inline: bool) -> str:
    """A body span's text without the body's indentation, with `\\n` line breaks.

    Lines inside multi-line strings are left alone (their whitespace is content); whitespace-only
    lines become empty.
    """
    if inline:
        # The span starts right after the colon: drop the blank (and any backslash continuation)
        # in front of the first statement.
        text = re.sub(r"^(?:[ \t\f]*\\(?:\r\n|\r|\n))*[ \t\f]*", "", text)
    lines = [NEWLINE.sub("", line) for line in split_keepends(text)]
    in_string = string_rows(text)
    out = []
    for row, line in enumerate(lines):
        if row in in_string or (inline and row == 0):
            out.append(line)
        elif not line.strip(" \t\f"):
            out.append("")
        elif line.startswith(indent):
            out.append(line[len(indent) :])
        else:
            out.append(line)  # a comment or bracket continuation indented less than the body
    return "\n".join(out)


def _indent_body(body: str, indent: str, newline: str) -> str:
    """The inverse of `_dedent_body`: indent code lines, keep string lines, use `newline`."""
    in_string = string_rows(body)
    out = []
    for row, line in enumerate(body.split("\n")):
        if row in in_string:
            out.append(line)
        elif not line.strip(" \t\f"):
            out.append("")
        else:
            out.append(indent + line)
    return newline.join(out)


def _prepare_body(new_body: str) -> str:
    body = NEWLINE.sub("\n", new_body)
    first_code = next((line for line in body.split("\n") if line.strip()), "")
    if first_code[:1].isspace():
        # Handed an indented body after all. Only then dedent: textwrap also blanks
        # whitespace-only lines, which inside a multi-line string would change its value.
        body = textwrap.dedent(body)
    lines = body.split("\n")
    while lines and not lines[-1].strip():
        lines.pop()  # the span ends before the last line break, which stays in the file
    return "\n".join(lines)


def _escape_docstring(text: str) -> str:
    """Text made safe inside `\"\"\"...\"\"\"` with its value unchanged."""
    text = text.replace("\\", "\\\\").replace("\0", "\\x00")
    # No two unescaped quotes in a row can then form a closing `"""`, and a final quote cannot
    # merge with the closing delimiter.
    return re.sub(r'"(?="|\Z)', r'\\"', text)


def _stub(description: str, indent: str, newline: str) -> str:
    """The replacement body: the description as a docstring, then `raise NotImplementedError`.

    An empty description gives no docstring: the benchmark's text is the only information the
    agent should get, and a generic sentence would read as if it were a real description.
    """
    description = NEWLINE.sub("\n", description or "").strip()
    lines = []
    if description:
        doc_lines = [line.rstrip() for line in _escape_docstring(description).split("\n")]
        if len(doc_lines) == 1:
            lines.append(f'{indent}"""{doc_lines[0]}"""')
        else:
            lines.append(f'{indent}"""{doc_lines[0]}')
            lines.extend(indent + line if line else "" for line in doc_lines[1:])
            lines.append(f'{indent}"""')
    lines.append(indent + STUB_STATEMENT)
    return newline.join(lines)


def function_body_source(source: str, name: str, *, line_hint: int | None = None) -> str:
    """The original body of a function, dedented, with `\\n` line breaks and no final line break.

    This is exactly what `replace_function_body` expects back: replacing a body by its own
    `function_body_source` gives the file back unchanged (bodies written on the `def` line and
    whitespace-only lines aside).
    """
    location = locate_function(source, name, line_hint=line_hint)
    text = source[location.body_start : location.body_end]
    return _dedent_body(text, location.body_indent, inline=location.inline)


def replace_function_body(source: str, name: str, new_body: str, *, line_hint: int | None = None) -> str:
    """The source with one function's body replaced by `new_body` (given dedented).

    The body is indented with the function's body indentation and the file's line breaks; every
    byte outside the body is kept. Raises MaskingError when the body is empty or the result does
    not parse.
    """
    analysis = analyse_source(source)
    location = location_in(analysis, name, line_hint)
    body = _prepare_body(new_body)
    if not body.strip():
        raise MaskingError(f"the new body for `{location.qualified_name}` (line {location.def_line}) is empty")
    lines = analysis.lines
    newline = lines.newline(lines.line_of(location.body_start))
    text = (newline if location.inline else "") + _indent_body(body, location.body_indent, newline)
    result = source[: location.body_start] + text + source[location.body_end :]
    try:
        parsed(result)  # the scope rule reads the result's tree next
    except SyntaxError as error:
        raise MaskingError(
            f"replacing the body of `{location.qualified_name}` (line {location.def_line}) gives code that "
            f"does not parse: {error.msg} at line {error.lineno}"
        ) from None
    return result


# --- masking ------------------------------------------------------------------------------------


def _count_breaks(text: str) -> int:
    return len(NEWLINE.findall(text))


def _is_stub(node: ast.AST) -> TypeGuard[ast.FunctionDef | ast.AsyncFunctionDef]:
    if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        return False
    body = list(node.body)
    if len(body) == 2 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
        body = body[1:]
    if len(body) != 1 or not isinstance(body[0], ast.Raise):
        return False
    exc = body[0].exc
    if isinstance(exc, ast.Call):
        exc = exc.func
    return isinstance(exc, ast.Name) and exc.id == "NotImplementedError"


def _first_difference(a: str, b: str) -> int:
    for index, (x, y) in enumerate(zip(a, b)):
        if x != y:
            return index
    return min(len(a), len(b))


def verify_masked(original: str, masked: MaskedFile) -> None:
    """Check that a masked file parses, equals the original with each span replaced by its
    replacement, and has each masked function at its shifted line with a stub body. Raises
    MaskingError otherwise.
    """
    if len(masked.replacements) != len(masked.spans):
        raise MaskingError(f"{len(masked.spans)} masked spans but {len(masked.replacements)} replacements")
    order = sorted(range(len(masked.spans)), key=lambda i: masked.spans[i])
    previous_end = 0
    for i in order:
        start, end = masked.spans[i]
        if not (previous_end <= start <= end <= len(original)):
            raise MaskingError(f"masked spans overlap or fall outside the original: {sorted(masked.spans)}")
        previous_end = end

    pieces, cursor = [], 0
    for i in order:
        start, end = masked.spans[i]
        pieces += [original[cursor:start], masked.replacements[i]]
        cursor = end
    rebuilt = "".join(pieces) + original[cursor:]
    if rebuilt != masked.text:
        line = SourceLines(masked.text).line_of(_first_difference(rebuilt, masked.text))
        raise MaskingError(f"the masked text differs from the original outside the masked bodies (line {line})")

    try:
        tree = python_ast.parse(masked.text)
    except SyntaxError as error:
        raise MaskingError(f"the masked file does not parse: {error.msg} at line {error.lineno}") from None

    stubs_at = {node.lineno for node in statements(tree) if _is_stub(node)}
    for location in masked.locations:
        shift = sum(
            _count_breaks(masked.replacements[i]) - _count_breaks(original[slice(*masked.spans[i])])
            for i in order
            if masked.spans[i][0] < location.body_start
        )
        if location.def_line + shift not in stubs_at:
            raise MaskingError(f"`{location.qualified_name}` (line {location.def_line}) is not a stub after masking")


def _check_distinct(located: list[FunctionLocation], requested: list[str], filename: str) -> None:
    """MaskingError for a function that is a target twice, or inside another target."""
    seen: dict[int, int] = {}
    for index, location in enumerate(located):
        if location.body_start in seen:
            other = seen[location.body_start]
            raise MaskingError(
                f"{filename}: `{location.qualified_name}` (line {location.def_line}) is a target twice "
                f"(as `{requested[other]}` and `{requested[index]}`)"
            )
        seen[location.body_start] = index
    by_position = sorted(located, key=lambda loc: loc.body_start)
    enclosing = None
    for location in by_position:
        if enclosing is not None and location.body_start < enclosing.body_end:
            raise MaskingError(
                f"{filename}: `{location.qualified_name}` (line {location.def_line}) is inside "
                f"`{enclosing.qualified_name}` (line {enclosing.def_line}), which is masked too; masking "
                f"`{enclosing.qualified_name}` already removes it"
            )
        if enclosing is None or location.body_end > enclosing.body_end:
            enclosing = location


def mask_source(source: str, targets: list[MaskTarget], *, filename: str = "<file>") -> MaskedFile:
    """Replace the body of each target function by a stub (docstring + `raise NotImplementedError`).

    Decorators, the whole signature and every byte outside the bodies are kept; the stub uses the
    body's own indentation and the file's line breaks, and a body written on the `def` line becomes
    an indented block. Targets may come in any order. A target named twice, or nested inside another
    target (masking the outer one already removes it), is an error. Stale line hints are noted in
    `notes`. The result is checked with `verify_masked`. Raises MaskingError (messages start with
    `filename`).
    """
    try:
        analysis = analyse_source(source)
    except MaskingError as error:
        raise MaskingError(f"{filename}: {error}") from None
    lines = analysis.lines
    located: list[FunctionLocation] = []
    for target in targets:
        try:
            located.append(location_in(analysis, target.name, target.line_hint))
        except MaskingError as error:
            raise type(error)(f"{filename}: {error}") from None
    _check_distinct(located, [target.name for target in targets], filename)

    replacements = []
    for target, location in zip(targets, located):
        newline = lines.newline(lines.line_of(location.body_start))
        stub = _stub(target.description, location.body_indent, newline)
        replacements.append((newline if location.inline else "") + stub)

    text = source
    for index in sorted(range(len(located)), key=lambda i: located[i].body_start, reverse=True):
        location = located[index]
        text = text[: location.body_start] + replacements[index] + text[location.body_end :]

    masked = MaskedFile(
        text=text,
        locations=located,
        spans=[(loc.body_start, loc.body_end) for loc in located],
        notes=[loc.note for loc in located if loc.hint_status == HintStatus.STALE and loc.note],
        replacements=replacements,
    )
    try:
        verify_masked(source, masked)
    except MaskingError as error:
        raise MaskingError(f"{filename}: {error}") from None
    return masked


# --- comparing code -----------------------------------------------------------------------------


def _drop_docstrings(tree: ast.AST) -> None:
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                if isinstance(body[0].value.value, str):
                    body.pop(0)
                    if not body and not isinstance(node, ast.Module):
                        body.append(ast.Pass())


def normalise_code(text: str) -> str:
    """A canonical form of code for leak comparison.

    Code that parses (after dedenting) is unparsed from its AST with docstrings removed, so
    formatting, comments and quoting do not matter. Anything else falls back to its tokens
    without comments, with all whitespace removed.
    """
    for candidate in (text, textwrap.dedent(NEWLINE.sub("\n", text))):
        try:
            tree = python_ast.parse(candidate)
        except (SyntaxError, ValueError):
            continue
        _drop_docstrings(tree)
        return ast.unparse(tree)
    flat = NEWLINE.sub("\n", text)
    tokens = list(python_tokens(flat))
    if tokens and tokens[-1].type == tokenize.ENDMARKER:
        squashed = "".join(t.string for t in tokens if t.type != tokenize.COMMENT)
    else:
        squashed = re.sub(r"#[^\n]*", "", flat)  # tokenizing gave up: strip what looks like comments
    return re.sub(r"\s+", "", squashed)
