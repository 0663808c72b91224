"""Unified diffs of the masked workspace: what a parsed patch holds, applying it, writing one.

An agent's final patch and an uploaded submission's `final_patch` are unified diffs against the
masked workspace with paths `a/code/...` and `b/code/...`. `runs.benchmark.patch_parsing`
`parse_patch` reads one into `FilePatch` sections (or refuses it, naming the line); the hunks are
applied by our own `apply_file_patch` (unidiff parses, it does not apply). `unified_diff` writes
the diff of one file that the agents' trajectories and final patches are made of. No Django imports.

Lines are split on "\\n" only: "\\r", form feeds, "\\u2028" and the like are content (never
`str.splitlines`, which splits on all of them).
"""
from __future__ import annotations

import difflib
import json
from dataclasses import dataclass
from enum import StrEnum

_SHOWN_CHARS = 80  # of the offending line, in error messages


class ChangeKind(StrEnum):
    """What a patch section, or an agent's step, did to one file."""

    ADDED = "added"
    MODIFIED = "modified"
    DELETED = "deleted"

    @classmethod
    def between(cls, old: object, new: object) -> ChangeKind:
        """The change from `old` to `new`, each None where the file does not exist."""
        return cls.ADDED if old is None else cls.DELETED if new is None else cls.MODIFIED


class PatchError(ValueError):
    """Why a patch is refused or does not apply.

    `line` is the 1-based line of the patch text at fault (None when no single line is), `source`
    that line's text (for a hunk that does not apply, its header in normal form), `reason` the
    explanation; str() gives `line 7: "rename from a/code/x.py": reason`.
    """

    def __init__(self, reason: str, *, line: int | None = None, source: str | None = None) -> None:
        self.reason, self.line, self.source = reason, line, source
        where = ""
        if line is not None:
            where = f"line {line}: "
            if source is not None:
                shown = source if len(source) <= _SHOWN_CHARS else source[: _SHOWN_CHARS - 3] + "..."
                where += json.dumps(shown, ensure_ascii=False) + ": "
        super().__init__(where + reason)


@dataclass(frozen=True)
class Hunk:
    """One `@@ -old_start,old_count +new_start,new_count @@` block.

    `lines` keep their " ", "-" or "+" prefix and no line terminator (an empty body line, which
    editors make of a context line's lone space, is stored as " "). `old_no_newline` /
    `new_no_newline`: that side's last line ends the file without a newline ("\\ No newline at
    end of file"). `line`: where the @@ header is in the patch text.
    """

    old_start: int
    old_count: int
    new_start: int
    new_count: int
    lines: tuple[str, ...]
    old_no_newline: bool
    new_no_newline: bool
    line: int

    @property
    def header(self) -> str:
        return f"@@ -{self.old_start},{self.old_count} +{self.new_start},{self.new_count} @@"

    def old_lines(self) -> list[str]:
        """The old side's lines with their "\\n" (none after the last if `old_no_newline`)."""
        return _side(self.lines, " -", self.old_no_newline)

    def new_lines(self) -> list[str]:
        """The new side's lines with their "\\n" (none after the last if `new_no_newline`)."""
        return _side(self.lines, " +", self.new_no_newline)


@dataclass(frozen=True)
class FilePatch:
    """One file's section of a patch.

    `path` is workspace-relative (`code/pkg/mod.py`), `change` what it does to the file,
    `line` where the section's first header line is, `text` the section's raw text (for display).
    An added or deleted empty file (git writes no hunks for it) has no hunks.
    """

    path: str
    change: ChangeKind
    hunks: tuple[Hunk, ...]
    line: int
    text: str


