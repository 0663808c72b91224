"""Reading unified diffs of the masked workspace: one strict parser, `parse_patch`.

An agent's final patch and an uploaded submission's `final_patch` are unified diffs against the
masked workspace with paths `a/code/...` and `b/code/...`. Everything that reads such a patch
(validation of uploads, re-execution, the replay pages) goes through `parse_patch`, so a patch is
either understood completely or refused with the line that is wrong. Each hunk's body is read by
unidiff's `PatchSet`, by the header's counts (`_HunkReading`); the rest (file headers and names,
what may stand between sections and hunks, the "\\" markers) is checked here line by line, so that
every refusal names its line. What a parsed patch is, applying it and writing one:
`runs.benchmark.patches`. No Django imports.

What is accepted: text changes to regular files under `code/`: modified, added (mode 100644 or
100755) and deleted files, in the output of `git diff` (with its extended header lines, C-quoted
names and `index` lines), GNU `diff -u` / `diff -ruN` (command lines, tab-separated timestamps, the
epoch timestamp that `-N` writes for a missing file), or a plain `---` / `+++` diff, optionally
inside a `git format-patch` mail (the preamble before the first file header and the `-- `
signature are ignored).

What is refused, always naming the line: renames, copies, mode changes, symlinks and submodules
(modes other than 100644/100755), binary changes (`Binary files ... differ`, `GIT binary patch`),
changes a diff does not carry (`Only in ...`, `Files ... differ`), context and combined diffs,
paths outside `code/` or not in canonical form, control characters in names, a file in two
sections, hunks whose bodies do not match their counts or that overlap, and any other line
between sections.

Lines are split on "\\n" only: "\\r", form feeds, "\\u2028" and the like are content (never
`str.splitlines`, which splits on all of them). Parsing takes time linear in the patch's length.
"""
from __future__ import annotations

import json
import re
import unicodedata
from collections.abc import Iterator
from datetime import datetime, timedelta, timezone

from unidiff import PatchSet, UnidiffParseError

from runs.benchmark.patches import ChangeKind, FilePatch, Hunk, PatchError

CODE_DIR = "code"
FILE_MODES = ("100644", "100755")  # regular files; 120000 is a symlink, 160000 a submodule
DEV_NULL = "/dev/null"

_HUNK_HEADER = re.compile(r"@@ -(\d{1,9})(?:,(\d{1,9}))? \+(\d{1,9})(?:,(\d{1,9}))? @@(.*)")
_INDEX = re.compile(r"index [0-9a-f]{1,64}\.\.[0-9a-f]{1,64}(?: ([0-7]{6}))?")
_FILE_MODE = re.compile(r"(?:new|deleted) file mode ([0-7]{6})")
_SIMILARITY = re.compile(r"(?:dis)?similarity index \d{1,3}%")
# GNU diff's `-u` timestamp, e.g. "2024-05-01 12:00:00.123456789 +0200".
_TIMESTAMP = re.compile(r"(\d{4})-(\d\d)-(\d\d) (\d\d):(\d\d):(\d\d)(?:\.\d{1,9})? ([+-])(\d\d)(\d\d)")
_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_C_ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13, "\\": 92, '"': 34}
NAME_MAX = 255  # bytes in one path component, as Linux allows


def parse_patch(text: str) -> list[FilePatch]:
    """Every file section of a unified diff, checked; raises PatchError naming the line at fault.

    An empty or whitespace-only text is the empty patch (no changes). Anything else must hold at
    least one file section; text before the first file header (a mail preamble) is ignored.
    """
    return _Parser(text).parse()


