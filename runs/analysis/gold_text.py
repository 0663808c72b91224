"""Gold quoted in text: what of a private suite's gold a step, an output or an error text may quote,
and how it is withheld from viewers the gold rule (runs.visibility.gold_access) does not allow.

Code that ran beside gold bodies quotes them: a Python traceback or warning prints the source line
it stopped at (`norm = np.sqrt(squared_norm)`), `cat` and `grep` print whole files, and code that
reproduces an experiment prints its gold numbers. A `GoldRedaction` holds a paper's gold in the
forms text quotes it, and `redact` withholds it from any text:

- every line of the gold body of one of the paper's functions (stripped; at least MIN_LINE_CHARS
  long, and not a line the paper's code also holds outside those bodies, which every workspace
  shows) becomes WITHHELD_LINE: as a line of its own (a traceback's quote), or at the end of a
  longer line (`scale.py:12:    return x * 3.0` from grep, `>    norm = ...` from pytest) when it
  is at least ANCHOR_CHARS long. A line that merely starts like one (an agent's
  `return x * 3.0 * 1.04`) is the agent's own; a quote cut mid-line or re-spelled (inside a repr)
  is not recognised;
- every spelling of a gold number with at least MIN_NUMBER_DIGITS significant digits (full
  precision, as Python and JSON print a float, and its roundings that long) becomes WITHHELD_NUMBER.
  Shorter spellings are not looked for: 0.8125 or 0.87 occur everywhere, and withholding them in
  text an uploader wrote would tell the uploader which of its guesses is gold.

The paper's redaction is built once per process and suite import (`paper_gold_redaction`):
reading and masking its gold files costs a few milliseconds a paper, the numbers one query.
"""
from __future__ import annotations

import re
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runs.benchmark.locating import MaskingError
from runs.benchmark.masking import MaskTarget, function_body_source, mask_source
from runs.benchmark.scoring import flatten_numbers
from runs.models import Experiment, Function, Paper, Suite
from runs.visibility import GoldAccess

WITHHELD_LINE = "[gold source line withheld]"
WITHHELD_NUMBER = "[gold number withheld]"
# Stripped gold lines shorter than this (`pass`, `else:`, `x = 1`) are never withheld: too common
# to give anything away, and withholding them would blank lines of every program's output.
MIN_LINE_CHARS = 6
# Gold lines at least this long are found inside longer lines too; shorter ones only whole.
ANCHOR_CHARS = 10
# Significant digits of the shortest spelling of a gold number withheld in text.
MIN_NUMBER_DIGITS = 8
# How long a process keeps a paper's redaction: gold numbers made by `make_gold` after a suite
# was imported show up in it within this long (gold code changes need a re-import, which is in the key).
CACHE_SECONDS = 300

_WORD_START = re.compile(r"(?<!\w)\S")
# A number as text prints it: sign, digits, fraction, exponent.
_NUMBER = re.compile(r"(?<![\w.])-?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?(?![\w.])")


@dataclass(frozen=True)
class GoldRedaction:
    """A paper's gold in the forms text quotes it (module docstring). Empty: nothing to withhold.
    `_anchors` maps the first ANCHOR_CHARS characters of each long enough gold line to those lines."""

    lines: frozenset[str] = frozenset()
    numbers: frozenset[str] = frozenset()
    _anchors: dict[str, tuple[str, ...]] = field(default_factory=dict, compare=False, repr=False)

    @classmethod
    def of(cls, *, lines: Iterable[str] = (), numbers: Iterable[str] = ()) -> GoldRedaction:
        kept = frozenset(line for line in lines if len(line) >= MIN_LINE_CHARS and re.search(r"\w", line))
        anchors: dict[str, list[str]] = defaultdict(list)
        for line in kept:
            if len(line) >= ANCHOR_CHARS:
                anchors[line[:ANCHOR_CHARS]].append(line)
        return cls(kept, frozenset(numbers), {key: tuple(found) for key, found in anchors.items()})

    def __bool__(self) -> bool:
        return bool(self.lines or self.numbers)

    def text(self, value: str) -> str:
        """`value` with every quoted gold line and gold number withheld."""
        if not self or not value:
            return value
        if self.lines:
            value = "".join(self._line(line) for line in value.splitlines(keepends=True))
        if self.numbers:
            value = _NUMBER.sub(lambda match: WITHHELD_NUMBER if match[0].lstrip("-") in self.numbers else match[0], value)
        return value

    def json(self, value: Any) -> Any:
        """A JSON value (a tool call's arguments) with `text` applied to every string in it, and
        every number that is a gold number in full withheld."""
        if not self:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {key: self.json(item) for key, item in value.items()}
        if isinstance(value, list):
            return [self.json(item) for item in value]
        if isinstance(value, float) and self.numbers and self.text(repr(value)) != repr(value):
            return WITHHELD_NUMBER
        return value

    def _line(self, line: str) -> str:
        body = line.rstrip("\r\n")
        end = line[len(body):]
        stripped = body.strip()
        if len(stripped) < MIN_LINE_CHARS:
            return line
        if stripped in self.lines:
            return body[: len(body) - len(body.lstrip())] + WITHHELD_LINE + end
        if len(stripped) < ANCHOR_CHARS or not self._anchors:
            return line
        # A gold line that ends a longer line: a quote behind a prefix (grep's `file:12:`, pytest's `>`).
        tail = body.rstrip()
        for match in _WORD_START.finditer(tail, 0, len(tail) - ANCHOR_CHARS + 1):
            start = match.start()
            if tail[start:] in self._anchors.get(tail[start : start + ANCHOR_CHARS], ()):
                return body[:start] + WITHHELD_LINE + body[len(tail):] + end
        return line


