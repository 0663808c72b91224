"""Recording an attempt as it runs: `TrajectoryWriter` runs tools, records diffs and saves.

The document it writes is `runs.agents.trajectory` (the format, which knows nothing of tools or
sandboxes); this module is the runtime side. Each save replaces the file atomically (temporary
file, fsync, os.replace): a crash at any moment leaves the previous complete version.

Diffs come from snapshots of the workspace on the host: before a tool runs and after it, every
file is stat'ed and only files whose size or times changed are read and compared, so a step costs a
directory walk plus the files it touched. Binary files, and files over `MAX_DIFF_FILE_BYTES`, are
recorded as changed without a diff. Every step is cut to the trajectory limits (runs.limits) as it
is added, the same limits an upload is checked against.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import functools
import importlib.metadata
import json
import os
import platform
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Any

from runs.benchmark.answers import ParsedAnswer, parse_answer
from runs.benchmark.patches import ChangeKind, unified_diff
from runs.benchmark.workspace import CODE_DIR, EXCLUDED_DIRS
from runs.limits import cut_text, line_count, sized, step_bytes, text_bytes, trajectory_limits
from sandbox import fs

from .base import ExitStatus
from .tools import ToolContext, ToolResult, run_tool, truncate
from .trajectory import FORMAT, FileChange, FinalAnswer, Header, Step, Trajectory

# Files bigger than this are not read for diffs (data, checkpoints, logs that grew large).
MAX_DIFF_FILE_BYTES = 512 * 1024
# One file's diff in one step is cut (head and tail) beyond this many characters.
MAX_DIFF_CHARS = 50_000
# Timestamps are coarse (a kernel tick, up to 2 s on some filesystems); see _Entry.still_valid.
_RACY_NS = 2 * 10**9
# All the text one snapshot keeps in memory.
MAX_SNAPSHOT_BYTES = 64 * 2**20
# What one step records of the files it changed: one command can touch 50,000 files, and every
# step's record is kept, saved after each step and shown on the replay page.
MAX_STEP_FILE_CHANGES = 200
MAX_STEP_DIFF_CHARS = 500_000


def now_iso() -> str:
    """The current UTC time, ISO 8601 with microseconds."""
    return _dt.datetime.now(_dt.UTC).isoformat()


def write_atomically(path: Path, text: str) -> None:
    """Replace `path` with `text` so that readers only ever see a whole old or whole new file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temporary = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # backslashreplace: a lone surrogate (a model may send "\\udc80" in tool arguments) becomes
        # its JSON escape again, so a trajectory is always written, and reads back the same.
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as handle:
            handle.write(text)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        try:
            os.unlink(temporary)
        except FileNotFoundError:
            pass
        raise


def harness_versions() -> dict[str, str]:
    """Versions worth knowing when comparing attempts: harness, Python, SDKs, git commit."""
    return dict(_versions_of_this_process())


@functools.cache
def _versions_of_this_process() -> dict[str, str]:
    """Read once per process: reading packages' metadata costs a few milliseconds an attempt, and
    what this process runs does not change while it lives (the evaluation worker reads them before
    it forks its work horses, runs.evaluation.worker)."""
    versions = {"python": platform.python_version(), "trajectory_format": FORMAT}
    for package in ("autoexperiment-site", "openai", "anthropic"):
        try:
            versions[package] = importlib.metadata.version(package)
        except importlib.metadata.PackageNotFoundError:
            pass
    commit = _git_commit(Path(__file__).resolve().parents[2])
    if commit:
        versions["harness_commit"] = commit
    return versions


def _git_commit(root: Path) -> str | None:
    # Read .git directly: running git on every attempt would be slow, and a deployment may not
    # have git installed at all.
    git = root / ".git"
    try:
        head = (git / "HEAD").read_text().strip()
        if not head.startswith("ref: "):
            return head
        ref = head[5:]
        if (git / ref).is_file():
            return (git / ref).read_text().strip()
        for line in (git / "packed-refs").read_text().splitlines():
            if line.endswith(" " + ref):
                return line.split()[0]
    except OSError:
        pass
    return None


