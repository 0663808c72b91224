"""What re-execution runs of an agent's final code: only what the task allows it to change.

The task is to implement the masked functions. So the harness takes, from the agent's files, only
the masked functions' new bodies plus new imports and new definitions in the files that hold
them, placed into the fresh masked workspace. Everything else the agent changed (experiment
scripts, other files, data, new modules that shadow installed ones, other functions, module-level
statements) is dropped before the experiments run, and listed as an out-of-scope edit. Otherwise an
agent could pass by rewriting a script to print the expected numbers.

Functions are matched by qualified name on the AST, as `runs.benchmark.masking` masks them. In a file with
masked functions the harness starts from the masked text and

- puts in each masked function's body from the agent's file (its decorators and signature stay
  the original ones);
- keeps new top-level imports, placed after the file's last top-level import (or where the agent
  put them, if that is earlier), `from __future__` imports right after the module docstring;
- keeps new top-level functions, classes and assignments to plain names, placed after the nearest
  statement that precedes them in the agent's file and is in both files;
- keeps new methods and attributes of a class that directly holds a masked method, placed the
  same way inside the class.

A new definition or import is kept only if everything it binds (walrus targets and `global`
names included) is a name the masked file neither binds nor reads at that level, not a builtin and
not a dunder; a new class member also must not be a name the file uses as an attribute anywhere
(it could override an inherited member or an instance attribute). So the agent's additions can
only be reached from the agent's own code.

Nothing new runs when the file is imported: the agent's code runs only when the masked functions
are called (otherwise a stub plus `_x = _forge()` that prints the expected numbers and exits
would pass). What Python evaluates when it executes a definition must come from a small whitelist
(`_inert`): literals (constants, tuples, lists, sets and dicts of literals, signed numbers,
complex numbers `1+2j`) and, in default values, annotations and subscripts of them, also names,
dotted names, subscripts and `X | Y`. Each of those either evaluates nothing or reaches only
builtin behaviour, a library's or the gold code's: an agent class can define none of the hooks
(`__class_getitem__`, `__init_subclass__`, ...) that would make them call the agent's code. So a
new definition is kept only when

- it has at most one decorator, `@staticmethod`, `@classmethod` or `@property`, a name nothing
  rebinds (applying any other decorator calls it; `@classmethod` over `@property` runs the body
  whenever the class attribute is read, say in a default value);
- its default values and annotations (always checked, `from __future__ import annotations` or
  not) are whitelisted expressions;
- a class's bases are names or dotted names, none an enum (creating an enum calls the class's own
  `__init__` and `__new__`), and it has no keywords (`metaclass=`); a class with a base other
  than `object`, a builtin class or such a class of the masked file (`plain_classes`) gets methods
  only, no attributes, since that base's metaclass may act on them: an enum reached under another
  name (`re.enum.Enum`) makes each attribute a member and calls the class's `__init__`. The same
  holds for new members of a class of the masked file that holds a masked method;
- a class body holds only nested definitions (the same rule, recursively), assignments of
  literals, docstrings and `pass`; its dunder methods are ordinary instance methods (`__init__`,
  `__call__`, `__len__`, ... `_DUNDER_METHODS`), never one Python calls while classes are made;
- a new top-level assignment assigns literals, or lambdas (whose defaults obey the rule above).

Known limit: a base class from a library or the gold code whose creation calls an ordinary method
of a new class with no attributes would run it; the standard library has none.

A new import is kept unless it imports a module that acts when imported (`_ACTING_MODULES`, any
`__main__` module), one of the workspace's own modules or scripts that the masked file does not
import itself (`workspace_modules`, and the modules of the paths restrict_to_scope sees), or is a
relative import the masked file does not have: importing the workspace's scripts would run them.

Changes of layout and comments outside the masked functions are dropped silently (they do not
run); every other dropped change is listed, with reasons. Nothing the agent wrote makes this raise:
a file that does not parse, is too large or cannot be merged keeps its masked text.

This module takes the files of a patch and says what was dropped; the merge of one file is
runs.benchmark.scope_merge's, the test of what runs at import runs.benchmark.scope_import_time's.

Pure Python: no Django here.
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field

from runs.benchmark.locating import parsed
from runs.benchmark.patches import diff_lines, unified_diff
from runs.benchmark.scope_merge import FileMerge

__all__ = ["MAX_FILE_CHARS", "MAX_REASONS", "OutOfScopeEdit", "ScopedCode", "restrict_to_scope"]

# Bounds on the work for one file: beyond them the file keeps its masked text.
MAX_FILE_CHARS = 2_000_000
MAX_REASONS = 30
# difflib takes time about (lines x changed lines): past this a diff replaces the whole file.
MAX_DIFF_WORK = 2_000_000
MAX_DIFF_CHARS = 500_000

_KEEP_MASKED = "its masked functions keep their stubs"


@dataclass(frozen=True)
class OutOfScopeEdit:
    """A change of the agent's that re-execution does not run.

    `path` is workspace-relative (`code/run.py`); `reason` is short and human; `diff` is a unified
    diff from the agent's version of the file to what the harness runs.
    """

    path: str
    reason: str
    diff: str


@dataclass(frozen=True)
class ScopedCode:
    """What re-execution writes into a fresh masked workspace, and what it left out.

    `files` holds only files with masked functions whose text differs from their masked text;
    every other file of the fresh workspace stays as built (a deleted masked file included).
    """

    files: dict[str, str] = field(default_factory=dict)
    out_of_scope: list[OutOfScopeEdit] = field(default_factory=list)


def restrict_to_scope(
    *,
    masked: Mapping[str, str],
    functions: Mapping[str, Sequence[str]],
    patched: Mapping[str, str | None],
    before: Mapping[str, str | None] | None = None,
    workspace_modules: Collection[str] = (),
) -> ScopedCode:
    """The part of an agent's final code that re-execution runs.

    `masked`: path -> masked text of every file holding masked functions (as in the fresh
    workspace). `functions`: path -> names masked in it (qualified, e.g. `Loss.__call__`).
    `patched`: path -> the agent's text after the final patch (None: deleted), for every file the
    patch touched. `before`: path -> the fresh workspace's text of touched files without masked
    functions (None or absent: the file did not exist); only used to show what was dropped.
    `workspace_modules`: the names of the workspace's own top-level modules and packages (scripts
    included; a new import of one is kept only if the masked file imports it too); the modules of
    the paths in `masked` and `before` count as well.
    Files in `masked` that the patch did not touch are not in the result. Never raises for
    anything in `patched`.
    """
    before = before or {}
    own_modules = frozenset(workspace_modules) | _modules_of([*masked, *(path for path, text in before.items() if text is not None)])
    files: dict[str, str] = {}
    out_of_scope: list[OutOfScopeEdit] = []
    for path in sorted(patched):
        text = patched[path]
        names = list(functions.get(path) or ())
        if path not in masked or not names:
            original = before.get(path, masked.get(path))
            if text == original:
                continue
            if original is None:
                reason = "not a file with masked functions (a new file)"
            elif text is None:
                reason = "not a file with masked functions (deleted)"
            else:
                reason = "not a file with masked functions"
            out_of_scope.append(OutOfScopeEdit(path, reason, _diff(path, text, original)))
            continue
        merged, reasons = _scope_file(path, masked[path], names, text, own_modules)
        if merged != masked[path]:
            files[path] = merged
        if reasons:
            out_of_scope.append(OutOfScopeEdit(path, _join(reasons), _diff(path, text, merged)))
    return ScopedCode(files=files, out_of_scope=out_of_scope)


def _diff(path: str, agent: str | None, runs: str | None) -> str:
    """A unified diff from the agent's version to what runs, with bounded work and size.

    Many scattered changes make difflib quadratic; then the diff removes the whole agent's
    version and adds the whole of what runs (still a valid diff). A diff too long is cut, marked.
    """
    header = f"--- {'/dev/null' if agent is None else 'a/' + path}\n+++ {'/dev/null' if runs is None else 'b/' + path}\n"
    size = len(agent or "") + len(runs or "")
    if size > 4 * MAX_DIFF_CHARS:
        return header + f"[diff left out: the two versions have {size} characters]\n"
    old, new = diff_lines(agent or ""), diff_lines(runs or "")
    if _diff_work(old, new) <= MAX_DIFF_WORK:
        diff = unified_diff(path, agent, runs)
    else:
        def side(prefix: str, lines: list[str]) -> str:
            return "".join(
                prefix + line if line.endswith("\n") else f"{prefix}{line}\n\\ No newline at end of file\n"
                for line in lines
            )

        hunk = f"@@ -{int(bool(old))},{len(old)} +{int(bool(new))},{len(new)} @@\n"
        diff = header + hunk + side("-", old) + side("+", new)
    if len(diff) > MAX_DIFF_CHARS:
        diff = diff[:MAX_DIFF_CHARS] + f"\n[diff cut: {len(diff)} characters in all]\n"
    return diff


def _diff_work(old: list[str], new: list[str]) -> int:
    """About how long difflib takes: lines times the changes that alternate with matching lines."""
    start = 0
    while start < min(len(old), len(new)) and old[start] == new[start]:
        start += 1
    end = 0
    while end < min(len(old), len(new)) - start and old[-1 - end] == new[-1 - end]:
        end += 1
    before, after = Counter(old[start : len(old) - end]), Counter(new[start : len(new) - end])
    changed = sum(((before - after) + (after - before)).values())
    common = sum((before & after).values())
    return (sum(before.values()) + sum(after.values())) * min(changed, common)


def _join(reasons: list[str]) -> str:
    unique = list(dict.fromkeys(reasons))
    shown = "; ".join(unique[:MAX_REASONS])
    if len(unique) > MAX_REASONS:
        shown += f"; and {len(unique) - MAX_REASONS} more"
    return shown


def _modules_of(paths: Sequence[str]) -> frozenset[str]:
    """The top-level module names workspace paths (`code/pkg/mod.py`) give, with their files' own."""
    names = set()
    for path in paths:
        parts = path.split("/")[1:]  # below code/
        for part in parts[:1] + parts[-1:]:
            if part.endswith(".py"):
                part = part[: -len(".py")]
            if part.isidentifier():
                names.add(part)
    return frozenset(names)


