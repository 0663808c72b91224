"""How much one trajectory and one final patch may hold, and how much of them one replay page shows.

Two kinds of bound, both read here from settings (which read the environment;
docs/configuration.md), so an operator changes them in one place and tests lower them:

- Stored limits (`trajectory_limits()`): what an upload may carry and what our own workers record.
  `trajectory_problems` lists what is over them (the upload validator reports it, naming the step
  and the limit); `runs.agents.recorder.TrajectoryWriter` trims its own steps to them and says so
  in a note on the step.
- Page bounds (`replay_bounds()`): what one replay request reads and renders, whatever is stored.
  Trajectories stored before these limits existed may be far larger, so the page never relies on
  the stored limits alone.

Sizes are UTF-8 bytes of text (of compact JSON for a field that is not text); lines are
newline-separated lines. Nothing here imports runs.agents (its recorder imports this module).
"""
from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.template.defaultfilters import filesizeformat

# Defaults. Our built-in runs stop at 50 steps (Run.max_steps, run_eval --max-steps) and agents in
# the literature at a few hundred; our tools cut an observation at 10,000 characters, and a model's
# thought is bounded by its output tokens (16k tokens are about 64 KB); a step of ours is typically
# an observation, a thought of a few KB and the diff of a file or two (one file's diff is cut at
# 50,000 characters). Every default is a few times what a real run of ours produces; the step
# limit, times the steps on a page, is what bounds a replay page's work.
DEFAULT_MAX_STEPS = 1000
DEFAULT_MAX_TEXT_BYTES = 64 * 1024
DEFAULT_MAX_STEP_BYTES = 128 * 1024  # a whole step as JSON: what one of a page's steps may cost
DEFAULT_MAX_STEP_FILES = 300
DEFAULT_MAX_STEP_DIFF_LINES = 5_000
DEFAULT_MAX_DIFF_LINES = 100_000
DEFAULT_MAX_PATCH_BYTES = 2**20
DEFAULT_MAX_PATCH_LINES = 20_000
DEFAULT_MAX_TRAJECTORY_BYTES = 10 * 2**20

# Page bounds: with the step limit above, a page of the largest trajectory the limits allow
# renders within the replay's target (scripts/bench_replay.py measures it against the target).
DEFAULT_STEPS_PER_PAGE = 20
PAGE_STEP_DIFF_LINES = 200  # diff lines shown per step; the final patch holds the whole change
PAGE_STEP_FILES = 20  # files listed per step (and files of the final patch); the rest are counted
PAGE_STEP_NOTES = 50
PAGE_PATCH_LINES = 1_000  # lines of the final patch (and of the out-of-scope edits) per page
PAGE_PATCH_CHARS = 256 * 1024  # read from the database at most; lines beyond are not needed
# Steps of a page whose bodies the page itself renders (about a screen: a step with its long
# observation and diffs collapsed is a few lines tall); the page lists the others one line each
# and static/js/replay.js fetches their bodies (runs.replay.views.attempt_steps) as they come into
# view, at most `steps_per_page` of them a request. Tests lower it (settings.REPLAY_FIRST_SCREEN_STEPS).
PAGE_FIRST_SCREEN_STEPS = 5


@dataclass(frozen=True)
class TrajectoryLimits:
    steps: int
    text_bytes: int  # each text field of a step (thought, observation, arguments, ...) and the header
    step_bytes: int  # a whole step as JSON
    step_files: int
    step_diff_lines: int
    diff_lines: int  # all steps' diffs together
    patch_bytes: int
    patch_lines: int
    trajectory_bytes: int  # the whole trajectory as JSON


@dataclass(frozen=True)
class ReplayBounds:
    steps_per_page: int
    first_screen_steps: int  # bodies rendered with the page; the rest of the page's steps load on demand
    step_diff_lines: int
    step_files: int
    step_notes: int
    text_bytes: int  # a text field longer than this is shown cut (only trajectories stored before the limits)
    patch_lines: int
    patch_chars: int


def _setting(name: str, default: int) -> int:
    # Agents also run in scripts without Django settings: the defaults hold there.
    return int(getattr(settings, name, default)) if settings.configured else default


