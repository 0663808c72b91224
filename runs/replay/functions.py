"""The attempt page's view of its masked functions one by one: how each was judged alone, and the
agent's final implementation of each beside the gold body.

- `attempt_function_verdicts`: the transplants of a failed attempt at n >= 2
  (runs.evaluation.transplants): the attempt's diagnosis, and per masked function its verdict and
  reason, for everyone who may see the attempt (the reason is in the harness's words: it quotes
  nothing the agent's code printed or chose). The numbers its transplant run printed against gold
  (the page's own score table) and the sandbox time it took are staff's alone (runs.visibility:
  `GoldAccess.staff`): the agent's code ran beside the gold bodies of the other functions and chose
  what it printed and how long it took, so both can carry the gold code out.
- `attempt_implementations`: for every masked function of the sample, the body the harness runs
  (the masked file with the final patch applied under the scope rule, runs.benchmark.scope) beside
  the gold body from the paper's code on this server, aligned line by line. It holds the gold
  code: the caller shows it only to those runs.visibility.user_may_see_gold_code allows.

Like runs.replay.presenters, everything here is text and flags; the templates escape it, and the
code is highlighted by the page's own highlighter (runs.replay.diffs.highlight_python), segment by segment.
"""
from __future__ import annotations

import difflib
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from django.db import connection

from autoexperiment_site.caching import cache_quietly, cached
from runs.benchmark.locating import MaskingError
from runs.benchmark.masking import function_body_source
from runs.benchmark.text import format_seconds
from runs.benchmark.workspace import CODE_DIR, WorkspaceError, mask_file
from runs.evaluation.verdicts import code_modules, scoped_code
from runs.models import Attempt, Function, Transplant
from runs.replay.diffs import HighlightBudget, highlight_python
from runs.replay.scores import ExperimentRows, score_table
from runs.suites.selectors import masked_function_specs
from runs.visibility import GoldAccess

# --- how each function was judged alone ------------------------------------------------------------

_PENDING_LABELS = {Transplant.Status.QUEUED: "queued", Transplant.Status.RUNNING: "running", Transplant.Status.GIVEN_UP: "given up"}


def function_label(function: Function) -> str:
    """How the page names a masked function: its file in the paper's code and qualified name."""
    return f"{function.file}:{function.name}"


@dataclass
class FunctionVerdict:
    """One masked function judged alone (one Transplant)."""

    function: str  # "scale.py:scale_a"
    verdict: str  # Transplant.Verdict.RIGHT, WRONG, NOT_DECIDABLE, or "" while not done
    label: str  # "Right alone", "Wrong", "Not decidable", or "queued", "running", "given up"
    reason: str
    # What the page's score table reads (templates/replay/_score_table.html): the transplant run's
    # numbers in its "run" columns, nothing reported.
    experiments: list[ExperimentRows]
    sandbox_seconds: str  # "—" until it ran
    reported_error: str = ""
    reexecuted_error: str = ""

    @property
    def css(self) -> str:
        return {Transplant.Verdict.RIGHT: "verdict-pass", Transplant.Verdict.WRONG: "verdict-fail"}.get(self.verdict, "verdict-other")


@dataclass
class FunctionVerdicts:
    diagnosis: str  # Attempt.function_diagnosis
    diagnosis_label: str  # its words, Attempt.Diagnosis.choices
    rows: list[FunctionVerdict]
    sandbox_seconds: str  # of all the transplants together ("" for a viewer who is not staff)
    numbers_shown: bool = False  # the rows hold their numbers and times (staff)

    @property
    def settled(self) -> bool:
        return self.diagnosis not in ("", Attempt.PENDING)


def attempt_function_verdicts(*, attempt: Attempt, access: GoldAccess) -> FunctionVerdicts | None:
    """The attempt's per-function verdicts, or None when it has no transplants; their numbers and
    times only for `access.staff` (module docstring). One query (the transplants with their
    functions), none at all for an attempt that was never judged so."""
    # transplants_plan writes a diagnosis ("pending" first) whenever it queues transplants and
    # clears it when it queues none: a blank one spares every other attempt the query.
    if not attempt.function_diagnosis:
        return None
    transplants = list(
        Transplant.objects.filter(attempt_id=attempt.pk)
        .select_related("function")
        .only("status", "verdict", "reason", "score", "sandbox_seconds", "function__file", "function__name",
              "function__func_id")
        .order_by("function__func_id")
    )
    if not transplants:
        return None
    rows = []
    for transplant in transplants:
        done = transplant.status == Transplant.Status.DONE
        score = transplant.score if isinstance(transplant.score, dict) and access.staff else {}
        rows.append(FunctionVerdict(
            function=function_label(transplant.function),
            verdict=transplant.verdict if done else "",
            label=transplant.get_verdict_display() if done and transplant.verdict else _PENDING_LABELS.get(transplant.status, transplant.status),
            reason=transplant.reason,
            experiments=score_table(None, score),
            sandbox_seconds=format_seconds(transplant.sandbox_seconds) if access.staff else "",
        ))
    spent = [t.sandbox_seconds for t in transplants if t.sandbox_seconds is not None and access.staff]
    return FunctionVerdicts(
        diagnosis=attempt.function_diagnosis,
        diagnosis_label=attempt.get_function_diagnosis_display(),
        rows=rows,
        sandbox_seconds=format_seconds(sum(spent)) if spent else "",
        numbers_shown=access.staff,
    )


