"""Finding a function in a research codebase by AST: `locate_function` and the span of its body.

Functions are named by qualified name (`Loss.__call__`, `outer.inner`). The upstream data names
them by bare name plus line numbers that are often stale, so a bare or partial name is accepted
and line numbers are only ever evidence to choose between definitions (`locate_function` lists
the rules); a hint that does not match is reported (`hint_status="stale"`), never obeyed, and
when the evidence picks no single definition the name is ambiguous: nothing is guessed.

Masking (runs.benchmark.masking) replaces the bodies found here; the scope rule
(runs.benchmark.scope) pairs functions by the same names.

Pure Python: no Django here.
"""
from __future__ import annotations

import ast
import difflib
import operator
import tokenize
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import StrEnum
from functools import lru_cache
from typing import Any

from runs.benchmark import python_ast
from runs.benchmark.source_lines import SourceLines, python_tokens

__all__ = [
    "AmbiguousFunction",
    "FunctionLocation",
    "FunctionNotFound",
    "HintStatus",
    "LocationRule",
    "MaskingError",
    "SourceAnalysis",
    "accessor_kind",
    "analyse_source",
    "functions_by_name",
    "list_functions",
    "locate_function",
    "location_in",
    "parsed",
    "statements",
]

_ACCESSORS = ("getter", "setter", "deleter")
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


def statements(node: ast.AST) -> Iterator[ast.AST]:
    """Every statement (and except/case clause) under `node`, in source order.

    Definitions only occur in statement blocks, so expressions need not be visited; that keeps
    large files quick.
    """
    for name in _BLOCK_FIELDS:
        for child in getattr(node, name, None) or ():
            yield child
            yield from statements(child)


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
class SourceAnalysis:
    """One source's lines, tree, functions (in source order) and classes, as `analyse_source` reads them."""

    source: str
    lines: SourceLines
    tree: ast.Module
    functions: tuple[_Function, ...]
    classes: tuple[ast.ClassDef, ...] = ()


@lru_cache(maxsize=32)
def _parse(source: str) -> SourceAnalysis:
    tree = python_ast.parse(source)
    functions = tuple(sorted(_collect(tree), key=lambda f: (f.def_line, f.node.col_offset)))
    classes = tuple(node for node in statements(tree) if isinstance(node, ast.ClassDef))
    return SourceAnalysis(source=source, lines=SourceLines(source), tree=tree, functions=functions, classes=classes)


def parsed(source: str) -> ast.Module:
    """The source's tree, as ast.parse gives it (and raising what it raises), parsed once for the
    several reads of one text that masking and the scope rule (runs.benchmark.scope) make. The tree
    is shared between them: read it, never change it."""
    return _parse(source).tree


def analyse_source(source: str) -> SourceAnalysis:
    """The source parsed once, with its functions and classes; MaskingError when it does not parse."""
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


def _not_found(analysis: SourceAnalysis, requested: str, key: str, line_hint: int | None) -> FunctionNotFound:
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


def _class_at(analysis: SourceAnalysis, line: int) -> ast.ClassDef | None:
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


def _choose(analysis: SourceAnalysis, name: str, line_hint: int | None, span: tuple[int, int] | None = None) -> _Choice:
    """The definition `name` refers to, chosen by evidence (rules in `locate_function`)."""
    line_hint = _line_number(line_hint, "line hint", name)
    span = _line_span(span, name)
    key = _split_name(name)
    candidates = [f for f in analysis.functions if any(a == key or a.endswith("." + key) for a in f.aliases)]
    if not candidates:
        raise _not_found(analysis, name, key, line_hint)
    if len(candidates) == 1:
        return _only_definition(candidates[0], line_hint)
    search = _Search(name=name, line_hint=line_hint, all_candidates=candidates, candidates=candidates)
    choice = _by_hint(analysis, search) or _by_span(search, span) or _by_main_definition(search)
    if choice is not None:
        return choice
    raise AmbiguousFunction(
        f"`{name}` is ambiguous: {len(candidates)} definitions match ({_describe(candidates)}) and no evidence "
        f"picks one ({'; '.join(search.tried)}); give the qualified name or the def line as hint"
    )


def _hint_rule(function: _Function, line_hint: int | None) -> LocationRule:
    """Where a hint inside `function` falls: its def line, a decorator line, or elsewhere inside."""
    if function.def_line == line_hint:
        return LocationRule.DEF_LINE
    if any(d.lineno == line_hint for d in function.node.decorator_list):
        return LocationRule.DECORATOR_LINE
    return LocationRule.INSIDE


def _only_definition(only: _Function, line_hint: int | None) -> _Choice:
    """Rule 1: the single candidate, whatever the hint says (which is only reported)."""
    if line_hint is None:
        return _Choice(only, HintStatus.NONE, LocationRule.ONLY_DEFINITION)
    if only.matches_hint(line_hint):
        return _Choice(only, HintStatus.EXACT, _hint_rule(only, line_hint))
    note = (
        f"line hint {line_hint} does not match; `{only.qualified_name}` is defined at line "
        f"{only.def_line} (lines {only.first_line}-{only.end_line})"
    )
    return _Choice(only, HintStatus.STALE, LocationRule.ONLY_DEFINITION, note)


