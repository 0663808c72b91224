"""Plausible wrong implementations of a function, for the suite validator and the `mutant` agent.

A mutant changes one thing in one function's body: an arithmetic or comparison operator, a
numeric constant, a dropped unary minus, a flipped boolean, or a return value multiplied by zero.
A suite whose experiments do not notice such a change could be passed without implementing the
function, which is what the validator looks for.

Edits are made on the source text at the positions `ast` reports, so only the mutated token
changes and the rest of the file stays byte-identical. Pure Python: no Django here.
"""
from __future__ import annotations

import ast
import random
from dataclasses import dataclass

from runs.benchmark import python_ast
from runs.benchmark.locating import locate_function
from runs.benchmark.masking import function_body_source
from runs.benchmark.source_lines import SourceLines

__all__ = ["Mutant", "function_mutants"]

_SWAPPED_OPERATORS: dict[type, tuple[str, str]] = {
    ast.Add: ("+", "-"),
    ast.Sub: ("-", "+"),
    ast.Mult: ("*", "/"),
    ast.Div: ("/", "*"),
    ast.FloorDiv: ("//", "/"),
    ast.Pow: ("**", "*"),
    ast.MatMult: ("@", "*"),
}
_SWAPPED_COMPARISONS: dict[type, tuple[str, str]] = {
    ast.Lt: ("<", "<="),
    ast.LtE: ("<=", "<"),
    ast.Gt: (">", ">="),
    ast.GtE: (">=", ">"),
    ast.Eq: ("==", "!="),
    ast.NotEq: ("!=", "=="),
}
# Values that zeroing would turn into something of another kind (an empty list, a crash on a
# string); zeroing is meant for numbers and arrays.
_NOT_ZEROABLE = (
    ast.Dict, ast.Set, ast.List, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp,
    ast.Lambda, ast.JoinedStr, ast.Yield, ast.YieldFrom, ast.Starred,
)  # fmt: skip
_SHOWN = 60  # characters of an expression quoted in a description


@dataclass(frozen=True)
class Mutant:
    """One wrong version of a function: what changed, the whole mutated file and its body."""

    function: str
    description: str
    source: str
    body: str


@dataclass(frozen=True)
class _Candidate:
    position: int
    edits: tuple[tuple[int, int, str], ...]  # (start, end, replacement) offsets into the source
    description: str


def _quote(text: str) -> str:
    text = " ".join(text.split())
    return text if len(text) <= _SHOWN else text[: _SHOWN - 1] + "…"


def _skip_to_operator(text: str, start: int, end: int, operator: str) -> int | None:
    """Offset of `operator` between two operands: only brackets, blanks and comments may precede it."""
    index = start
    while index < end:
        char = text[index]
        if char in " \t\f\r\n()\\":
            index += 1
        elif char == "#":
            while index < end and text[index] not in "\r\n":
                index += 1
        elif text.startswith(operator, index):
            return index
        else:
            return None
    return None


def _is_text(node: ast.AST) -> bool:
    return isinstance(node, ast.JoinedStr) or (
        isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))
    )


def _numeric_replacement(node: ast.Constant, parent: ast.AST | None) -> str | None:
    value = node.value
    if type(value) is bool:
        return repr(not value)
    if type(value) is int:
        if isinstance(parent, ast.BinOp) and isinstance(parent.op, ast.Pow) and parent.right is node and value == 2:
            return "1"  # a square that becomes the plain value
        return {0: "1", 1: "0"}.get(value, str(value + 1))
    if type(value) is float:
        return repr(1.0) if value == 0.0 else repr(value * 0.5)
    return None


