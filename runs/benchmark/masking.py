"""Masking functions of a research codebase by AST, not by line numbers.

A masked function keeps its decorators and its whole signature; only its body is replaced by a
stub: the description as a docstring, then `raise NotImplementedError`. Every byte outside the
replaced bodies is kept, and the result must parse (`verify_masked` checks both).

Functions are named by qualified name (`Loss.__call__`, `outer.inner`). The upstream data names
them by bare name plus line numbers that are often stale, so a bare or partial name is accepted
and line numbers are only ever evidence to choose between definitions (`locate_function` lists
the rules); a hint that does not match is reported (`hint_status="stale"`), never obeyed, and
when the evidence picks no single definition the name is ambiguous: nothing is guessed.

Offsets are 0-based character offsets into the `str` source (`ast` reports UTF-8 byte columns,
which are converted). Lines end in `\\n`, `\\r\\n` or `\\r`, exactly as Python itself splits them.

Pure Python: no Django here, so the sandbox side and scripts can use it too.
"""
from __future__ import annotations

import ast
import bisect
import difflib
import operator
import re
import textwrap
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any, Protocol, TypeGuard

from runs.benchmark import python_ast

__all__ = [
    "AmbiguousFunction",
    "FunctionLocation",
    "FunctionNotFound",
    "MaskTarget",
    "MaskedFile",
    "MaskingError",
    "STUB_STATEMENT",
    "accessor_kind",
    "functions_by_name",
    "function_body_source",
    "list_functions",
    "locate_function",
    "mask_source",
    "normalise_code",
    "replace_function_body",
    "verify_masked",
]

STUB_STATEMENT = "raise NotImplementedError"
_ACCESSORS = ("getter", "setter", "deleter")
NEWLINE = re.compile(r"\r\n|\r|\n")
_DEFAULT_UNIT = "    "


class MaskingError(Exception):
    """A function could not be located, masked or replaced; the message says what and where."""


class FunctionNotFound(MaskingError):
    """No definition matches the requested name."""


class AmbiguousFunction(MaskingError):
    """Several definitions match the requested name and nothing chooses between them."""


class HintStatus(StrEnum):
    """How a line hint relates to the definition chosen."""

    NONE = "none"  # no hint
    EXACT = "exact"  # the hint falls on its decorators, `def` line or body
    STALE = "stale"  # it does not: reported, never obeyed


class LocationRule(StrEnum):
    """The evidence that chose a definition (`locate_function` lists the rules in order)."""

    ONLY_DEFINITION = "only definition"
    DEF_LINE = "def line"
    DECORATOR_LINE = "decorator line"
    INSIDE = "inside"
    CLASS_LINE = "class line"
    SPAN = "span"
    MAIN_DEFINITION = "main definition"


@dataclass(frozen=True)
class FunctionLocation:
    """Where a function is and which span of the source is its body.

    `body_start`/`body_end` delimit the replaced span. For an ordinary function it starts at the
    beginning of the line after the signature's colon (so comments above the first statement go
    with the body, while a comment on the `def` line stays) and ends at the end of the last body
    line, before its line break, including trailing comment lines indented deeper than the `def`.
    For a body on the colon's line (`def f(x): return x`, `inline=True`) it starts right after
    the colon.

    `hint_status` says how the line hint relates to the definition chosen, `rule` names the
    evidence that chose it. `note` explains a
    choice the hint did not make; `scope` holds the names of the enclosing classes and functions.
    """

    qualified_name: str
    def_line: int
    body_start: int
    body_end: int
    body_indent: str
    hint_status: HintStatus
    rule: LocationRule
    note: str = ""
    inline: bool = False
    scope: tuple[str, ...] = ()


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


# --- source bookkeeping -------------------------------------------------------------------------


class Positioned(Protocol):
    """An `ast` node with a place in the source: an expression, a statement, an argument, ..."""

    lineno: int
    col_offset: int
    end_lineno: int | None
    end_col_offset: int | None