# --- workspace snapshots -------------------------------------------------------------------------


class _EntryKind(StrEnum):
    TEXT = "text"
    BINARY = "binary"
    LARGE = "large"
    SYMLINK = "symlink"
    SPECIAL = "special"  # a FIFO, socket or device: never opened


@dataclass(frozen=True)
class _Entry:
    signature: tuple[int, int, int]  # (mtime_ns, size, mode): when it changes, the file is re-read
    kind: _EntryKind
    text: str | None  # file text, a symlink's target, or what kind of special file
    read_ns: int = 0  # wall clock when read

    def still_valid(self, signature: tuple[int, int, int]) -> bool:
        # As git's "racily clean" check: a file modified shortly before it was read may be modified
        # again within the filesystem's timestamp granularity without its stat changing, so only
        # entries whose mtime is clearly older than the read are trusted.
        return self.signature == signature and signature[0] + _RACY_NS < self.read_ns


class Snapshot(dict[str, _Entry]):
    """Workspace-relative path -> entry; `incomplete` says what a bounded walk left out."""

    incomplete: str = ""


def snapshot(root: Path, previous: Snapshot | None = None, *, under: str | None = None) -> Snapshot:
    """Every file under `root` (or its subdirectory `under`), reusing `previous` entries whose
    stat signature is unchanged so that only touched files are read.

    The agent controls the workspace, so the walk goes through sandbox.fs: no link is followed,
    special files are recorded but never opened, names may hold any bytes, and depth and entry
    count are bounded (what lies beyond is named in `incomplete`). Text is kept for at most
    `MAX_SNAPSHOT_BYTES` in all; files beyond are recorded as large, so a workspace full of data
    files cannot exhaust the worker's memory.
    """
    previous = previous or Snapshot()
    result = Snapshot()
    budget = MAX_SNAPSHOT_BYTES
    walk = fs.Walk(root, under=under or "", skip=frozenset(EXCLUDED_DIRS))
    try:
        for entry in walk:
            if entry.kind == fs.FileKind.DIR:
                continue
            info = entry.info
            signature = (info.st_mtime_ns, info.st_size, info.st_mode)
            old = previous.get(entry.path)
            if old is None or not old.still_valid(signature):
                old = _read_entry(entry, signature, budget)
            if old.text is not None and old.kind == _EntryKind.TEXT:
                budget -= len(old.text)
            result[entry.path] = old
    except OSError as error:  # the workspace root itself went away: what was seen is the snapshot
        walk.incomplete = walk.incomplete or f"walk stopped: {error.strerror}"
    result.incomplete = walk.incomplete
    return result


def _read_entry(entry: fs.Entry, signature: tuple[int, int, int], budget: int) -> _Entry:
    before = time.time_ns()
    return dataclasses.replace(_read(entry, signature, budget), read_ns=before)


def _read(entry: fs.Entry, signature: tuple[int, int, int], budget: int) -> _Entry:
    if entry.kind == fs.FileKind.SYMLINK:
        try:
            return _Entry(signature, _EntryKind.SYMLINK, fs.display_name(os.readlink(entry.name, dir_fd=entry.dir_fd)))
        except OSError:
            return _Entry(signature, _EntryKind.SYMLINK, None)
    if entry.kind != fs.FileKind.FILE:
        return _Entry(signature, _EntryKind.SPECIAL, entry.kind)
    if entry.info.st_size > min(MAX_DIFF_FILE_BYTES, budget):
        return _Entry(signature, _EntryKind.LARGE, None)
    try:
        data, cut = entry.read(MAX_DIFF_FILE_BYTES)
        if cut:
            return _Entry(signature, _EntryKind.LARGE, None)
        if b"\0" in data:
            return _Entry(signature, _EntryKind.BINARY, None)
        return _Entry(signature, _EntryKind.TEXT, data.decode("utf-8"))
    except (UnicodeDecodeError, OSError):
        return _Entry(signature, _EntryKind.BINARY, None)


