#!/usr/bin/env python3
"""Modules and functions of the product longer than a reader can take in at once.

Prints each product module over --module-lines lines and each function or method over
--function-lines lines (from its `def` to its last line, docstring and decorators excluded from
neither), longest first. The product is autoexperiment_site/, leaderboard/, runs/ and sandbox/,
without migrations and without the built-in suite's own code (benchmark tasks, not the site).

    python scripts/code_size.py                  # the report
    python scripts/code_size.py --module-lines 700 --function-lines 60

tests/test_code_size.py holds the few that are left longer, each with the reason.
"""
from __future__ import annotations

import argparse
import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PRODUCT_PACKAGES = ("autoexperiment_site", "leaderboard", "runs", "sandbox")
LEFT_OUT_PARTS = {"migrations", "builtin", "__pycache__"}


@dataclass(frozen=True)
class Length:
    name: str  # a module's path, or path::Class.function
    lines: int


def product_modules(root: Path = ROOT) -> Iterator[Path]:
    for package in PRODUCT_PACKAGES:
        for path in sorted((root / package).rglob("*.py")):
            if not LEFT_OUT_PARTS.intersection(path.relative_to(root).parts):
                yield path


def _functions(tree: ast.AST, prefix: str = "") -> Iterator[tuple[str, ast.AST]]:
    for node in ast.iter_child_nodes(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            name = f"{prefix}{node.name}"
            yield name, node
            yield from _functions(node, f"{name}.")
        elif isinstance(node, ast.ClassDef):
            yield from _functions(node, f"{prefix}{node.name}.")


def lengths(root: Path = ROOT) -> tuple[list[Length], list[Length]]:
    """(modules, functions) with their line counts, longest first."""
    modules, functions = [], []
    for path in product_modules(root):
        text = path.read_text()
        relative = path.relative_to(root).as_posix()
        modules.append(Length(relative, len(text.splitlines())))
        for name, node in _functions(ast.parse(text, filename=relative)):
            functions.append(Length(f"{relative}::{name}", node.end_lineno - node.lineno + 1))
    return sorted(modules, key=lambda x: -x.lines), sorted(functions, key=lambda x: -x.lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--module-lines", type=int, default=700)
    parser.add_argument("--function-lines", type=int, default=60)
    args = parser.parse_args()
    modules, functions = lengths()
    long_modules = [m for m in modules if m.lines > args.module_lines]
    long_functions = [f for f in functions if f.lines > args.function_lines]
    print(f"{len(modules)} product modules, {len(functions)} functions")
    print(f"modules over {args.module_lines} lines: {len(long_modules)}")
    for module in long_modules:
        print(f"  {module.lines:5d}  {module.name}")
    print(f"functions over {args.function_lines} lines: {len(long_functions)}")
    for function in long_functions:
        print(f"  {function.lines:5d}  {function.name}")


if __name__ == "__main__":
    main()