def trajectory_limits() -> TrajectoryLimits:
    """The stored limits now in force."""
    return TrajectoryLimits(
        steps=_setting("TRAJECTORY_MAX_STEPS", DEFAULT_MAX_STEPS),
        text_bytes=_setting("TRAJECTORY_MAX_TEXT_BYTES", DEFAULT_MAX_TEXT_BYTES),
        step_bytes=_setting("TRAJECTORY_MAX_STEP_BYTES", DEFAULT_MAX_STEP_BYTES),
        step_files=_setting("TRAJECTORY_MAX_STEP_FILES", DEFAULT_MAX_STEP_FILES),
        step_diff_lines=_setting("TRAJECTORY_MAX_STEP_DIFF_LINES", DEFAULT_MAX_STEP_DIFF_LINES),
        diff_lines=_setting("TRAJECTORY_MAX_DIFF_LINES", DEFAULT_MAX_DIFF_LINES),
        patch_bytes=_setting("SUBMISSION_MAX_PATCH_BYTES", DEFAULT_MAX_PATCH_BYTES),
        patch_lines=_setting("SUBMISSION_MAX_PATCH_LINES", DEFAULT_MAX_PATCH_LINES),
        trajectory_bytes=_setting("SUBMISSION_MAX_TRAJECTORY_BYTES", DEFAULT_MAX_TRAJECTORY_BYTES),
    )


def replay_bounds() -> ReplayBounds:
    """What one replay page reads and renders at most."""
    return ReplayBounds(
        steps_per_page=_setting("REPLAY_STEPS_PER_PAGE", DEFAULT_STEPS_PER_PAGE),
        first_screen_steps=_setting("REPLAY_FIRST_SCREEN_STEPS", PAGE_FIRST_SCREEN_STEPS),
        step_diff_lines=PAGE_STEP_DIFF_LINES,
        step_files=PAGE_STEP_FILES,
        step_notes=PAGE_STEP_NOTES,
        text_bytes=trajectory_limits().text_bytes,
        patch_lines=PAGE_PATCH_LINES,
        patch_chars=PAGE_PATCH_CHARS,
    )


# --- measuring and cutting -----------------------------------------------------------------------


def human_bytes(count: int) -> str:
    """1536 -> "1.5 KB" (Django's filesizeformat: 1 KB is 1,024 bytes; needs configured settings).

    With a plain space: these sizes go into messages read as plain text too (API errors, logs),
    where filesizeformat's no-break space would be a surprise.
    """
    return filesizeformat(count).replace("\xa0", " ")


def sized(count: int) -> str:
    """"64.0 KB (65,536 bytes)": readable, and exact where a limit is checked."""
    return f"{human_bytes(count)} ({count:,} bytes)" if count >= 1024 else f"{count:,} bytes"


def text_bytes(value: Any) -> int:
    """UTF-8 bytes of a text field; compact JSON bytes of anything else (arguments, notes)."""
    if value is None:
        return 0
    if not isinstance(value, str):
        try:
            value = json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=str)
        except (TypeError, ValueError, RecursionError):
            value = str(value)
    return len(value.encode("utf-8", errors="surrogatepass"))


def line_count(text: Any) -> int:
    """Newline-separated lines of a diff or patch (a last line without a newline counts)."""
    if not isinstance(text, str) or not text:
        return 0
    return text.count("\n") + (0 if text.endswith("\n") else 1)