def _unchanged(old: _Entry | None, new: _Entry | None) -> bool:
    if old is None or new is None:
        return old is new
    if old is new:
        return True
    if old.kind == new.kind and old.kind in (_EntryKind.TEXT, _EntryKind.SYMLINK):
        return old.text == new.text  # rewritten with the same content
    return old.signature == new.signature


def diff_snapshots(before: Snapshot, after: Snapshot, *, max_chars: int | None = MAX_DIFF_CHARS) -> list[FileChange]:
    """The files that differ between two snapshots, with unified diffs where both sides are text
    (each cut to `max_chars`, None: never cut)."""
    changes = []
    for path in sorted(set(before) | set(after)):
        old, new = before.get(path), after.get(path)
        if _unchanged(old, new):
            continue
        changes.append(_file_change(path, ChangeKind.between(old, new), old, new, max_chars))
    return changes


def _file_change(path: str, change: ChangeKind, old: _Entry | None, new: _Entry | None, max_chars: int | None) -> FileChange:
    shown = fs.display_name(path)
    kinds = {entry.kind for entry in (old, new) if entry is not None}
    if not fs.plain_name(path):
        return FileChange(shown, change, None, "name holds control characters, quotes or invalid UTF-8: no diff recorded")
    if kinds == {_EntryKind.TEXT}:
        diff = unified_diff(path, old.text if old else None, new.text if new else None)
        cut = False
        if max_chars is not None:
            diff, cut = truncate(diff, max_chars)
        return FileChange(path, change, diff, "diff truncated" if cut else "")
    if kinds & {_EntryKind.SYMLINK, _EntryKind.SPECIAL}:
        sides = [
            f"symlink to {e.text}" if e.kind == _EntryKind.SYMLINK
            else f"{e.text} (special file, not read)" if e.kind == _EntryKind.SPECIAL else f"{e.kind} file"
            for e in (old, new) if e is not None
        ]
        return FileChange(path, change, None, " -> ".join(sides))
    reason = f"large file (over {MAX_DIFF_FILE_BYTES // 1024} KB)" if _EntryKind.LARGE in kinds else "binary file"
    return FileChange(path, change, None, f"{reason}: no diff recorded")


def _step_changes(before: Snapshot, after: Snapshot) -> list[FileChange]:
    """One step's changes within MAX_STEP_FILE_CHANGES files and MAX_STEP_DIFF_CHARS of diffs;
    what is left out is said in a last entry (the final patch holds the text changes, within its
    own limits). A file whose diff could not fit what is left of the step's budget is not diffed
    at all: a step that writes a hundred large files costs the diffs it keeps, not a hundred."""
    paths = [path for path in sorted(set(before) | set(after)) if not _unchanged(before.get(path), after.get(path))]
    kept, budget = [], MAX_STEP_DIFF_CHARS
    for path in paths[:MAX_STEP_FILE_CHANGES]:
        old, new = before.get(path), after.get(path)
        kind = ChangeKind.between(old, new)
        if fs.plain_name(path) and min(_diff_size_at_least(old, new), MAX_DIFF_CHARS) > budget:
            kept.append(FileChange(path, kind, None, "diff not recorded: this step's diffs are too long"))
            continue
        change = _file_change(path, kind, old, new, MAX_DIFF_CHARS)
        if (diff := change.diff) is not None:
            if len(diff) > budget:
                change = FileChange(change.path, change.change, None, "diff not recorded: this step's diffs are too long")
            else:
                budget -= len(diff)
        kept.append(change)
    if len(paths) > MAX_STEP_FILE_CHANGES:
        left = len(paths) - MAX_STEP_FILE_CHANGES
        kept.append(FileChange(".", ChangeKind.MODIFIED, None, f"{left:,} more files changed in this step: not listed"))
    return kept