# --- each implementation against gold ---------------------------------------------------------------

# Lines of one body put side by side (each side); the rest is counted, not shown. Also bounds
# difflib's work, which grows with the product of the two sides' lengths.
MAX_BODY_LINES = 400


@dataclass
class SideBySideRow:
    """One aligned row: kind "same" (equal lines), "changed" (a line each, different), "agent" (a
    line of the agent's only) or "gold" (of the gold body only). Each side: its line number in the
    body (1-based) and its highlighted segments {"c", "t"}, or None where the side has no line."""

    kind: str
    agent_number: int | None
    agent: list[dict] | None
    gold_number: int | None
    gold: list[dict] | None


@dataclass
class Implementation:
    function: str  # "scale.py:scale_a"
    problem: str = ""  # why there is nothing to put side by side (a patch that does not apply, ...)
    rows: list[SideBySideRow] = field(default_factory=list)
    omitted: int = 0  # lines of the longer side past MAX_BODY_LINES
    identical: bool = False


@dataclass
class Implementations:
    functions: list[Implementation]
    problem: str = ""  # why no function could be shown (no gold code on this server)


def attempt_implementations(*, attempt: Attempt) -> Implementations | None:
    """The agent's final implementation of each masked function beside its gold body, or None
    when there is nothing to compare (no masked function; the attempt has not finished). Holds the
    gold code: only for viewers runs.visibility.user_may_see_gold_code allows.

    The agent's implementation is the function's body in the code re-execution runs
    (runs.evaluation.verdicts.scoped_final_code), computed in memory: the files with masked
    functions masked as the workspace masks them (runs.benchmark.workspace), the final patch applied
    to them and the scope rule applied (runs.benchmark.scope). Two queries (the sample's
    functions, the final patch); the gold code is read from the paper's code directory. Kept in the
    shared cache: masking, scoping and highlighting would otherwise be redone on every view of a
    public suite's replay, and cost more than the page's queries. A try's final code never changes, and the suite's re-import (which may
    change its gold code) is in the key."""
    if attempt.status in (Attempt.QUEUED, Attempt.RUNNING) or not attempt.sample.n:
        return None  # no final code yet, or nothing masked (a reproduction sample)
    suite = attempt.run.suite  # loaded with the attempt (attempt_get_for_replay)
    key = (f"replay-implementations/1:{connection.settings_dict['NAME']}:{attempt.pk}:{attempt.tries}:"
           f"{suite.pk}:{suite.imported_at.timestamp() if suite.imported_at else 0}")
    stored = cached(key, what="replay implementations")
    if stored is not None:
        return stored
    implementations = _implementations(attempt)
    if implementations is not None:
        cache_quietly(key, implementations, IMPLEMENTATIONS_CACHE_SECONDS, what="replay implementations")
    return implementations


# Gold code edited on the server without a re-import shows here within this long.
IMPLEMENTATIONS_CACHE_SECONDS = 3600


def _implementations(attempt: Attempt) -> Implementations | None:
    paper = attempt.sample.paper
    if not paper.code_dir or not Path(paper.code_dir).is_dir():
        return Implementations([], problem=f"The gold code of paper {paper.paper_id} is not on this server.")
    functions = list(attempt.sample.functions.order_by("func_id"))
    if not functions:
        return None
    patch = Attempt.objects.values_list("final_patch", flat=True).get(pk=attempt.pk) or ""
    files = _masked_files(Path(paper.code_dir), functions)
    refused = _apply(patch, files, code_dir=Path(paper.code_dir))
    budget = HighlightBudget()
    shown = []
    for function in functions:
        source = files[function.file]
        view = Implementation(function_label(function))
        shown.append(view)
        if source.problem or refused:
            view.problem = source.problem or refused
            continue
        try:
            gold = function_body_source(source.original, function.name, line_hint=function.line_hint)
            agent = function_body_source(source.final, function.name, line_hint=function.line_hint)
        except (MaskingError, SyntaxError, ValueError) as error:
            view.problem = f"the function cannot be found in the code re-execution runs: {error}"
            continue
        _side_by_side(view, agent, gold, budget)
    return Implementations(shown)


@dataclass
class _CodeFile:
    relative: str  # in the paper's code directory ("scale.py"); the workspace's "code/scale.py"
    original: str = ""  # the gold code
    masked: str = ""  # as the workspace holds it
    final: str = ""  # what re-execution runs
    names: list[str] = field(default_factory=list)  # qualified names, as task.json lists them
    problem: str = ""