def apply_file_patch(original: str | None, file_patch: FilePatch) -> str | None:
    """The file's text after `file_patch`, computed in memory (None: the file does not exist,
    before or after).

    Each hunk's old lines must match exactly (line terminators included, so "\\r" and a missing
    final newline count). A hunk is tried at its stated line first, shifted by the offset the
    previous hunk needed; otherwise at the nearest line after the previous hunk where its old
    lines match exactly, as `git apply` does (no fuzz). Raises PatchError naming the hunk's line.
    """
    header = file_patch.text.split("\n", 1)[0]
    if file_patch.change == ChangeKind.ADDED:
        if original is not None:
            raise PatchError(f"the patch adds {file_patch.path}, which already exists", line=file_patch.line, source=header)
        original = ""
    elif original is None:
        raise PatchError(f"the patch changes {file_patch.path}, which does not exist", line=file_patch.line, source=header)
    source = diff_lines(original)
    finder = _Finder(source)
    result: list[str] = []
    position = 0  # source lines before this one are copied or replaced already
    offset = 0  # where the previous hunk matched, relative to where it said it would
    for hunk in file_patch.hunks:
        old, new = hunk.old_lines(), hunk.new_lines()
        stated = hunk.old_start - 1 if hunk.old_count else hunk.old_start
        found = finder.find(old, stated + offset, position)
        if found is None:
            raise PatchError(
                f"{file_patch.path}: the hunk's {len(old)} old line(s) are neither at line {stated + offset + 1} "
                "nor anywhere after the previous hunk",
                line=hunk.line, source=hunk.header,
            )
        if hunk.new_no_newline and found + len(old) != len(source):
            raise PatchError(
                f"{file_patch.path}: the hunk ends the file without a newline, but the file goes on after it",
                line=hunk.line, source=hunk.header,
            )
        result.extend(source[position:found])
        result.extend(new)
        position = found + len(old)
        offset = found - stated
    result.extend(source[position:])
    text = "".join(result)
    if file_patch.change == ChangeKind.DELETED:
        if text:
            raise PatchError(
                f"the patch deletes {file_patch.path}, but the file has lines the patch does not remove",
                line=file_patch.line, source=header,
            )
        return None
    return text


# --- applying ----------------------------------------------------------------------------------------


def diff_lines(text: str) -> list[str]:
    """Lines as diff(1) and patch(1) read them, each with its "\\n" (a "\\r" or "\\x0c" is content);
    the last one lacks it when the text does not end with a newline."""
    lines = text.split("\n")
    last = lines.pop()
    return [line + "\n" for line in lines] + ([last] if last else [])


def _side(lines: tuple[str, ...], kinds: str, no_newline: bool) -> list[str]:
    side = [line[1:] + "\n" for line in lines if line[0] in kinds]
    if no_newline and side:
        side[-1] = side[-1][:-1]
    return side


class _Finder:
    """Finds a run of lines in a file, nearest to a line number first.

    The offset search compares rolling hashes of line windows before comparing lines, so a hunk
    that has to be searched for costs time in proportion to the distance searched, not to the
    distance times the hunk's length (a large file of repeated lines would make that quadratic).
    """

    _MOD = (1 << 61) - 1
    _BASE = 1_000_003

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self._prefix: list[int] | None = None
        self._powers: dict[int, int] = {}

    def find(self, wanted: list[str], expected: int, low: int) -> int | None:
        """The start of `wanted` in the lines at or after `low`, nearest to `expected` (after before
        before at equal distance, as patch(1) does), or None."""
        size, lines = len(wanted), self.lines
        high = len(lines) - size  # the last possible start
        if not low <= expected <= high:
            if size == 0:
                return None  # an insertion has nowhere else to go
            expected = min(max(expected, low), high)
        if low > high:
            return None
        if lines[expected : expected + size] == wanted:
            return expected
        if size == 0:
            return expected
        target = self._hash(wanted)
        for distance in range(1, max(expected - low, high - expected) + 1):
            for start in (expected + distance, expected - distance):
                if low <= start <= high and self._window(start, size) == target and lines[start : start + size] == wanted:
                    return start
        return None

    def _hash(self, lines: list[str]) -> int:
        value = 0
        for line in lines:
            value = (value * self._BASE + hash(line)) % self._MOD
        return value

    def _window(self, start: int, size: int) -> int:
        if self._prefix is None:
            prefix = [0]
            for line in self.lines:
                prefix.append((prefix[-1] * self._BASE + hash(line)) % self._MOD)
            self._prefix = prefix
        if size not in self._powers:
            self._powers[size] = pow(self._BASE, size, self._MOD)
        return (self._prefix[start + size] - self._prefix[start] * self._powers[size]) % self._MOD


# --- writing -------------------------------------------------------------------------------------


def unified_diff(path: str, old: str | None, new: str | None) -> str:
    """A git-style unified diff of one file (None: the file does not exist on that side)."""
    # Lines end at "\n" only, as diff(1) and the parser (runs.benchmark.patch_parsing) read them: str.splitlines would also
    # split at "\r", "\x0c", "\u2028" and others, which are content to a diff.
    old_lines = diff_lines(old or "")
    new_lines = diff_lines(new or "")
    lines = list(
        difflib.unified_diff(
            old_lines,
            new_lines,
            fromfile="/dev/null" if old is None else f"a/{path}",
            tofile="/dev/null" if new is None else f"b/{path}",
        )
    )
    out = []
    for line in lines:
        if line.endswith("\n"):
            out.append(line)
        else:
            # What diff(1) and git print, so that patch(1) reproduces the missing final newline.
            out.append(line + "\n\\ No newline at end of file\n")
    return "".join(out)