NOTHING = GoldRedaction()


def gold_number_spellings(values: Iterable[Any]) -> set[str]:
    """The spellings of these gold numbers that text is searched for (without a sign): each float's
    repr and its roundings to MIN_NUMBER_DIGITS..17 significant digits, for floats that have that
    many (integers and short decimals are left alone: see the module docstring)."""
    spellings = set()
    for value in values:
        if not isinstance(value, float) or value != value or value in (float("inf"), float("-inf")):
            continue
        value = abs(value)
        if len(re.sub(r"[^0-9]", "", repr(value).split("e")[0]).strip("0")) < MIN_NUMBER_DIGITS:
            continue
        spellings.add(repr(value))
        spellings.update(f"{value:.{digits}g}" for digits in range(MIN_NUMBER_DIGITS, 18))
    return spellings


def gold_body_lines(*, source: str, functions: list[MaskTarget]) -> set[str]:
    """The stripped lines of the gold bodies of `functions` in one gold file `source`, less those
    the file holds with every one of them masked as a workspace masks it (public code: a workspace
    shows them whatever is masked, the descriptions included). A function that cannot be found is skipped."""
    lines: set[str] = set()
    for function in functions:
        try:
            body = function_body_source(source, function.name, line_hint=function.line_hint)
        except (MaskingError, SyntaxError, ValueError):
            continue
        lines.update(line.strip() for line in body.splitlines())
    try:
        masked = mask_source(source, functions).text
    except (MaskingError, SyntaxError, ValueError):
        masked = ""
    return lines - {line.strip() for line in masked.splitlines()}


# paper pk -> (key, built at, redaction)
_PAPERS: dict[int, tuple[tuple, float, GoldRedaction]] = {}


def paper_gold_redaction(*, paper: Paper, code: bool = True, numbers: bool = True, suite: Suite | None = None) -> GoldRedaction:
    """The paper's gold code lines (`code`) and gold numbers (`numbers`) as a GoldRedaction: its
    functions' gold bodies read from its code directory on this server (none when it is absent),
    its experiments' gold results. Built at most once every CACHE_SECONDS per process and import
    of the suite (two queries when built). `suite`: the paper's, when the caller has it loaded."""
    if not code and not numbers:
        return NOTHING
    suite = suite or paper.suite
    imported = suite.imported_at.timestamp() if suite.imported_at else 0.0
    key = (paper.code_dir, imported)
    held = _PAPERS.get(paper.pk)
    if held is None or held[0] != key or time.monotonic() - held[1] > CACHE_SECONDS:
        held = _PAPERS[paper.pk] = (key, time.monotonic(), _paper_redaction(paper))
    redaction = held[2]
    if code and numbers:
        return redaction
    return GoldRedaction.of(lines=redaction.lines if code else (), numbers=redaction.numbers if numbers else ())


def _paper_redaction(paper: Paper) -> GoldRedaction:
    lines: set[str] = set()
    code_dir = Path(paper.code_dir) if paper.code_dir else None
    if code_dir is not None and code_dir.is_dir():
        by_file: dict[str, list[MaskTarget]] = defaultdict(list)
        rows = Function.objects.filter(paper_id=paper.pk).values_list("file", "name", "description", "line_hint")
        for file, name, description, hint in rows:
            by_file[file].append(MaskTarget(name=name, description=description, line_hint=hint))
        for relative, functions in by_file.items():
            try:
                source = (code_dir / relative).read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            lines |= gold_body_lines(source=source, functions=functions)
    values = [
        value
        for result in Experiment.objects.filter(paper_id=paper.pk).values_list("gold_result", flat=True)
        if result is not None
        for value in flatten_numbers(result).values()
    ]
    return GoldRedaction.of(lines=lines, numbers=gold_number_spellings(values))


def gold_redaction_for(*, access: GoldAccess, paper: Paper, suite: Suite | None = None) -> GoldRedaction:
    """What of `paper`'s gold a viewer with `access` must not read in any text: its code lines
    unless `access.code`, its numbers unless `access.numbers` (nothing for staff)."""
    return paper_gold_redaction(paper=paper, code=not access.code, numbers=not access.numbers, suite=suite)