def _masked_files(code_dir: Path, functions: list[Function]) -> dict[str, _CodeFile]:
    """Each file with masked functions, masked by the workspace builder's own code
    (runs.benchmark.workspace.mask_file), so the final patch, written against the workspace, applies to it."""
    by_file: dict[str, list[Function]] = defaultdict(list)
    for function in functions:
        by_file[function.file].append(function)
    files = {}
    for relative, masked_functions in by_file.items():
        code = files[relative] = _CodeFile(relative)
        try:
            code.original = (code_dir / relative).read_bytes().decode("utf-8")
            masked = mask_file(code_dir, relative, masked_function_specs(masked_functions))
        except (OSError, UnicodeDecodeError, WorkspaceError):
            # No detail: the page may be public (Suite.gold_public) and the errors name the server's paths.
            code.problem = f"the gold code of {relative} cannot be read or masked on this server"
            continue
        code.masked = code.final = masked.text
        code.names = [entry["name"] for entry in masked.missing_functions]
    return files


def _apply(patch: str, files: dict[str, _CodeFile], *, code_dir: Path) -> str:
    """Put the code re-execution runs into each file's `final` (runs.evaluation.verdicts.scoped_code,
    the harness's own scope rule); return why the harness refuses the patch ("" when it applies).

    Sections of other files are left out unread (no path a patch names is read on the server): the
    scope rule takes nothing from them, but whether they apply is unknown here; when one does not,
    the re-execution's error and the transplants' reasons on the page say so.
    """
    readable = {f"{CODE_DIR}/{f.relative}": f for f in files.values() if not f.problem}
    error, scoped = scoped_code(
        patch=patch,
        masked={path: f.masked for path, f in readable.items()},
        functions={path: f.names for path, f in readable.items()},
        read_other=None,
        workspace_modules=code_modules(code_dir=code_dir, files=[f.relative for f in files.values()]),
    )
    if error:
        return error
    for path, text in scoped.files.items():
        readable[path].final = text
    return ""


def _side_by_side(view: Implementation, agent: str, gold: str, budget: HighlightBudget) -> None:
    """Align the two bodies line by line (difflib): equal lines side by side, and within a changed
    block the most similar lines paired (`_pairs`)."""
    agent_lines, gold_lines = agent.split("\n"), gold.split("\n")
    view.identical = agent_lines == gold_lines
    view.omitted = max(0, len(agent_lines) - MAX_BODY_LINES, len(gold_lines) - MAX_BODY_LINES)
    agent_lines, gold_lines = agent_lines[:MAX_BODY_LINES], gold_lines[:MAX_BODY_LINES]
    # A function is highlighted whole or not at all, like a diff (HighlightBudget).
    highlight = budget.take(sum(map(len, agent_lines)) + sum(map(len, gold_lines)))

    def segments(line: str) -> list[dict]:
        return highlight_python(line) if highlight and line else [{"c": "", "t": line}]

    matcher = difflib.SequenceMatcher(None, agent_lines, gold_lines, autojunk=False)
    for tag, a_start, a_end, g_start, g_end in matcher.get_opcodes():
        if tag == "equal":
            pairs = list(zip(range(a_start, a_end), range(g_start, g_end)))
        else:
            pairs = _pairs(agent_lines, a_start, a_end, gold_lines, g_start, g_end)
        for a, g in pairs:
            kind = "same" if tag == "equal" else "changed" if a is not None and g is not None else "agent" if a is not None else "gold"
            view.rows.append(SideBySideRow(
                kind=kind,
                agent_number=None if a is None else a + 1,
                agent=None if a is None else segments(agent_lines[a]),
                gold_number=None if g is None else g + 1,
                gold=None if g is None else segments(gold_lines[g]),
            ))


# Pairing the lines of a changed block compares each line with each: past this many comparisons
# the lines are paired in order.
PAIRING_WORK = 2_500
# How alike two lines must be (difflib's ratio) to be shown as one line changed.
PAIRING_CUTOFF = 0.6


def _pairs(agent: list[str], a_start: int, a_end: int, gold: list[str], g_start: int, g_end: int) -> list[tuple]:
    """The rows of a changed block: (agent line, gold line) indices, None where a side has none.
    The most similar two lines are put on one row and the parts before and after paired the same
    way (as difflib.Differ pairs lines), so a changed line is not shown beside an unrelated one."""
    a_count, g_count = a_end - a_start, g_end - g_start
    if a_count and g_count and a_count * g_count <= PAIRING_WORK:
        best, best_ratio = None, PAIRING_CUTOFF
        matcher = difflib.SequenceMatcher(autojunk=False)
        for g in range(g_start, g_end):
            matcher.set_seq2(gold[g])
            for a in range(a_start, a_end):
                matcher.set_seq1(agent[a])
                if matcher.real_quick_ratio() > best_ratio and matcher.quick_ratio() > best_ratio and matcher.ratio() > best_ratio:
                    best, best_ratio = (a, g), matcher.ratio()
        if best is not None:
            a, g = best
            return [*_pairs(agent, a_start, a, gold, g_start, g), best, *_pairs(agent, a + 1, a_end, gold, g + 1, g_end)]
    return [
        (a_start + i if i < a_count else None, g_start + i if i < g_count else None)
        for i in range(max(a_count, g_count))
    ]