def cut_text(text: str, max_bytes: int) -> tuple[str, bool]:
    """`text` within `max_bytes` UTF-8 bytes, keeping its head and tail around the marker our
    tools use ("[... N characters truncated ...]", which the replay shows as a cut)."""
    encoded = text.encode("utf-8", errors="surrogatepass")
    if len(encoded) <= max_bytes:
        return text, False
    keep = max(0, max_bytes - 64)  # room for the marker
    head = encoded[: keep // 2].decode("utf-8", errors="ignore")
    tail = encoded[len(encoded) - (keep - keep // 2):].decode("utf-8", errors="ignore") if keep else ""
    omitted = len(text) - len(head) - len(tail)
    return f"{head}\n[... {omitted} characters truncated ...]\n{tail}", True


# --- checking a trajectory against the limits -----------------------------------------------------

# A step's fields that hold free text (or, for arguments and notes, JSON shown as text).
STEP_TEXT_FIELDS = ("thought", "observation", "arguments", "traceback", "summary", "notes")
# Per trajectory, this many problems are listed; the rest are counted.
MAX_LISTED = 10


def step_bytes(step: Any) -> int:
    """A step (a runs.agents.trajectory.Step) as compact JSON, in UTF-8 bytes."""
    return text_bytes(step.model_dump())


def step_diff_lines(step: Any) -> int:
    return sum(line_count(change.diff) for change in step.files_changed)


def patch_problem(patch: Any, limits: TrajectoryLimits) -> str | None:
    """Why a final patch is over the limits, or None."""
    if not isinstance(patch, str) or not patch:
        return None
    size = len(patch.encode("utf-8", errors="surrogatepass"))
    if size > limits.patch_bytes:
        return f"is {sized(size)}; a final patch may hold at most {sized(limits.patch_bytes)}"
    lines = line_count(patch)
    if lines > limits.patch_lines:
        return f"has {lines:,} lines; a final patch may hold at most {limits.patch_lines:,} lines"
    return None


def step_count_problem(count: int, limits: TrajectoryLimits) -> str | None:
    if count > limits.steps:
        return f"has {count:,} steps; a trajectory may hold at most {limits.steps:,} steps"
    return None


def trajectory_problems(trajectory: Any, limits: TrajectoryLimits | None = None) -> list[str]:
    """What in a trajectory (a runs.agents.trajectory.Trajectory) is over the limits: each message
    names the step (numbered from 1, as on the replay page), the field and the limit. At most
    `MAX_LISTED` are listed, then how many more."""
    limits = limits or trajectory_limits()
    found: list[str] = []
    count = 0

    def add(message: str) -> None:
        nonlocal count
        count += 1
        if len(found) < MAX_LISTED:
            found.append(message)

    steps = trajectory.steps
    problem = step_count_problem(len(steps), limits)
    if problem:
        add(problem)
    header_size = text_bytes(trajectory.header.model_dump())
    if header_size > limits.text_bytes:
        add(f"header: is {sized(header_size)} of JSON; the header may hold at most {sized(limits.text_bytes)}")
    total_lines = 0
    for number, step in enumerate(steps, start=1):
        for name in STEP_TEXT_FIELDS:
            size = text_bytes(getattr(step, name))
            if size > limits.text_bytes:
                add(f"step {number}: {name} is {sized(size)}; each text field of a step may hold at most "
                    f"{sized(limits.text_bytes)}")
        size = step_bytes(step)
        if size > limits.step_bytes:
            add(f"step {number}: is {sized(size)} of JSON; a step may hold at most {sized(limits.step_bytes)}")
        files = step.files_changed
        if len(files) > limits.step_files:
            add(f"step {number}: files_changed lists {len(files):,} files; a step may list at most {limits.step_files:,}")
        lines = step_diff_lines(step)
        total_lines += lines
        if lines > limits.step_diff_lines:
            add(f"step {number}: its diffs hold {lines:,} lines; one step's diffs may hold at most "
                f"{limits.step_diff_lines:,} lines")
    if total_lines > limits.diff_lines:
        add(f"the steps' diffs hold {total_lines:,} lines in all; a trajectory's diffs may hold at most "
            f"{limits.diff_lines:,} lines")
    problem = patch_problem(trajectory.final_patch, limits)
    if problem:
        add(f"final_patch {problem}")
    if count > len(found):
        found.append(f"... and {count - len(found)} more over the limits")
    return found


def iter_limits(limits: TrajectoryLimits | None = None) -> Iterator[tuple[str, str, str]]:
    """(setting, value as shown, what it bounds) for the upload page and the API documentation."""
    limits = limits or trajectory_limits()
    yield "TRAJECTORY_MAX_STEPS", f"{limits.steps:,}", "steps per trajectory"
    yield ("TRAJECTORY_MAX_TEXT_BYTES", human_bytes(limits.text_bytes),
           "per text field of a step (thought, observation, arguments, traceback, summary, notes) and for the header")
    yield "TRAJECTORY_MAX_STEP_BYTES", human_bytes(limits.step_bytes), "per step, as JSON (all its fields and diffs)"
    yield "TRAJECTORY_MAX_STEP_FILES", f"{limits.step_files:,}", "files in one step's files_changed"
    yield "TRAJECTORY_MAX_STEP_DIFF_LINES", f"{limits.step_diff_lines:,}", "diff lines in one step (all its files)"
    yield "TRAJECTORY_MAX_DIFF_LINES", f"{limits.diff_lines:,}", "diff lines in all steps of one trajectory"
    yield "SUBMISSION_MAX_PATCH_BYTES", human_bytes(limits.patch_bytes), "per final patch"
    yield "SUBMISSION_MAX_PATCH_LINES", f"{limits.patch_lines:,}", "lines per final patch"
    yield "SUBMISSION_MAX_TRAJECTORY_BYTES", human_bytes(limits.trajectory_bytes), "per trajectory, as JSON"