class SourceLines:
    """Line starts and ends of a source, and conversion of `ast` positions to offsets."""

    def __init__(self, text: str):
        self.text = text
        self.starts = [0]
        self.ends = []  # offset of each line's end, before its line break
        self.breaks = []  # each line's line break ("" for a last line without one)
        for match in NEWLINE.finditer(text):
            self.ends.append(match.start())
            self.breaks.append(match.group())
            self.starts.append(match.end())
        self.ends.append(len(text))
        self.breaks.append("")

    @property
    def count(self) -> int:
        return len(self.starts)

    def content(self, lineno: int) -> str:
        return self.text[self.starts[lineno - 1] : self.ends[lineno - 1]]

    def offset(self, lineno: int, col: int) -> int:
        """Character offset of an `ast` position (1-based line, UTF-8 byte column)."""
        content = self.content(lineno)
        if not content.isascii():
            col = len(content.encode("utf-8", "surrogatepass")[:col].decode("utf-8", "ignore"))
        return self.starts[lineno - 1] + col

    def start_of(self, node: Positioned) -> int:
        return self.offset(node.lineno, node.col_offset)

    def end_of(self, node: Positioned) -> int:
        # ast.parse gives every node it makes an end; only a node built by hand may lack one.
        if node.end_lineno is None or node.end_col_offset is None:
            raise ValueError(f"the {type(node).__name__} node has no end position")
        return self.offset(node.end_lineno, node.end_col_offset)

    def char_col(self, lineno: int, col: int) -> int:
        return self.offset(lineno, col) - self.starts[lineno - 1]

    def line_of(self, offset: int) -> int:
        """1-based line holding a character offset."""
        return bisect.bisect_right(self.starts, offset)

    def indent(self, lineno: int) -> str:
        """The line's leading whitespace."""
        line = self.content(lineno)
        return line[: len(line) - len(line.lstrip(" \t\f"))]

    def newline(self, lineno: int) -> str:
        """The line break to use near a line: its own, else the file's first, else `\\n`."""
        own = self.breaks[lineno - 1]
        if own:
            return own
        return next((b for b in self.breaks if b), "\n")


def _split_keepends(text: str) -> list[str]:
    """Physical lines with their breaks, split the way Python splits them (not str.splitlines)."""
    lines, start = [], 0
    for match in NEWLINE.finditer(text):
        lines.append(text[start : match.end()])
        start = match.end()
    if start < len(text) or not lines:
        lines.append(text[start:])
    return lines


def _tokens(text: str) -> Iterator[tokenize.TokenInfo]:
    """Tokens of a fragment, stopping quietly where the fragment stops being tokenizable."""
    lines = iter(_split_keepends(text))
    try:
        yield from tokenize.generate_tokens(lambda: next(lines, ""))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return


def _string_rows(text: str) -> set[int]:
    """0-based rows of `text` that begin inside a multi-line string.

    Those rows must never be re-indented or dedented: their leading whitespace is string content.
    """
    rows: set[int] = set()
    for token in _tokens(text):
        (start_row, _), (end_row, _) = token.start, token.end
        if end_row > start_row and token.type not in (tokenize.NL, tokenize.NEWLINE):
            rows.update(range(start_row, end_row))  # 1-based rows start_row+1..end_row, as 0-based
    return rows


# --- finding functions --------------------------------------------------------------------------


@dataclass(frozen=True)
class _Function:
    qualified_name: str  # canonical: unique except for genuine redefinitions
    base_name: str  # shared by a property's getter/setter/deleter and by overloads
    node: ast.FunctionDef | ast.AsyncFunctionDef
    primary: bool  # not a setter/deleter/explicit getter, not an @overload
    aliases: tuple[str, ...]
    scope: tuple[str, ...] = ()  # the names of the classes and functions enclosing it
    owner: ast.AST | None = None  # the class or function it is defined in (None: the module)

    @property
    def def_line(self) -> int:
        return self.node.lineno

    @property
    def first_line(self) -> int:
        return min([d.lineno for d in self.node.decorator_list] + [self.node.lineno])

    @property
    def end_line(self) -> int:
        return self.node.end_lineno or self.node.lineno

    def matches_hint(self, hint: int) -> bool:
        return self.first_line <= hint <= self.end_line