class _Parser:
    """One pass over the lines of a patch; `self.index` is the next line to read."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.lines = text.split("\n")
        if self.lines[-1] == "":
            self.lines.pop()  # the last line's terminator, not an empty line
        self.index = 0
        self.last_hunk: Hunk | None = None
        self._offsets: list[int] | None = None  # where each line starts in the text, once needed

    # Helpers.

    def error(self, reason: str, index: int | None = None) -> PatchError:
        index = self.index if index is None else index
        if index >= len(self.lines):
            return PatchError(f"the patch ends too early: {reason}", line=len(self.lines) or None)
        return PatchError(reason, line=index + 1, source=self.lines[index])

    def peek(self, offset: int = 0) -> str | None:
        position = self.index + offset
        return self.lines[position] if position < len(self.lines) else None

    def starts_section(self, index: int) -> bool:
        line = self.lines[index]
        following = self.lines[index + 1] if index + 1 < len(self.lines) else ""
        return (
            line.startswith(("diff --git ", "diff -"))
            or (line.startswith("--- ") and following.startswith("+++ "))
            or (line.startswith("*** ") and following.startswith("--- "))
            or _gnu_report(line) is not None
        )

    # The patch.

    def parse(self) -> list[FilePatch]:
        if not self.text.strip():
            return []
        while self.index < len(self.lines) and not self.starts_section(self.index):
            self.index += 1  # a mail preamble, or prose around a diff
        if self.index == len(self.lines):
            first = next(index for index, line in enumerate(self.lines) if line.strip())
            raise self.error(
                'not a unified diff: no file header ("diff --git a/code/..." or "--- a/code/..." followed by '
                '"+++ b/code/...") found',
                first,
            )
        sections: list[FilePatch] = []
        seen: dict[str, int] = {}
        while self.index < len(self.lines):
            line = self.lines[self.index]
            if not line.strip():
                self.index += 1
                continue
            if line == "-- ":
                self.signature()
                break
            start = self.index
            if line.startswith("diff --git "):
                section = self.git_section()
            elif line.startswith(("diff --cc ", "diff --combined ")):
                raise self.error("combined (merge) diffs are not accepted")
            elif line.startswith("diff -"):
                section = self.gnu_section()
            elif line.startswith("--- ") and (self.peek(1) or "").startswith("+++ "):
                section = self.unified_section()
            else:
                raise self.unexpected()
            if section.path in seen:
                raise self.error(f"{section.path} already has a section at line {seen[section.path]}", start)
            seen[section.path] = section.line
            sections.append(section)
        return sections

    def signature(self) -> None:
        """`git format-patch` ends the mail with "-- " and git's version; nothing after it may be
        a diff (a section there would be silently dropped by one tool and applied by another)."""
        for index in range(self.index + 1, len(self.lines)):
            if self.starts_section(index):
                raise self.error('a file header after the mail signature ("-- ")', index)
        self.index = len(self.lines)

    def unexpected(self) -> PatchError:
        """The error for a line that starts no section, as precise as the line allows."""
        line = self.lines[self.index]
        report = _gnu_report(line)
        if report == "binary" or line.startswith("GIT binary patch"):
            return self.error("binary changes are not accepted: a text diff cannot carry them")
        if report == "unshown":
            return self.error("a change the diff does not show (run diff with -N and without -q)")
        if report == "special":
            return self.error("only regular files may change")
        if line.startswith(("*** ", "***************")):
            return self.error("context-format diffs are not accepted; send a unified diff (diff -u, git diff)")
        if line.startswith("--- "):
            return self.error('a "--- " header must be followed by a "+++ " header')
        if line.startswith("@@"):
            return self.error('a hunk without its file headers ("--- a/code/..." and "+++ b/code/...")')
        if line.startswith(("rename ", "copy ", "old mode ", "new mode ", "index ", "new file mode ", "deleted file mode ")):
            return self.error('a git header line outside a "diff --git" header')
        if self.last_hunk is not None and line[:1] in (" ", "+", "-", "\\"):
            hunk = self.last_hunk
            return self.error(
                f"the hunk at line {hunk.line} already has the {hunk.old_count} old and {hunk.new_count} new "
                "line(s) its header counts"
            )
        return self.error("not a line of a unified diff")

    # Sections.

    def git_section(self) -> FilePatch:
        start = self.index
        old_name, new_name = self.git_names(self.lines[start][len("diff --git "):])
        change = ChangeKind.MODIFIED
        self.index += 1
        while (line := self.peek()) is not None:
            if line.startswith(("old mode ", "new mode ")):
                raise self.error("mode changes are not accepted")
            if line.startswith(("rename from ", "rename to ")):
                raise self.error("renames are not accepted (git diff --no-renames writes a deletion and an addition)")
            if line.startswith(("copy from ", "copy to ")):
                raise self.error("copies are not accepted (git diff --no-renames writes an addition)")
            if line.startswith(("Binary files ", "GIT binary patch")):
                raise self.error("binary changes are not accepted: a text diff cannot carry them")
            if line.startswith(("new file mode ", "deleted file mode ")):
                match = _FILE_MODE.fullmatch(line)
                if match is None:
                    raise self.error("malformed file mode line")
                self.check_mode(match.group(1))
                change = ChangeKind.ADDED if line.startswith("new") else ChangeKind.DELETED
            elif line.startswith("index "):
                match = _INDEX.fullmatch(line)
                if match is None:
                    raise self.error("malformed index line")
                if match.group(1):
                    self.check_mode(match.group(1))
            elif line.startswith(("similarity index ", "dissimilarity index ")):
                # Alone (git diff -B, a rewrite) it is only a statistic; with a rename the rename
                # line that follows is refused.
                if _SIMILARITY.fullmatch(line) is None:
                    raise self.error("malformed similarity line")
            else:
                break
            self.index += 1
        if old_name is None or new_name is None or old_name[2:] != new_name[2:]:
            raise self.error(
                'the "diff --git" header names two different files (a rename or copy?) or cannot be read', start
            )
        path = self.workspace_path(old_name, "a", start)
        self.workspace_path(new_name, "b", start)
        if not (self.peek() or "").startswith("--- "):
            if change == ChangeKind.MODIFIED:
                raise self.error('a "diff --git" section that changes no line', start)
            # git writes no ---/+++ lines and no hunk for an added or deleted empty file.
            return self.section(start, path, change, ())
        old, new, _, _ = self.file_headers()
        expected = (DEV_NULL if change == ChangeKind.ADDED else f"a/{path}", DEV_NULL if change == ChangeKind.DELETED else f"b/{path}")
        for name, want, index in ((old, expected[0], self.index - 2), (new, expected[1], self.index - 1)):
            if name != want:
                raise self.error(
                    f'the file header should name {want}, as the "diff --git" header at line {start + 1} says', index
                )
        return self.section(start, path, change, self.hunks(change))

    def gnu_section(self) -> FilePatch:
        """`diff -ruN a b` output: a command line, then a plain unified section."""
        start = self.index
        self.index += 1
        following = self.peek()
        if following is None or not following.startswith("--- "):
            if following is not None and following.startswith("*** "):
                raise self.error("context-format diffs are not accepted; send a unified diff (diff -u, git diff)")
            raise self.error('expected a "--- a/code/..." header after the diff command line')
        return self.unified_section(start)

    def unified_section(self, start: int | None = None) -> FilePatch:
        start = self.index if start is None else start
        old_at = self.index
        old, new, old_stamp, new_stamp = self.file_headers()
        # `diff -N` writes the real name with the epoch as timestamp for a missing file.
        old_missing = old == DEV_NULL or _is_epoch(old_stamp)
        new_missing = new == DEV_NULL or _is_epoch(new_stamp)
        if old_missing and new_missing:
            raise self.error("both file headers say the file does not exist", old_at + 1)
        old_path = None if old == DEV_NULL else self.workspace_path(old, "a", old_at)
        new_path = None if new == DEV_NULL else self.workspace_path(new, "b", old_at + 1)
        if old_path and new_path and old_path != new_path:
            raise self.error(
                f"the file headers name two different files, {old} and {new} (renames are not accepted)", old_at + 1
            )
        change = ChangeKind.ADDED if old_missing else ChangeKind.DELETED if new_missing else ChangeKind.MODIFIED
        path = old_path or new_path
        assert path is not None  # both headers /dev/null is refused above
        return self.section(start, path, change, self.hunks(change))

    def section(self, start: int, path: str, change: ChangeKind, hunks: tuple[Hunk, ...]) -> FilePatch:
        offsets = self.offsets()
        text = self.text[offsets[start] : offsets[self.index]]
        return FilePatch(path=path, change=change, hunks=hunks, line=start + 1, text=text)

    def offsets(self) -> list[int]:
        if self._offsets is None:
            offsets, position = [], 0
            for line in self.lines:
                offsets.append(position)
                position += len(line) + 1
            offsets.append(min(position, len(self.text)))
            self._offsets = offsets
        return self._offsets

    # Names.

    def git_names(self, rest: str) -> tuple[str | None, str | None]:
        """The two names of a `diff --git` line, or None for a name that cannot be told apart.

        Unquoted names may hold spaces, so (as git does) the line is split where the two halves
        name the same file; names that differ (a rename) cannot be split reliably and give None.
        """
        if rest.startswith('"'):
            first, end = self.unquote(rest, 0)
            if rest[end : end + 1] != " ":
                return first, None
            second = rest[end + 1 :]
            if second.startswith('"'):
                unquoted, end = self.unquote(second, 0)
                return first, (unquoted if end == len(second) else None)
            return first, second
        if rest.endswith('"'):
            return None, None  # one name quoted, the other not: they differ
        middle = len(rest) // 2
        if len(rest) % 2 == 1 and rest[middle] == " " and rest[: middle][2:] == rest[middle + 1 :][2:]:
            return rest[:middle], rest[middle + 1 :]
        return None, None

    def file_headers(self) -> tuple[str, str, str, str]:
        """(old name, new name, old timestamp, new timestamp) of the "--- " and "+++ " lines at
        self.index; moves past them."""
        old, old_stamp = self.header_name(self.lines[self.index])
        self.index += 1
        line = self.peek()
        if line is None or not line.startswith("+++ "):
            raise self.error('a "--- " header must be followed by a "+++ " header')
        new, new_stamp = self.header_name(line)
        self.index += 1
        return old, new, old_stamp, new_stamp

    def header_name(self, line: str) -> tuple[str, str]:
        """(name, timestamp) of a "--- " or "+++ " line; diff puts a tab before the timestamp,
        git one after a name that holds a space."""
        rest = line[4:]
        if rest.startswith('"'):
            name, end = self.unquote(rest, 0)
            if end < len(rest) and rest[end] != "\t":
                raise self.error("text after the quoted file name")
            return name, rest[end + 1 :]
        name, _, stamp = rest.partition("\t")
        return name, stamp

    def unquote(self, text: str, start: int) -> tuple[str, int]:
        """A C-quoted name as git writes it ("a/code/tab\\there.py", octal escapes of UTF-8 bytes)
        starting at text[start]; returns (name, index after the closing quote)."""
        value = bytearray()
        index = start + 1
        while index < len(text):
            char = text[index]
            if char == '"':
                try:
                    return value.decode("utf-8"), index + 1
                except UnicodeDecodeError:
                    raise self.error("the quoted file name is not UTF-8") from None
            if char == "\\":
                escape = text[index + 1 : index + 2]
                if escape in _C_ESCAPES:
                    value.append(_C_ESCAPES[escape])
                    index += 2
                    continue
                octal = text[index + 1 : index + 4]
                if re.fullmatch(r"[0-3][0-7][0-7]", octal):
                    value.append(int(octal, 8))
                    index += 4
                    continue
                raise self.error(f"unknown escape \\{escape} in a quoted file name")
            value.extend(char.encode("utf-8", errors="surrogatepass"))
            index += 1
        raise self.error("the quoted file name has no closing quote")

    def workspace_path(self, name: str, prefix: str, index: int) -> str:
        """`a/code/x.py` -> `code/x.py`, or PatchError: only canonical paths of files under code/."""
        bad = next((char for char in name if unicodedata.category(char) in ("Cc", "Zl", "Zp")), None)
        if bad is not None:
            hint = " (are the patch's lines CRLF-terminated?)" if name.endswith("\r") else ""
            raise self.error(f"the file name {json.dumps(name)} contains a control character{hint}", index)
        if name.startswith("/"):
            raise self.error(f"{name} is an absolute path; only files under {prefix}/{CODE_DIR}/ may change", index)
        parts = name.split("/")
        if "" in parts:
            raise self.error(f"{name} has an empty path component; only files under {prefix}/{CODE_DIR}/ may change", index)
        if "." in parts or ".." in parts:
            raise self.error(f'{name} has a "." or ".." component; only files under {prefix}/{CODE_DIR}/ may change', index)
        if len(parts) < 3 or parts[0] != prefix or parts[1] != CODE_DIR:
            raise self.error(f"{name} is not a file under {prefix}/{CODE_DIR}/", index)
        long = next((part for part in parts if len(part.encode("utf-8", "surrogatepass")) > NAME_MAX), None)
        if long is not None:
            raise self.error(f"the name {json.dumps(long[:40])}... is over {NAME_MAX} bytes, more than a file name can be", index)
        return "/".join(parts[1:])

    def check_mode(self, mode: str) -> None:
        if mode not in FILE_MODES:
            kind = {"120000": "symbolic links", "160000": "submodules"}.get(mode, f"file mode {mode}")
            raise self.error(f"{kind} are not accepted; only regular files ({', '.join(FILE_MODES)})")

    # Hunks.

    def hunks(self, change: ChangeKind) -> tuple[Hunk, ...]:
        hunks: list[Hunk] = []
        old_end = new_end = 0  # where the previous hunk ends on each side (0-based, exclusive)
        while (line := self.peek()) is not None and line.startswith("@@"):
            at = self.index
            hunk = self.hunk()
            if hunks and (hunks[-1].old_no_newline or hunks[-1].new_no_newline):
                raise self.error(f"a hunk after the one at line {hunks[-1].line}, which ends the file", at)
            old_begin = hunk.old_start - 1 if hunk.old_count else hunk.old_start
            new_begin = hunk.new_start - 1 if hunk.new_count else hunk.new_start
            if old_begin < old_end or new_begin < new_end:
                raise self.error(f"the hunk overlaps or comes before the hunk at line {hunks[-1].line}", at)
            if change == ChangeKind.ADDED and (hunks or hunk.old_count or hunk.old_start):
                raise self.error('an added file has one hunk, "@@ -0,0 +1,N @@"', at)
            if change == ChangeKind.DELETED and (hunks or hunk.new_count or hunk.new_start):
                raise self.error('a deleted file has one hunk, "@@ -1,N +0,0 @@"', at)
            old_end, new_end = old_begin + hunk.old_count, new_begin + hunk.new_count
            hunks.append(hunk)
            self.last_hunk = hunk
        if not hunks:
            raise self.error("a file section without hunks")
        return tuple(hunks)

    def hunk(self) -> Hunk:
        """The hunk whose header is at self.index, its body as unidiff read it by the header's
        counts (so a removed line "--- x" is a body line), each line checked on top: "\\" lines
        follow a line of the hunk, and no line follows one on the side it closed."""
        at = self.index
        match = _HUNK_HEADER.fullmatch(self.lines[at])
        if match is None:
            raise self.error('malformed hunk header; expected "@@ -start,count +start,count @@"')
        old_start, new_start = int(match.group(1)), int(match.group(3))
        old_count = int(match.group(2)) if match.group(2) is not None else 1
        new_count = int(match.group(4)) if match.group(4) is not None else 1
        if (old_count and not old_start) or (new_count and not new_start):
            raise self.error("line numbers start at 1")
        if old_count or new_count:
            reading = _HunkReading(self.lines, at)
            end, broken = reading.end, not reading.complete
        else:
            end, broken = at + 1, False  # no body (unidiff would take the next line for one)
        old_closed = new_closed = False  # that side ended with "\ No newline at end of file"
        body: list[str] = []
        previous = ""  # kind of the previous body line; "\\" after a marker
        self.index += 1
        # The body, then (a hunk unidiff read whole) its markers: any "\\" line, in any language.
        while (line := self.peek()) is not None and (self.index < end or (not broken and line.startswith("\\"))):
            kind = line[:1] or " "  # an empty line is a context line whose space an editor removed
            if kind == "\\":
                if previous in ("", "\\"):
                    raise self.error('a "\\" line must follow a line of the hunk')
                old_closed = old_closed or previous in " -"
                new_closed = new_closed or previous in " +"
            elif kind not in " -+":
                # unidiff reads a lone "\r" (the empty line of a CRLF patch) as an empty context
                # line; patch(1) does not, and neither do we.
                break
            elif (kind in " -" and old_closed) or (kind in " +" and new_closed):
                raise self.error('a line after "\\ No newline at end of file"')
            else:
                body.append(kind + line[1:])
            previous = kind
            self.index += 1
        if broken or self.index < end:
            old_left = old_count - sum(1 for line in body if line[0] in " -")
            new_left = new_count - sum(1 for line in body if line[0] in " +")
            line = self.peek()
            if line is not None and (line[:1] or " ") in " -+":  # a body line beyond the counts
                raise self.error(
                    f"the hunk at line {at + 1} has more lines than its header counts ({old_count} old, {new_count} new)"
                )
            shortfall = f"the hunk at line {at + 1} needs {old_left} more old and {new_left} more new line(s)"
            if self.index >= len(self.lines):
                raise self.error(shortfall)
            raise self.error(f'{shortfall}, each starting with " ", "-" or "+"')
        return Hunk(old_start, old_count, new_start, new_count, tuple(body), old_closed, new_closed, at + 1)


class _HunkReading(PatchSet):
    """unidiff's reading of one hunk: where its body ends, by the header's counts.

    The PatchSet is given a placeholder file header (it reads hunks of files), then the hunk's
    header and the lines after it one at a time, until it holds the hunk whole; the file headers
    and everything between hunks are read by our checks, which name the line at fault. So unidiff
    never sees the lines on which its regular expressions for file headers backtrack for a time
    that grows with the square of the line's length ("Binary files" and "diff --git" lines).
    `end`: the index after the body, or where unidiff stopped inside the hunk (`complete` False:
    a line beyond the counts, a line that is no body line, or the end of the patch).
    """

    def __init__(self, lines: list[str], header: int) -> None:
        self.given = header - 1  # the last line given to unidiff
        self.exhausted = False  # unidiff asked for a line after the patch's last one
        self.complete = True
        try:
            # Only where the body ends is needed, not its lines: unidiff's quicker mode, which checks
            # the same counts and line kinds.
            super().__init__(self._feed(lines, header), metadata_only=True)
        except UnidiffParseError:
            self.complete = False
        self.end = self.given + 1 if self.complete or self.exhausted else self.given

    def _feed(self, lines: list[str], header: int) -> Iterator[str]:
        yield "--- a\n"
        yield "+++ b\n"
        for index in range(header, len(lines)):
            if self[0]:  # the hunk is whole: unidiff asks for what follows it
                return
            self.given = index
            yield lines[index] + "\n"
        self.exhausted = True


def _gnu_report(line: str) -> str | None:
    """The kind of a line GNU `diff -r` prints instead of a diff (each one a change the patch cannot
    carry), or None. Plain string tests: a regular expression with several `.+` would backtrack
    for a long time on a crafted line."""
    if line.endswith(" differ") and " and " in line:
        if line.startswith("Binary files "):
            return "binary"
        if line.startswith("Files "):
            return "unshown"
        if line.startswith("Symbolic links "):
            return "special"
    if line.startswith("Only in ") and ": " in line:
        return "unshown"
    if line.startswith("File ") and " while file " in line:
        return "special"
    return None


def _is_epoch(stamp: str) -> bool:
    """Whether a GNU diff timestamp is 1970-01-01 00:00:00 UTC in its own time zone."""
    match = _TIMESTAMP.fullmatch(stamp.strip())
    if match is None:
        return False
    year, month, day, hour, minute, second, sign, zone_hours, zone_minutes = match.groups()
    zone = timedelta(hours=int(zone_hours), minutes=int(zone_minutes)) * (-1 if sign == "-" else 1)
    try:
        moment = datetime(int(year), int(month), int(day), int(hour), int(minute), int(second), tzinfo=timezone(zone))
    except ValueError:
        return False
    return moment == _EPOCH