@dataclass
class _Search:
    """Several candidates for one name, as the rules narrow them, and what each rule found."""

    name: str
    line_hint: int | None
    all_candidates: list[_Function]
    candidates: list[_Function]
    tried: list[str] = field(default_factory=list)

    @property
    def status(self) -> HintStatus:
        """A choice the hint did not make: none without a hint, else stale."""
        return HintStatus.NONE if self.line_hint is None else HintStatus.STALE

    @property
    def everyone(self) -> str:
        return f"{len(self.all_candidates)} definitions of `{self.name}` ({_describe(self.all_candidates)})"

    @property
    def unmatched(self) -> str:
        return "" if self.line_hint is None else f" (line hint {self.line_hint} matches none of them)"

    def chosen(self, function: _Function, rule: LocationRule, which: str) -> _Choice:
        """`function` chosen by `rule`, noted as `which` one of all the candidates it is."""
        note = f"chose `{function.qualified_name}` at line {function.def_line}: of the {self.everyone}, {which}"
        return _Choice(function, self.status, rule, note)


def _by_hint(analysis: SourceAnalysis, search: _Search) -> _Choice | None:
    """Rules 2 and 3: the hint on a candidate, or on the statement of a class defining some."""
    line_hint = search.line_hint
    if line_hint is None:
        search.tried.append("no line hint")
        return None
    matching = [f for f in search.candidates if f.matches_hint(line_hint)]
    # The def line itself is the strongest evidence, then a decorator line, then (below) the
    # statement of a class defining one of them, then the innermost definition containing the hint.
    best = min(
        matching,
        key=lambda f: (
            _hint_rule(f, line_hint) != LocationRule.DEF_LINE, _hint_rule(f, line_hint) != LocationRule.DECORATOR_LINE,
            f.end_line - f.first_line,
        ),
        default=None,
    )
    if best is not None and _hint_rule(best, line_hint) != LocationRule.INSIDE:
        return _Choice(best, HintStatus.EXACT, _hint_rule(best, line_hint))
    # Upstream's header_line often points at the class statement instead of the method.
    owner = _class_at(analysis, line_hint)
    in_class = [f for f in search.candidates if owner is not None and f.owner is owner]
    if best is not None and not in_class:
        return _Choice(best, HintStatus.EXACT, LocationRule.INSIDE)
    if in_class:
        function = _main_definition(in_class)
        class_name = ".".join(in_class[0].scope)
        if function is not None:
            which = f"the method of class `{class_name}`, on whose statement line hint {line_hint} falls"
            return search.chosen(function, LocationRule.CLASS_LINE, which)
        search.tried.append(f"line hint {line_hint} is on class `{class_name}`, which defines {len(in_class)} of them")
        search.candidates = in_class
    elif owner is not None:
        search.tried.append(f"line hint {line_hint} is in none of them and on class `{owner.name}`, which defines none")
    else:
        search.tried.append(f"line hint {line_hint} is in none of them nor on the statement of a class defining one")
    return None


def _by_span(search: _Search, span: tuple[int, int] | None) -> _Choice | None:
    """Rule 4: the one candidate whose lines overlap the span."""
    if span is None:
        search.tried.append("no span")
        return None
    spanned = _in_span(search.candidates, span)
    function = _main_definition(spanned)
    if function is not None:
        return search.chosen(function, LocationRule.SPAN, f"the one in the span {span[0]}-{span[1]}{search.unmatched}")
    search.tried.append(f"the span {span[0]}-{span[1]} overlaps {len(spanned) or 'none'} of them")
    search.candidates = spanned or search.candidates
    return None


def _by_main_definition(search: _Search) -> _Choice | None:
    """Rule 5: one property's accessors or one function's overloads, which the name means the getter /
    the implementation of, as a reader would mean it."""
    function = _main_definition(search.candidates)
    if function is None:
        return None
    if search.line_hint is None:
        return _Choice(function, search.status, LocationRule.MAIN_DEFINITION)
    return search.chosen(function, LocationRule.MAIN_DEFINITION, f"the definition the name means{search.unmatched}")


def _header_colon(lines: SourceLines, node: ast.FunctionDef | ast.AsyncFunctionDef) -> tuple[int, int]:
    """(line, character column) of the colon that ends the signature."""
    first = node.body[0]
    fragment = lines.text[lines.starts[node.lineno - 1] : lines.ends[first.lineno - 1]]
    body_at = (first.lineno - node.lineno + 1, lines.char_col(first.lineno, first.col_offset))
    colon = None
    # The last `:` operator before the first statement: colons inside annotations, defaults,
    # lambdas or strings come earlier or are not OP tokens.
    for token in python_tokens(fragment):
        if token.start >= body_at:
            break
        if token.type == tokenize.OP and token.string == ":":
            colon = token.start
    if colon is None:
        raise MaskingError(f"could not find the end of the signature of the function at line {node.lineno}")
    return node.lineno + colon[0] - 1, colon[1]


def _indent_unit(analysis: SourceAnalysis, def_indent: str) -> str:
    """The file's own indentation step, taken from its first indented block."""
    lines = analysis.lines
    for node in statements(analysis.tree):
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


def _location(analysis: SourceAnalysis, choice: _Choice) -> FunctionLocation:
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


def location_in(
    analysis: SourceAnalysis, name: str, line_hint: int | None = None, span: tuple[int, int] | None = None
) -> FunctionLocation:
    """`locate_function` in a source already analysed (`analyse_source`)."""
    return _location(analysis, _choose(analysis, name, line_hint, span))


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
    return location_in(analyse_source(source), name, line_hint, span)


def list_functions(source: str) -> list[tuple[str, int]]:
    """Every function's canonical qualified name and `def` line, in source order.

    Raises SyntaxError when the source does not parse.
    """
    return [(f.qualified_name, f.def_line) for f in _parse(source).functions]