def _decorator_name(decorator: ast.expr) -> str:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Name):
        return target.id
    if isinstance(target, ast.Attribute):
        return target.attr
    return ""


def accessor_kind(node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
    """"getter", "setter" or "deleter" for a property accessor (`@name.setter`), else None."""
    for decorator in node.decorator_list:
        if (
            isinstance(decorator, ast.Attribute)
            and decorator.attr in _ACCESSORS
            and isinstance(decorator.value, ast.Name)
            and decorator.value.id == node.name
        ):
            return decorator.attr
    return None


_BLOCK_FIELDS = ("body", "orelse", "finalbody", "handlers", "cases")


def _statements(node: ast.AST) -> Iterator[ast.AST]:
    """Every statement (and except/case clause) under `node`, in source order.

    Definitions only occur in statement blocks, so expressions need not be visited; that keeps
    large files quick.
    """
    for name in _BLOCK_FIELDS:
        for child in getattr(node, name, None) or ():
            yield child
            yield from _statements(child)


def _collect(tree: ast.Module) -> list[_Function]:
    functions = []

    def visit(node: ast.AST, scope: tuple[str, ...], owner: ast.AST | None) -> None:
        for name in _BLOCK_FIELDS:
            for child in getattr(node, name, None) or ():
                if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    functions.append(_function(child, scope, owner))
                    visit(child, (*scope, child.name), child)
                elif isinstance(child, ast.ClassDef):
                    visit(child, (*scope, child.name), child)
                else:
                    visit(child, scope, owner)

    visit(tree, (), None)
    return functions


def _function(
    node: ast.FunctionDef | ast.AsyncFunctionDef, scope: tuple[str, ...], owner: ast.AST | None = None
) -> _Function:
    base = ".".join([*scope, node.name])
    accessor = accessor_kind(node)
    is_overload = any(_decorator_name(d) == "overload" for d in node.decorator_list)
    is_property = any(_decorator_name(d) == "property" for d in node.decorator_list)
    qualified = f"{base}.{accessor}" if accessor else base
    aliases = (base, qualified) if accessor else ((base, f"{base}.getter") if is_property else (base,))
    return _Function(
        qualified_name=qualified,
        base_name=base,
        node=node,
        primary=accessor is None and not is_overload,
        aliases=aliases,
        scope=scope,
        owner=owner,
    )


def functions_by_name(tree: ast.Module) -> dict[str, list[tuple[tuple[str, ...], ast.FunctionDef | ast.AsyncFunctionDef]]]:
    """Every function of a parsed file by canonical qualified name: (enclosing scope, node) of each
    definition, in source order, without @overload stubs (unless only stubs carry the name)."""
    found: dict[str, list[_Function]] = {}
    for function in _collect(tree):
        found.setdefault(function.qualified_name, []).append(function)
    return {
        name: [(f.scope, f.node) for f in ([f for f in group if f.primary] or group)] for name, group in found.items()
    }


@dataclass(frozen=True)
class _Analysis:
    source: str
    lines: SourceLines
    tree: ast.Module
    functions: tuple[_Function, ...]
    classes: tuple[ast.ClassDef, ...] = ()


@lru_cache(maxsize=32)
def _parse(source: str) -> _Analysis:
    tree = python_ast.parse(source)
    functions = tuple(sorted(_collect(tree), key=lambda f: (f.def_line, f.node.col_offset)))
    classes = tuple(node for node in _statements(tree) if isinstance(node, ast.ClassDef))
    return _Analysis(source=source, lines=SourceLines(source), tree=tree, functions=functions, classes=classes)


def parsed(source: str) -> ast.Module:
    """The source's tree, as ast.parse gives it (and raising what it raises), parsed once for the
    several reads of one text that masking and the scope rule (runs.benchmark.scope) make. The tree
    is shared between them: read it, never change it."""
    return _parse(source).tree


def _analyse(source: str) -> _Analysis:
    try:
        return _parse(source)
    except SyntaxError as error:
        raise MaskingError(f"the source does not parse: {error.msg} at line {error.lineno}") from None
    except ValueError as error:  # a NUL byte, on Python before 3.12
        raise MaskingError(f"the source does not parse: {error}") from None


def _split_name(name: str) -> str:
    parts = [part.strip() for part in str(name).strip().split(".")]
    parts = [part for part in parts if part != "<locals>"]
    if not parts or any(not part for part in parts):
        raise FunctionNotFound(f"`{name}` is not a function name")
    return ".".join(parts)


def _describe(functions: Iterable[_Function]) -> str:
    return ", ".join(f"`{f.qualified_name}` at line {f.def_line}" for f in functions)


def _hint_text(line_hint: int | None) -> str:
    return f" (line hint {line_hint})" if line_hint is not None else ""


def _not_found(analysis: _Analysis, requested: str, key: str, line_hint: int | None) -> FunctionNotFound:
    depth = key.count(".") + 1
    by_tail: dict[str, list[_Function]] = {}
    for function in analysis.functions:
        tail = ".".join(function.qualified_name.split(".")[-depth:])
        by_tail.setdefault(tail, []).append(function)
    close = difflib.get_close_matches(key, list(by_tail), n=5, cutoff=0.6)
    suggestions = [f for tail in close for f in by_tail[tail]]
    message = f"no function `{requested}`{_hint_text(line_hint)}"
    if suggestions:
        message += f"; did you mean {_describe(suggestions)}?"
    elif not analysis.functions:
        message += "; the source defines no functions"
    elif len(analysis.functions) <= 12:
        message += f"; the source defines {_describe(analysis.functions)}"
    else:
        message += f"; the source defines {len(analysis.functions)} functions, none with a similar name"
    return FunctionNotFound(message)


def _line_number(value: Any, what: str, name: str) -> int | None:
    if value is None:
        return None
    try:
        if isinstance(value, bool):
            raise TypeError
        return operator.index(value)  # also numpy and pandas integers
    except TypeError:
        raise MaskingError(f"{what} {value!r} for `{name}` is not a line number") from None


def _line_span(span: Any, name: str) -> tuple[int, int] | None:
    if span is None:
        return None
    try:
        given_first, given_last = span
    except (TypeError, ValueError):
        raise MaskingError(f"span {span!r} for `{name}` is not a pair of line numbers") from None
    first, last = _line_number(given_first, "span start", name), _line_number(given_last, "span end", name)
    if first is None or last is None or not 1 <= first <= last:
        raise MaskingError(f"span {first}-{last} for `{name}` is not a range of lines")
    return first, last


@dataclass(frozen=True)
class _Choice:
    function: _Function
    hint_status: HintStatus
    rule: LocationRule
    note: str = ""


def _main_definition(candidates: list[_Function]) -> _Function | None:
    """The one definition a shared name means: the only candidate, or, if the candidates are one
    property's accessors or one function's overloads, the getter, the implementation. None otherwise."""
    if len(candidates) == 1:
        return candidates[0]
    primary = [f for f in candidates if f.primary]
    if len({f.base_name for f in candidates}) == 1 and len(primary) == 1:
        return primary[0]
    return None


def _class_at(analysis: _Analysis, line: int) -> ast.ClassDef | None:
    """The class whose statement (decorators and header, up to its first statement) holds `line`."""

    def first_line(node: ast.stmt) -> int:
        return min([d.lineno for d in getattr(node, "decorator_list", ())] + [node.lineno])

    for node in analysis.classes:
        if first_line(node) <= line <= max(node.lineno, first_line(node.body[0]) - 1):
            return node
    return None


def _in_span(candidates: list[_Function], span: tuple[int, int]) -> list[_Function]:
    """The candidates whose lines overlap the span; of nested ones containing it all, the innermost."""
    first, last = span
    overlapping = [f for f in candidates if f.first_line <= last and first <= f.end_line]
    containing = [f for f in overlapping if f.first_line <= first and last <= f.end_line]
    if len(overlapping) > 1 and containing:
        return [min(containing, key=lambda f: f.end_line - f.first_line)]
    return overlapping


def _choose(analysis: _Analysis, name: str, line_hint: int | None, span: tuple[int, int] | None = None) -> _Choice:
    """The definition `name` refers to, chosen by evidence (rules in `locate_function`)."""
    line_hint = _line_number(line_hint, "line hint", name)
    span = _line_span(span, name)
    key = _split_name(name)
    candidates = [f for f in analysis.functions if any(a == key or a.endswith("." + key) for a in f.aliases)]
    if not candidates:
        raise _not_found(analysis, name, key, line_hint)

    def hint_rule(function: _Function) -> LocationRule:
        if function.def_line == line_hint:
            return LocationRule.DEF_LINE
        if any(d.lineno == line_hint for d in function.node.decorator_list):
            return LocationRule.DECORATOR_LINE
        return LocationRule.INSIDE

    if len(candidates) == 1:
        only = candidates[0]
        if line_hint is None:
            return _Choice(only, HintStatus.NONE, LocationRule.ONLY_DEFINITION)
        if only.matches_hint(line_hint):
            return _Choice(only, HintStatus.EXACT, hint_rule(only))
        note = (
            f"line hint {line_hint} does not match; `{only.qualified_name}` is defined at line "
            f"{only.def_line} (lines {only.first_line}-{only.end_line})"
        )
        return _Choice(only, HintStatus.STALE, LocationRule.ONLY_DEFINITION, note)

    status = HintStatus.NONE if line_hint is None else HintStatus.STALE
    everyone = f"{len(candidates)} definitions of `{name}` ({_describe(candidates)})"
    unmatched = "" if line_hint is None else f" (line hint {line_hint} matches none of them)"
    all_candidates = candidates
    tried = []
    if line_hint is None:
        tried.append("no line hint")
    else:
        matching = [f for f in candidates if f.matches_hint(line_hint)]
        # The def line itself is the strongest evidence, then a decorator line, then (below) the
        # statement of a class defining one of them, then the innermost definition containing the hint.
        best = min(
            matching,
            key=lambda f: (hint_rule(f) != LocationRule.DEF_LINE, hint_rule(f) != LocationRule.DECORATOR_LINE, f.end_line - f.first_line),
            default=None,
        )
        if best is not None and hint_rule(best) != LocationRule.INSIDE:
            return _Choice(best, HintStatus.EXACT, hint_rule(best))
        # Upstream's header_line often points at the class statement instead of the method.
        owner = _class_at(analysis, line_hint)
        in_class = [f for f in candidates if owner is not None and f.owner is owner]
        if best is not None and not in_class:
            return _Choice(best, HintStatus.EXACT, LocationRule.INSIDE)
        if in_class:
            function = _main_definition(in_class)
            class_name = ".".join(in_class[0].scope)
            if function is not None:
                note = (
                    f"chose `{function.qualified_name}` at line {function.def_line}: of the {everyone}, the "
                    f"method of class `{class_name}`, on whose statement line hint {line_hint} falls"
                )
                return _Choice(function, status, LocationRule.CLASS_LINE, note)
            tried.append(f"line hint {line_hint} is on class `{class_name}`, which defines {len(in_class)} of them")
            candidates = in_class
        elif owner is not None:
            tried.append(f"line hint {line_hint} is in none of them and on class `{owner.name}`, which defines none")
        else:
            tried.append(f"line hint {line_hint} is in none of them nor on the statement of a class defining one")

    if span is None:
        tried.append("no span")
    else:
        spanned = _in_span(candidates, span)
        function = _main_definition(spanned)
        if function is not None:
            note = (
                f"chose `{function.qualified_name}` at line {function.def_line}: of the {everyone}, the one in "
                f"the span {span[0]}-{span[1]}{unmatched}"
            )
            return _Choice(function, status, LocationRule.SPAN, note)
        tried.append(f"the span {span[0]}-{span[1]} overlaps {len(spanned) or 'none'} of them")
        candidates = spanned or candidates

    # A property's accessors and an overloaded function's stubs share one name; the name
    # means the getter / the implementation, which is what a reader would mean by it.
    function = _main_definition(candidates)
    if function is not None:
        note = "" if line_hint is None else (
            f"chose `{function.qualified_name}` at line {function.def_line}: of the {everyone}, the definition "
            f"the name means{unmatched}"
        )
        return _Choice(function, status, LocationRule.MAIN_DEFINITION, note)
    raise AmbiguousFunction(
        f"`{name}` is ambiguous: {len(all_candidates)} definitions match ({_describe(all_candidates)}) and no evidence "
        f"picks one ({'; '.join(tried)}); give the qualified name or the def line as hint"
    )


def _header_colon(lines: SourceLines, node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
    """(line, character column) of the colon that ends the signature."""
    first = node.body[0]
    fragment = lines.text[lines.starts[node.lineno - 1] : lines.ends[first.lineno - 1]]
    body_at = (first.lineno - node.lineno + 1, lines.char_col(first.lineno, first.col_offset))
    colon = None
    # The last `:` operator before the first statement: colons inside annotations, defaults,
    # lambdas or strings come earlier or are not OP tokens.
    for token in _tokens(fragment):
        if token.start >= body_at:
            break
        if token.type == tokenize.OP and token.string == ":":
            colon = token.start
    if colon is None:
        raise MaskingError(f"could not find the end of the signature of the function at line {node.lineno}")
    return node.lineno + colon[0] - 1, colon[1]


def _indent_unit(analysis: _Analysis, def_indent: str) -> str:
    """The file's own indentation step, taken from its first indented block."""
    lines = analysis.lines
    for node in _statements(analysis.tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list) or not body or not hasattr(node, "lineno"):
            continue
        inner = lines.indent(body[0].lineno)
        # A block proper: the first statement starts its own line (not `def f(a,\n b): return`).
        if body[0].lineno <= node.lineno or lines.char_col(body[0].lineno, body[0].col_offset) != len(inner):
            continue
        outer = lines.indent(node.lineno)
        if inner.startswith(outer) and len(inner) > len(outer):
            return inner[len(outer) :]
    return "\t" if "\t" in def_indent else _DEFAULT_UNIT


def _location(analysis: _Analysis, choice: _Choice) -> FunctionLocation:
    lines, function = analysis.lines, choice.function
    node = function.node
    def_indent = lines.indent(node.lineno)
    colon_line, colon_col = _header_colon(lines, node)
    after_colon = lines.content(colon_line)[colon_col + 1 :].strip()
    first = node.body[0]
    if first.lineno > colon_line and (not after_colon or after_colon.startswith("#")):
        inline = False
        body_start = lines.starts[colon_line]  # beginning of the next line
        body_indent = lines.indent(first.lineno)
    else:
        inline = True
        body_start = lines.starts[colon_line - 1] + colon_col + 1
        body_indent = def_indent + _indent_unit(analysis, def_indent)

    last_line = node.body[-1].end_lineno or node.body[-1].lineno
    body_end = lines.ends[last_line - 1]
    # Comment lines indented deeper than the `def` that follow the last statement read as part
    # of the body (often commented-out code), so they go with it rather than leak.
    lineno = last_line + 1
    while lineno <= lines.count:
        content = lines.content(lineno)
        stripped = content.lstrip(" \t\f")
        if stripped:
            lead = content[: len(content) - len(stripped)]
            if not (stripped.startswith("#") and lead.startswith(def_indent) and len(lead) > len(def_indent)):
                break
            body_end = lines.ends[lineno - 1]
        lineno += 1
    return FunctionLocation(
        qualified_name=function.qualified_name,
        def_line=node.lineno,
        body_start=body_start,
        body_end=body_end,
        body_indent=body_indent,
        hint_status=choice.hint_status,
        note=choice.note,
        inline=inline,
        rule=choice.rule,
        scope=function.scope,
    )


def _find(
    source: str, name: str, line_hint: int | None, span: tuple[int, int] | None = None
) -> tuple[_Analysis, _Function, FunctionLocation]:
    analysis = _analyse(source)
    choice = _choose(analysis, name, line_hint, span)
    return analysis, choice.function, _location(analysis, choice)


def locate_function(
    source: str, name: str, *, line_hint: int | None = None, span: tuple[int, int] | None = None
) -> FunctionLocation:
    """Find the definition `name` refers to and the span of its body.

    `name` is a qualified name (`Class.method`, `outer.inner`, `outer.<locals>.inner`) or a bare or
    partial one (`__call__`, `Inner.method`): every definition whose qualified name equals it or
    ends with `.name` is a candidate. A property's getter, setter and deleter share a name, which
    means the getter; `Foo.bar.setter` (and `.deleter`, `.getter`) selects explicitly.

    `line_hint` (a line number) and `span` (first and last line of the function, or of its body as
    upstream gives it) only choose between candidates, by evidence, never by distance. The first
    rule that picks one definition wins; the chosen location's `rule` names it:

    1. "only definition": a single candidate is used whatever the hint says.
    2. "def line", "decorator line", "inside": the hint falls on a candidate's `def` line, then on
       one of its decorators, then inside it (the innermost such candidate).
    3. "class line": the hint falls on a class statement (its decorators or header): the candidate
       defined directly in that class.
    4. "span": the one candidate whose lines overlap the span (of nested ones that all contain
       it, the innermost).
    5. "main definition": what is left is one property's accessors or one function's overloads,
       and the name means the getter / the implementation.

    Rules 3-5 narrow the candidates for the next rule when they leave several. A hint that fell in
    no chosen definition gives `hint_status="stale"` and a `note` saying what chose it.

    Raises FunctionNotFound (with close names suggested), AmbiguousFunction (several candidates
    and no rule picks one: the message lists them and the evidence tried), both MaskingError,
    also raised when the source does not parse or the hint or span is not made of line numbers.
    """
    return _find(source, name, line_hint, span)[2]


def list_functions(source: str) -> list[tuple[str, int]]:
    """Every function's canonical qualified name and `def` line, in source order.

    Raises SyntaxError when the source does not parse.
    """
    return [(f.qualified_name, f.def_line) for f in _parse(source).functions]


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
    lines = [NEWLINE.sub("", line) for line in _split_keepends(text)]
    in_string = _string_rows(text)
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
    in_string = _string_rows(body)
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
    analysis, _, location = _find(source, name, line_hint)
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

    stubs_at = {node.lineno for node in _statements(tree) if _is_stub(node)}
    for location in masked.locations:
        shift = sum(
            _count_breaks(masked.replacements[i]) - _count_breaks(original[slice(*masked.spans[i])])
            for i in order
            if masked.spans[i][0] < location.body_start
        )
        if location.def_line + shift not in stubs_at:
            raise MaskingError(f"`{location.qualified_name}` (line {location.def_line}) is not a stub after masking")


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
        analysis = _analyse(source)
    except MaskingError as error:
        raise MaskingError(f"{filename}: {error}") from None
    lines = analysis.lines
    located: list[FunctionLocation] = []
    requested: list[str] = []
    for target in targets:
        try:
            located.append(_location(analysis, _choose(analysis, target.name, target.line_hint)))
        except MaskingError as error:
            raise type(error)(f"{filename}: {error}") from None
        requested.append(target.name)

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
    tokens = list(_tokens(flat))
    if tokens and tokens[-1].type == tokenize.ENDMARKER:
        squashed = "".join(t.string for t in tokens if t.type != tokenize.COMMENT)
    else:
        squashed = re.sub(r"#[^\n]*", "", flat)  # tokenizing gave up: strip what looks like comments
    return re.sub(r"\s+", "", squashed)