# About the most a step cut by TrajectoryWriter._bound_to_trajectory_bytes holds.
_CUT_STEP_BYTES = 8 * 1024


def _bounded_arguments(arguments: Any, max_bytes: int) -> Any:
    """A tool call's arguments within `max_bytes` of JSON: long strings cut (keys kept), or, when
    that is not enough (deep structures), the JSON text itself cut."""
    if isinstance(arguments, dict) and arguments:
        share = max(256, max_bytes // (2 * len(arguments)))
        cut = {key: cut_text(value, share)[0] if isinstance(value, str) else value for key, value in arguments.items()}
        if text_bytes(cut) <= max_bytes:
            return cut
    text = json.dumps(arguments, ensure_ascii=False, default=str)
    return {"arguments (cut)": cut_text(text, max_bytes // 2)[0]}


def patch_between(before: Snapshot, after: Snapshot) -> str:
    """One unified diff of the text files that changed, never truncated, with paths relative to
    the workspace root (a/code/..., b/code/...).

    Only what a text diff carries exactly goes in: text files with plain names. Binary and large
    files, links, special files and names a diff header cannot hold are left out (each step's
    file list records them); re-execution would drop them anyway, since only the masked functions'
    files are in scope.
    """
    return "".join(change.diff for change in diff_snapshots(before, after, max_chars=None) if change.diff is not None)


# The trajectory's key (beside "final_patch") saying why the final patch was cut; the harness reads
# it (runs.evaluation.harness) and fails the attempt with outcome patch_too_large, unexecuted.
FINAL_PATCH_OVER_LIMITS = "final_patch_over_limits"
# Kept free in a cut final patch for the note that says so.
_CUT_NOTE_BYTES = 1024


@dataclass(frozen=True)
class FinalPatch:
    """An agent's final patch as stored: whole when within the limits; else `over_limits` says
    why, and `text` is a note followed by the diffs of the files that fit (whole files, in path
    order), within the limits itself."""

    text: str
    over_limits: str | None = None


def _diff_size_at_least(old: _Entry | None, new: _Entry | None) -> int:
    """A lower bound of the characters of a file's diff, known before diffing: the whole text of a
    file added or deleted, what one side has more than the other of a file modified (0 when either
    side is not text: no diff is made)."""
    sides = [entry for entry in (old, new) if entry is not None]
    texts = [entry.text for entry in sides if entry.kind == _EntryKind.TEXT and entry.text is not None]
    if len(texts) < len(sides):
        return 0
    if len(texts) == 1:
        return len(texts[0])
    return abs(len(texts[1]) - len(texts[0]))


def bounded_patch_between(before: Snapshot, after: Snapshot, *, max_bytes: int, max_lines: int) -> FinalPatch:
    """`patch_between`, held to the final patch limits (SUBMISSION_MAX_PATCH_BYTES and _LINES, as an
    upload is): files are diffed one at a time in path order, and diffing stops at the first file
    that would take the patch over a limit, so the worker never holds more than the limit plus one
    file's diff (a file over MAX_DIFF_FILE_BYTES is never diffed), however many files the agent wrote.

    The note of a cut patch stands before the first file header, where a unified diff allows free
    text (runs.benchmark.patches ignores it), so the kept files still read as a patch."""
    paths = [path for path in sorted(set(before) | set(after)) if not _unchanged(before.get(path), after.get(path))]
    room_bytes, room_lines = max_bytes - _CUT_NOTE_BYTES, max_lines - 4
    parts: list[str] = []
    size = lines = 0
    stopped_at = None
    for number, path in enumerate(paths):
        old, new = before.get(path), after.get(path)
        if size + _diff_size_at_least(old, new) > max_bytes:
            stopped_at = number
            break
        change = _file_change(path, ChangeKind.between(old, new), old, new, None)
        if change.diff is None:
            continue
        diff_bytes, diff_lines = len(change.diff.encode("utf-8", errors="surrogatepass")), line_count(change.diff)
        if size + diff_bytes > max_bytes or lines + diff_lines > max_lines:
            stopped_at = number
            break
        parts.append(change.diff)
        size += diff_bytes
        lines += diff_lines
    if stopped_at is None:
        return FinalPatch("".join(parts))
    # Over the limits: keep the whole files that fit with room for the note.
    kept, size, lines = [], 0, 0
    for part in parts:
        part_bytes, part_lines = len(part.encode("utf-8", errors="surrogatepass")), line_count(part)
        if size + part_bytes > room_bytes or lines + part_lines > room_lines:
            break
        kept.append(part)
        size += part_bytes
        lines += part_lines
    over = (
        f"is over the limits of a final patch ({sized(max_bytes)}, {max_lines:,} lines; SUBMISSION_MAX_PATCH_BYTES "
        f"and SUBMISSION_MAX_PATCH_LINES): {len(paths):,} files changed under {CODE_DIR}/, and diffing stopped at "
        f"file {stopped_at + 1:,} of them"
    )
    note = (
        f"# Final patch cut by the harness: it {over}.\n"
        f"# Kept below: the diffs of the first {len(kept):,} files, whole. The attempt is failed (not re-executed).\n"
    )
    return FinalPatch(note + "".join(kept), over)


# --- the writer ----------------------------------------------------------------------------------


class TrajectoryWriter:
    """Builds a trajectory step by step and saves it after each one.

    Give it the workspace as built (before any tool touched it): it keeps a snapshot of `code/`
    for the final patch and of the whole workspace for per-step diffs. Without a workspace, steps
    carry no diffs and there is no final patch. Usable without the ReAct loop: a baseline calls
    `tool_step` (or builds `Step`s and calls `add_step`) and then `finish`.
    """

    def __init__(self, path: str | os.PathLike[str], header: Header, *, workspace: Path | None = None) -> None:
        self.path = Path(path)
        self.workspace = Path(workspace).resolve() if workspace is not None else None
        if self.workspace is not None and self.path.resolve().is_relative_to(self.workspace):
            raise ValueError(f"the trajectory {self.path} must not be inside the workspace {self.workspace}")
        if not header.started_at:
            header.started_at = now_iso()
        if not header.versions:
            header.versions = harness_versions()
        self.trajectory = Trajectory(header=header)
        # The same limits as an upload's (runs.limits): the replay's bounds hold for our runs too.
        self.limits = trajectory_limits()
        self._diff_lines_left = self.limits.diff_lines
        self._steps_dropped = 0
        self._steps_bytes = 0
        self._snapshot: Snapshot = snapshot(self.workspace) if self.workspace else Snapshot()
        self._baseline = Snapshot((p, e) for p, e in self._snapshot.items() if p.startswith(CODE_DIR + "/"))
        self.save()

    @property
    def steps(self) -> list[Step]:
        return self.trajectory.steps

    def next_index(self) -> int:
        return len(self.trajectory.steps) + 1

    def new_step(self, *, thought: str = "") -> Step:
        """An empty step numbered after the last one, started now."""
        return Step(index=self.next_index(), started_at=now_iso(), thought=thought)

    def changes_since_last(self) -> list[FileChange]:
        """Files changed since the previous call (or since the workspace was built)."""
        if self.workspace is None:
            return []
        current = snapshot(self.workspace, self._snapshot)
        changes = _step_changes(self._snapshot, current)
        if current.incomplete and current.incomplete != self._snapshot.incomplete:
            changes.append(FileChange(".", ChangeKind.MODIFIED, None, f"workspace not fully recorded: {current.incomplete}"))
        self._snapshot = current
        return changes

    def add_step(self, step: Step) -> None:
        """Append a finished step, cut to the trajectory limits (runs.limits; each cut is said in
        the step), update the totals and save. Past the step limit a step is counted in the totals
        and in a note on the last recorded step, not recorded."""
        header = self.trajectory.header
        header.input_tokens += step.input_tokens
        header.output_tokens += step.output_tokens
        header.cost += step.cost
        header.cost_unknown = header.cost_unknown or step.cost_unknown
        steps = self.trajectory.steps
        if len(steps) >= self.limits.steps:
            self._steps_dropped += 1
            note = (f"{self._steps_dropped:,} later step{'s' if self._steps_dropped != 1 else ''} not recorded: a trajectory "
                    f"holds at most {self.limits.steps:,} steps (their tokens and cost are in the totals)")
            last = steps[-1]
            if self._steps_dropped > 1 and last.notes:
                last.notes[-1] = note
            else:
                last.notes.append(note)
        else:
            self._bound_step(step)
            self._bound_to_trajectory_bytes(step)
            steps.append(step)
            self._steps_bytes += step_bytes(step)
        self.save()

    def _bound_to_trajectory_bytes(self, step: Step) -> None:
        """Once the steps fill the trajectory's byte limit (less room for the header, the answer,
        a final patch at its limit and every step still to come cut short), a step keeps only the
        head and tail of its text and no diffs, and says so."""
        limits = self.limits
        to_come = max(0, limits.steps - len(self.trajectory.steps) - 1)
        room = (limits.trajectory_bytes - limits.patch_bytes - 2 * limits.text_bytes - self._steps_bytes
                - to_come * _CUT_STEP_BYTES)
        if step_bytes(step) <= room:
            return
        for name in ("thought", "observation", "traceback", "summary"):
            value = getattr(step, name)
            if isinstance(value, str):
                setattr(step, name, cut_text(value, 512)[0])
        step.arguments = _bounded_arguments(step.arguments, 512)
        step.notes = [cut_text(str(note), 256)[0] for note in step.notes[:2]]
        step.files_changed = [
            FileChange(change.path, change.change, None, "diff not recorded: the trajectory reached its byte limit")
            for change in step.files_changed[:20]
        ]
        step.notes.append(f"text cut to its head and tail: the trajectory reached its limit of {self.limits.trajectory_bytes:,} bytes")

    def _bound_step(self, step: Step) -> None:
        limits = self.limits
        for name in ("thought", "observation", "traceback", "summary"):
            value = getattr(step, name)
            if isinstance(value, str):
                value, cut = cut_text(value, limits.text_bytes)
                if cut:
                    setattr(step, name, value)
                    step.truncated = step.truncated or name == "observation"
        if text_bytes(step.notes) > limits.text_bytes:
            # Half the limit shared among the notes kept: JSON escapes at most double a note, and
            # the short notes below still fit.
            kept = step.notes[: max(1, limits.text_bytes // 512)]
            share = limits.text_bytes // (2 * len(kept)) - 16
            step.notes = [cut_text(str(note), share)[0] for note in kept]
            step.notes.append(f"notes cut to the trajectory's limit of {limits.text_bytes:,} bytes")
        if text_bytes(step.arguments) > limits.text_bytes:
            step.arguments = _bounded_arguments(step.arguments, limits.text_bytes)
            step.notes.append("the tool call's arguments were cut to the trajectory's limit")
        changes = step.files_changed
        if len(changes) > limits.step_files:
            left = len(changes) - (limits.step_files - 1)
            changes = changes[: limits.step_files - 1]
            changes.append(FileChange(".", ChangeKind.MODIFIED, None, f"{left:,} more files changed in this step: not listed"))
        step_left = limits.step_diff_lines
        bounded = []
        for change in changes:
            lines = line_count(change.diff)
            if lines and (lines > step_left or lines > self._diff_lines_left):
                which = (f"this step's diffs passed {limits.step_diff_lines:,} lines" if lines > step_left
                         else f"this attempt's diffs passed {limits.diff_lines:,} lines")
                change = FileChange(change.path, change.change, None, f"diff not recorded: {which} (the final patch holds every change)")
            else:
                step_left -= lines
                self._diff_lines_left -= lines
            bounded.append(change)
        step.files_changed = bounded
        self._bound_step_size(step)

    def _bound_step_size(self, step: Step) -> None:
        """The whole step within the step limit: the longest diffs go first (the final patch holds
        every change), then the longest text is halved until it fits."""
        limit = self.limits.step_bytes
        while step_bytes(step) > limit:
            with_diffs = [n for n, change in enumerate(step.files_changed) if change.diff]
            if with_diffs:
                n = max(with_diffs, key=lambda n: len(step.files_changed[n].diff or ""))
                change = step.files_changed[n]
                step.files_changed[n] = FileChange(
                    change.path, change.change, None,
                    f"diff not recorded: this step passed {limit:,} bytes (the final patch holds every change)",
                )
                continue
            name = max(("thought", "observation", "traceback", "summary"), key=lambda name: len(getattr(step, name) or ""))
            text = getattr(step, name) or ""
            if len(text) < 1024:  # only arguments and notes are left, each within the text limit
                step.arguments = _bounded_arguments(step.arguments, limit // 4)
                step.notes = [cut_text(str(note), limit // 8)[0] for note in step.notes[:1]]
                break
            setattr(step, name, cut_text(text, len(text.encode("utf-8", errors="surrogatepass")) // 2)[0])

    def tool_step(
        self,
        context: ToolContext,
        tool: str,
        arguments: dict[str, Any],
        *,
        thought: str = "",
        clock: Callable[[], float] = time.monotonic,
    ) -> tuple[Step, ToolResult]:
        """Run one tool call, record it as a step (with its diffs) and save: for agents that decide
        their tool calls themselves rather than asking a model."""
        step = self.new_step(thought=thought)
        started = clock()
        result = run_tool(context, (tool, arguments))
        self.fill_step(step, tool, arguments, result)
        step.duration = clock() - started
        self.add_step(step)
        return step, result

    def fill_step(self, step: Step, tool: str, arguments: dict[str, Any], result: ToolResult) -> None:
        """Copy a tool's outcome into `step`, with the files it changed and its helper-model cost."""
        step.tool = tool
        step.arguments = arguments
        step.observation = result.observation
        step.exit_code = result.exit_code
        step.timed_out = result.timed_out
        step.truncated = result.truncated
        step.error = result.error
        step.traceback = result.traceback
        if result.model_calls:
            step.charge(result.usage, result.cost)
        step.files_changed = self.changes_since_last()

    def final_patch(self) -> FinalPatch | None:
        """`code/` now against `code/` as built, as one unified diff held to the final patch limits
        (None without a workspace)."""
        if self.workspace is None:
            return None
        current = snapshot(self.workspace, self._snapshot, under=CODE_DIR)
        return bounded_patch_between(self._baseline, current, max_bytes=self.limits.patch_bytes,
                                     max_lines=self.limits.patch_lines)

    def finish(
        self,
        *,
        exit_status: ExitStatus,
        exit_message: str = "",
        final_answer_raw: str | None = None,
        final_answer: ParsedAnswer | None = None,
    ) -> Trajectory:
        """Record how the run ended, the answer and the final patch; save; return the trajectory."""
        header = self.trajectory.header
        header.exit_status = exit_status
        header.exit_message = exit_message
        header.ended_at = now_iso()
        if final_answer is not None:
            self.trajectory.final_answer = FinalAnswer.from_parsed(final_answer_raw, final_answer)
        elif final_answer_raw is not None:
            self.trajectory.final_answer = FinalAnswer.from_parsed(final_answer_raw, parse_answer(final_answer_raw))
        try:
            patch = self.final_patch()
            self.trajectory.final_patch = None if patch is None else patch.text
            if patch is not None and patch.over_limits:
                self.trajectory.extra[FINAL_PATCH_OVER_LIMITS] = patch.over_limits
        finally:
            self.save()
        return self.trajectory

    def save(self) -> None:
        write_atomically(self.path, self.trajectory.to_json())