class _Finder:
    """Collects mutation candidates in one function body, in source order."""

    def __init__(self, lines: SourceLines):
        self.lines = lines
        self.text = lines.text
        self.candidates: list[_Candidate] = []

    def start(self, node: ast.expr | ast.stmt) -> int:
        return self.lines.start_of(node)

    def end(self, node: ast.expr | ast.stmt) -> int:
        return self.lines.end_of(node)

    def segment(self, node: ast.expr | ast.stmt) -> str:
        return self.text[self.start(node) : self.end(node)]

    def add(self, edits: list[tuple[int, int, str]], description: str) -> None:
        self.candidates.append(_Candidate(min(e[0] for e in edits), tuple(edits), description))

    def swap_operator(self, left: ast.expr, right: ast.expr, old: str, new: str) -> None:
        at = _skip_to_operator(self.text, self.end(left), self.start(right), old)
        if at is not None:
            line = self.lines.line_of(at)
            self.add([(at, at + len(old), new)], f"line {line}: `{old}` replaced by `{new}`")

    def visit(self, node: ast.AST, parent: ast.AST | None = None) -> None:
        if isinstance(node, ast.JoinedStr):
            return  # positions inside f-strings are not reliable across Python versions
        if isinstance(node, ast.AnnAssign):
            for part in (node.target, node.value):
                if part is not None:
                    self.visit(part, node)
            return
        self.mutate(node, parent)
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.arguments, ast.arg)):
                continue  # defaults and annotations of nested functions are not the body's logic
            self.visit(child, node)

    def mutate(self, node: ast.AST, parent: ast.AST | None) -> None:
        if isinstance(node, ast.BinOp) and type(node.op) in _SWAPPED_OPERATORS:
            if not (_is_text(node.left) or _is_text(node.right)):
                self.swap_operator(node.left, node.right, *_SWAPPED_OPERATORS[type(node.op)])
        elif isinstance(node, ast.AugAssign) and type(node.op) in _SWAPPED_OPERATORS:
            old, new = _SWAPPED_OPERATORS[type(node.op)]
            if not _is_text(node.value):
                self.swap_operator(node.target, node.value, old + "=", new + "=")
        elif isinstance(node, ast.Compare):
            operands = [node.left, *node.comparators]
            for index, op in enumerate(node.ops):
                if type(op) in _SWAPPED_COMPARISONS:
                    self.swap_operator(operands[index], operands[index + 1], *_SWAPPED_COMPARISONS[type(op)])
        elif isinstance(node, ast.Constant):
            replacement = _numeric_replacement(node, parent)
            if replacement is not None:
                self.add(
                    [(self.start(node), self.end(node), replacement)],
                    f"line {node.lineno}: `{self.segment(node)}` replaced by `{replacement}`",
                )
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            at = self.start(node)
            if self.text[at] == "-":
                # `return-x` must not become `returnx`.
                glue = " " if at and (self.text[at - 1].isalnum() or self.text[at - 1] == "_") else ""
                self.add(
                    [(at, at + 1, glue)],
                    f"line {node.lineno}: unary minus dropped from `{_quote(self.segment(node))}`",
                )
        elif isinstance(node, ast.Return):
            edits = self.zero_return(node)
            if edits:
                self.add(edits, f"line {node.lineno}: `{_quote(self.segment(node))}` returns zeros")

    def zero_return(self, node: ast.Return) -> list[tuple[int, int, str]]:
        value = node.value
        if value is None or isinstance(value, _NOT_ZEROABLE) or _is_text(value):
            return []
        if isinstance(value, ast.Constant) and (value.value is None or type(value.value) is bool):
            return []
        # `0 * (a, b)` would be an empty tuple; zero each element instead.
        parts = value.elts if isinstance(value, ast.Tuple) else [value]
        edits = []
        for part in parts:
            if isinstance(part, _NOT_ZEROABLE) or _is_text(part):
                continue
            if isinstance(part, ast.Constant) and (part.value is None or type(part.value) is bool):
                continue
            edits.append((self.start(part), self.end(part), f"0 * ({self.segment(part)})"))
        return edits


def _find_node(tree: ast.AST, def_line: int) -> ast.FunctionDef | ast.AsyncFunctionDef:
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.lineno == def_line:
            return node
    raise LookupError(f"no function defined at line {def_line}")  # locate_function just found it


def _apply(text: str, edits: tuple[tuple[int, int, str], ...]) -> str:
    for start, end, replacement in sorted(edits, reverse=True):
        text = text[:start] + replacement + text[end:]
    return text


def function_mutants(
    source: str, name: str, *, line_hint: int | None = None, seed: int = 0, limit: int | None = None
) -> list[Mutant]:
    """Single-point mutants of one function, each a whole file that parses and differs.

    Candidates are enumerated in source order and shuffled with `random.Random(seed)`, so a seed
    gives the same mutants on every machine; identical results are kept once; at most `limit`
    are returned. Only the function's body changes (docstrings and strings are never touched).
    When the function returns more than once, one extra mutant zeroes every return.
    Raises MaskingError when the function cannot be located.
    """
    location = locate_function(source, name, line_hint=line_hint)
    lines = SourceLines(source)
    node = _find_node(python_ast.parse(source), location.def_line)
    finder = _Finder(lines)
    statements = node.body
    if statements and isinstance(statements[0], ast.Expr) and _is_text(statements[0].value):
        statements = statements[1:]  # the docstring
    for statement in statements:
        finder.visit(statement)

    candidates = sorted(finder.candidates, key=lambda c: (c.position, c.description))
    returns = [c for c in candidates if c.description.endswith("returns zeros")]
    if len(returns) > 1:
        lines_listed = ", ".join(c.description.split(":")[0].removeprefix("line ") for c in returns)
        every = tuple(edit for c in returns for edit in c.edits)
        candidates.append(_Candidate(returns[0].position, every, f"lines {lines_listed}: every return returns zeros"))
    random.Random(seed).shuffle(candidates)

    mutants: list[Mutant] = []
    seen = {source}
    for candidate in candidates:
        if limit is not None and len(mutants) >= limit:
            break
        # Guard the promise that nothing outside the body moves.
        if not all(location.body_start <= s <= e <= location.body_end for s, e, _ in candidate.edits):
            continue
        mutated = _apply(source, candidate.edits)
        if mutated in seen:
            continue
        try:
            python_ast.parse(mutated)
        except SyntaxError:
            continue
        seen.add(mutated)
        body = function_body_source(mutated, location.qualified_name, line_hint=location.def_line)
        mutants.append(
            Mutant(function=location.qualified_name, description=candidate.description, source=mutated, body=body)
        )
    return mutants
