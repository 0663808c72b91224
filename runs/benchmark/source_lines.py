"""Source text by lines as Python splits them, and `ast` positions as character offsets.

Offsets are 0-based character offsets into the `str` source (`ast` reports UTF-8 byte columns,
which are converted). Lines end in `\\n`, `\\r\\n` or `\\r`, exactly as Python itself splits them.
Masking, locating functions (runs.benchmark.locating), mutation and the scope rule read source
through these.

Pure Python: no Django here.
"""
from __future__ import annotations

import bisect
import re
import tokenize
from collections.abc import Iterator
from typing import Protocol

NEWLINE = re.compile(r"\r\n|\r|\n")

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


def split_keepends(text: str) -> list[str]:
    """Physical lines with their breaks, split the way Python splits them (not str.splitlines)."""
    lines, start = [], 0
    for match in NEWLINE.finditer(text):
        lines.append(text[start : match.end()])
        start = match.end()
    if start < len(text) or not lines:
        lines.append(text[start:])
    return lines


def python_tokens(text: str) -> Iterator[tokenize.TokenInfo]:
    """Tokens of a fragment, stopping quietly where the fragment stops being tokenizable."""
    lines = iter(split_keepends(text))
    try:
        yield from tokenize.generate_tokens(lambda: next(lines, ""))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return


def string_rows(text: str) -> set[int]:
    """0-based rows of `text` that begin inside a multi-line string.

    Those rows must never be re-indented or dedented: their leading whitespace is string content.
    """
    rows: set[int] = set()
    for token in python_tokens(text):
        (start_row, _), (end_row, _) = token.start, token.end
        if end_row > start_row and token.type not in (tokenize.NL, tokenize.NEWLINE):
            rows.update(range(start_row, end_row))  # 1-based rows start_row+1..end_row, as 0-based
    return rows