def _scope_file(
    path: str, masked_text: str, names: list[str], patched_text: str | None, own_modules: frozenset[str] = frozenset()
) -> tuple[str, list[str]]:
    """The text to run for one file with masked functions, and why parts of the agent's were dropped."""
    if patched_text is None:
        return masked_text, [f"the file was deleted; {_KEEP_MASKED}"]
    if patched_text == masked_text:
        return masked_text, []
    if len(patched_text) > MAX_FILE_CHARS:
        return masked_text, [f"the file has more than {MAX_FILE_CHARS} characters after the patch; {_KEEP_MASKED}"]
    try:
        patched_tree = parsed(patched_text)
    except SyntaxError as error:
        return masked_text, [f"the file does not parse after the patch: {error.msg} at line {error.lineno}; {_KEEP_MASKED}"]
    except (ValueError, RecursionError, MemoryError) as error:
        problem = "it is nested too deeply" if isinstance(error, RecursionError) else str(error) or type(error).__name__
        return masked_text, [f"the file does not parse after the patch: {problem}; {_KEEP_MASKED}"]
    except Exception as error:  # noqa: BLE001 - the parse is shared with masking, which also reads the functions
        return masked_text, [_merge_failure(error)]
    try:
        return FileMerge(path, masked_text, names, patched_text, patched_tree, own_modules).run()
    except Exception as error:  # noqa: BLE001 - nothing the agent wrote may break re-execution
        return masked_text, [_merge_failure(error)]


def _merge_failure(error: Exception) -> str:
    problem = "it is nested too deeply" if isinstance(error, RecursionError) else f"{type(error).__name__}: {error}"
    return f"the file could not be merged ({problem}); {_KEEP_MASKED}"
