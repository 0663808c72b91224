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

Pure Python: no Django here.
"""
from __future__ import annotations

import ast
import builtins
import difflib
import re
import symtable
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from runs.benchmark.locating import MaskingError, accessor_kind, functions_by_name, locate_function, parsed
from runs.benchmark.masking import function_body_source, replace_function_body
from runs.benchmark.patches import unified_diff
from runs.benchmark.source_lines import NEWLINE, SourceLines

__all__ = ["MAX_FILE_CHARS", "MAX_BLOCK_STATEMENTS", "MAX_REASONS", "OutOfScopeEdit", "ScopedCode", "restrict_to_scope"]

# Bounds on the work for one file: beyond them the file keeps its masked text.
MAX_FILE_CHARS = 2_000_000
MAX_BLOCK_STATEMENTS = 5_000
MAX_REASONS = 30
# difflib takes time about (lines x changed lines): past this a diff replaces the whole file.
MAX_DIFF_WORK = 2_000_000
MAX_DIFF_CHARS = 500_000

_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=]", re.ASCII)  # as tokenize.cookie_re, on the first two lines
_FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
_BUILTINS = frozenset(dir(builtins))
_KEEP_MASKED = "its masked functions keep their stubs"
# Applying a decorator calls it: only these builtins, which run nothing of the agent's.
_DECORATORS = ("staticmethod", "classmethod", "property")
# Dunder methods a new class may define: Python calls none of them while it makes classes, so none
# runs at import (unlike `__init_subclass__`, `__set_name__`, `__class_getitem__`, `__new__`...).
_DUNDER_METHODS = frozenset(
    "__init__ __call__ __repr__ __str__ __len__ __iter__ __next__ __getitem__ __setitem__ __delitem__ "
    "__contains__ __enter__ __exit__ __eq__ __ne__ __lt__ __le__ __gt__ __ge__ __hash__ __bool__".split()
)
# Standard modules whose import does something (prints, opens a browser, starts a program).
_ACTING_MODULES = frozenset({"this", "antigravity", "__hello__", "__phello__", "idlelib", "turtledemo", "__main__"})
# Creating a subclass of these calls its own methods (each member's `__init__`, `__new__`).
_CALLING_BASE_MODULES = frozenset({"enum"})
_ENUM_CLASSES = frozenset({"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "ReprEnum"})  # what `import *` gives
_NUMBER_TYPES = (int, float, complex)


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
    old, new = _diff_lines(agent or ""), _diff_lines(runs or "")
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


def _diff_lines(text: str) -> list[str]:
    """Lines as diff(1) reads them: ending at "\\n" only (a "\\r" or "\\x0c" is content)."""
    lines = text.split("\n")
    last = lines.pop()
    return [line + "\n" for line in lines] + ([last] if last else [])


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
        return _Merge(path, masked_text, names, patched_text, patched_tree, own_modules).run()
    except Exception as error:  # noqa: BLE001 - nothing the agent wrote may break re-execution
        return masked_text, [_merge_failure(error)]


def _merge_failure(error: Exception) -> str:
    problem = "it is nested too deeply" if isinstance(error, RecursionError) else f"{type(error).__name__}: {error}"
    return f"the file could not be merged ({problem}); {_KEEP_MASKED}"


# --- small helpers on source and trees -----------------------------------------------------------


def _first_line(node: ast.stmt) -> int:
    return min([d.lineno for d in getattr(node, "decorator_list", ())] + [node.lineno])


def _start(lines: SourceLines, node: ast.stmt) -> int:
    if getattr(node, "decorator_list", None):
        line = _first_line(node)
        return lines.starts[line - 1] + len(lines.indent(line))
    return lines.start_of(node)


def _segment(lines: SourceLines, node: ast.stmt) -> str:
    return lines.text[_start(lines, node) : lines.end_of(node)]


def _snippet(lines: SourceLines, node: ast.stmt) -> str:
    first = _segment(lines, node).split("\n")[0].split("\r")[0].strip()
    return first if len(first) <= 60 else first[:57] + "..."


def _fingerprint(lines: SourceLines | None, node: ast.AST | list | None) -> str:
    """What a node means, without positions.

    A statement too deep for `ast.dump` is compared by its text; any other part that deep never
    compares equal (so it counts as changed).
    """
    if node is None:
        return "None"
    try:
        return ast.dump(node) if not isinstance(node, list) else repr([ast.dump(n) for n in node])
    except RecursionError:
        if isinstance(node, ast.stmt) and lines is not None:
            return "source:" + _segment(lines, node)
        return f"undumpable:{id(node)}"


def _qualified(scope: tuple[str, ...], node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef) -> str:
    """A definition's qualified name as `runs.benchmark.masking` names it (a property's setter: `C.x.setter`)."""
    name = ".".join((*scope, node.name))
    accessor = accessor_kind(node) if isinstance(node, _FUNCTIONS) else None
    return f"{name}.{accessor}" if accessor else name


def _key(lines: SourceLines, node: ast.stmt) -> tuple[str, str]:
    """How statements of the two files are paired: definitions by name, the rest by meaning."""
    if isinstance(node, _FUNCTIONS):
        return ("def", _qualified((), node))
    if isinstance(node, ast.ClassDef):
        return ("class", node.name)
    return ("stmt", _fingerprint(lines, node))


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_future(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and node.module == "__future__" and not node.level


def _symbols(table: symtable.SymbolTable) -> Iterator[tuple[symtable.SymbolTable, tuple[str, ...], symtable.Symbol]]:
    """(table, path of scope names below the module, symbol) for every symbol of every scope."""
    stack: list[tuple[symtable.SymbolTable, tuple[str, ...]]] = [(table, ())]
    while stack:
        current, path = stack.pop()
        for symbol in current.get_symbols():
            yield current, path, symbol
        for child in current.get_children():
            stack.append((child, (*path, child.get_name())))


def _binds(symbol: symtable.Symbol) -> bool:
    return symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace()


def _bindings(source: str, class_indent: str | None) -> tuple[set[str], set[str]]:
    """Names a new statement binds in the module and, for a class member, in its class.

    The statement is analysed alone (inside a stand-in class for a member), so walrus targets and
    names a nested function declares `global` count too.
    """
    if class_indent is not None:
        source = "class _Scope_:\n" + class_indent + source
    table = symtable.symtable(source, "<new>", "exec")
    module, member = set(), set()
    for _, path, symbol in _symbols(table):
        if symbol.is_declared_global() and _binds(symbol) or not path and _binds(symbol):
            module.add(symbol.get_name())
        elif path == ("_Scope_",) and class_indent is not None and _binds(symbol):
            member.add(symbol.get_name())
    if class_indent is not None:
        module.discard("_Scope_")
    return module, member


def _encoding_lines(text: str) -> list[str]:
    return [line for line in NEWLINE.split(text, 2)[:2] if _CODING.match(line)]


def _unrunnable_reason(text: str, path: str, masked_text: str) -> str | None:
    """Why a merged text cannot be run as it is, or None.

    Python reads a source encoding from a comment on either of the first two lines (even one inside
    a string): a new one would make Python read other code than the code checked here.
    """
    if _encoding_lines(text) != _encoding_lines(masked_text):
        return "the file would declare a source encoding in its first two lines"
    try:
        text.encode("utf-8")
        compile(text, path, "exec", dont_inherit=True)
    except UnicodeEncodeError:
        return "the file cannot be written as UTF-8"
    except (SyntaxError, ValueError, RecursionError, MemoryError) as error:
        return f"the file does not compile ({getattr(error, 'msg', None) or type(error).__name__})"
    return None


def _is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def _relative_key(node: ast.ImportFrom, alias: ast.alias) -> tuple:
    """What a relative import imports: its module, or for `from . import x` the module `x`."""
    return (node.level, node.module) if node.module else (node.level, None, alias.name)


def _root(node: ast.expr) -> str | None:
    """The name a name or dotted name (`a.b.c`) starts with; None for anything else."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def _is_number(node: ast.expr) -> bool:
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        node = node.operand
    return isinstance(node, ast.Constant) and isinstance(node.value, _NUMBER_TYPES)


def _inert(node: ast.expr, *, names: bool, lambdas: bool = True) -> ast.expr | None:
    """The first part of an expression outside the whitelist of what runs no code, or None.

    Literals always; with `names` also names, dotted names, subscripts and `X | Y` of whitelisted
    parts (what defaults and annotations need); with `lambdas` a lambda whose defaults qualify (its
    body runs only when called). Evaluating any of these calls no code of the agent's.
    """
    stack = [(node, names)]
    while stack:
        node, names = stack.pop()
        if isinstance(node, ast.Constant) or _is_number(node):
            continue
        if (
            isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Sub)) and _is_number(node.left)
            and isinstance(node.right, ast.Constant) and isinstance(node.right.value, complex)
        ):
            continue  # a complex literal, 1+2j
        if isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            stack.extend((element, names) for element in node.elts)
        elif isinstance(node, ast.Dict) and None not in node.keys:  # a None key is a ** unpacking
            stack.extend((part, names) for part in [*node.keys, *node.values] if part is not None)
        elif isinstance(node, ast.Lambda) and lambdas:
            stack.extend((value, True) for value in [*node.args.defaults, *node.args.kw_defaults] if value is not None)
        elif names and isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load):
            continue
        elif names and isinstance(node, ast.Attribute):
            stack.append((node.value, names))
        elif names and isinstance(node, ast.Subscript):
            stack.extend([(node.value, names), (node.slice, names)])
        elif names and isinstance(node, ast.Slice):
            stack.extend((part, names) for part in (node.lower, node.upper, node.step) if part is not None)
        elif names and isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
            stack.extend([(node.left, names), (node.right, names)])
        else:
            return node
    return None


_KINDS = {
    ast.Call: "a call", ast.Name: "a name", ast.Attribute: "an attribute", ast.Subscript: "a subscript",
    ast.ListComp: "a comprehension", ast.SetComp: "a comprehension", ast.DictComp: "a comprehension",
    ast.GeneratorExp: "a generator", ast.JoinedStr: "an f-string", ast.NamedExpr: "an assignment expression",
    ast.Await: "an await", ast.Yield: "a yield", ast.YieldFrom: "a yield", ast.Starred: "an unpacking",
    ast.Dict: "an unpacking", ast.Lambda: "a lambda", ast.IfExp: "a conditional",
}


def _kind(node: ast.expr) -> str:
    return _KINDS.get(type(node), "an operation")


# --- merging one file ------------------------------------------------------------------------------


@dataclass
class _Insertion:
    offset: int
    order: tuple
    text: str


class _Merge:
    """Merges the agent's version of one file with masked functions into its masked text."""

    def __init__(
        self, path: str, masked_text: str, names: list[str], patched_text: str, patched_tree: ast.Module,
        own_modules: frozenset[str] = frozenset(),
    ) -> None:
        if len(patched_tree.body) > MAX_BLOCK_STATEMENTS:
            raise ValueError(f"more than {MAX_BLOCK_STATEMENTS} top-level statements")
        self.path = path
        self.masked_text = masked_text
        self.names = names
        self.p_lines = SourceLines(patched_text)
        self.p_tree = patched_tree
        self.own_modules = own_modules
        self.reasons: list[str] = []
        self.insertions: list[_Insertion] = []

    # The masked file is the benchmark's own code: analysing it may be thorough.
    def _analyse_masked(self) -> None:
        tree = parsed(self.masked_text)
        table = symtable.symtable(self.masked_text, self.path, "exec")
        self.top_bound, self.top_read = set(), set()
        self.class_bound: dict[tuple[str, ...], set[str]] = {}
        self.class_read: dict[tuple[str, ...], set[str]] = {}
        for current, path, symbol in _symbols(table):
            name = symbol.get_name()
            if not path:
                if _binds(symbol):
                    self.top_bound.add(name)
                if symbol.is_referenced():
                    self.top_read.add(name)
                continue
            if symbol.is_declared_global() and _binds(symbol):
                self.top_bound.add(name)
            if current.get_type() == "class":
                if _binds(symbol):
                    self.class_bound.setdefault(path, set()).add(name)
                if symbol.is_referenced():
                    self.class_read.setdefault(path, set()).add(name)
                    self.top_read.add(name)  # an unbound name in a class body is looked up globally
            elif symbol.is_global() and symbol.is_referenced():
                self.top_read.add(name)
        self.attributes = {node.attr for node in ast.walk(tree) if isinstance(node, ast.Attribute)}
        self.imported_modules = {
            alias.name.split(".")[0]
            for node in tree.body
            if isinstance(node, ast.Import)
            for alias in node.names
            if alias.asname is None
        }
        self.masked_tree = tree
        # What the masked file imports itself: the agent may import the same workspace modules.
        imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
        self.masked_imports = {
            alias.name.split(".")[0] for node in imports if isinstance(node, ast.Import) for alias in node.names
        } | {node.module.split(".")[0] for node in imports if isinstance(node, ast.ImportFrom) and node.module and not node.level}
        self.masked_relative = {_relative_key(node, alias) for node in imports if isinstance(node, ast.ImportFrom) and node.level
                                for alias in node.names}

    def _analyse_patched(self) -> None:
        """Names the agent's file could have rebound that the import-time rule relies on."""
        try:
            table = symtable.symtable(self.p_lines.text, self.path, "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            rebound = set(_DECORATORS)  # a file that does not compile: no decorator is trusted
        else:
            rebound = {
                symbol.get_name()
                for current, path, symbol in _symbols(table)
                if _binds(symbol) and (not path or current.get_type() == "class" or symbol.is_declared_global())
            }
        self.rebound = rebound | self.top_bound | {name for names in self.class_bound.values() for name in names}
        # Local names for the enum module or its classes, in either file; and the masked file's
        # classes built on them (a member-less enum can be subclassed).
        self.calling_bases = set()
        for tree in (self.masked_tree, self.p_tree):
            for node in tree.body:
                if isinstance(node, ast.Import):
                    self.calling_bases |= {
                        (alias.asname or alias.name).split(".")[0]
                        for alias in node.names
                        if alias.name.split(".")[0] in _CALLING_BASE_MODULES
                    }
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    if node.module.split(".")[0] in _CALLING_BASE_MODULES:
                        self.calling_bases |= {alias.asname or alias.name for alias in node.names} | _ENUM_CLASSES
        classes = [node for node in self.masked_tree.body if isinstance(node, ast.ClassDef)]
        while True:  # a class on a class on an enum...
            derived = {c.name for c in classes if any(_root(base) in self.calling_bases for base in c.bases)}
            if derived <= self.calling_bases:
                break
            self.calling_bases |= derived
        # Classes whose creation runs nothing of their attributes: bases only `object`, builtin
        # classes and such classes of the masked file. Any other base may bring a metaclass that acts
        # on them, reachable under any name (an enum as `re.enum.Enum` makes each attribute a member
        # and calls the class's own methods), so a class on one gets no new attributes.
        self.plain_classes: set[str] = set()
        while True:
            plain = {c.name for c in classes if all(self._plain_base(base) for base in c.bases)} - self.calling_bases
            if plain <= self.plain_classes:
                break
            self.plain_classes |= plain

    def _class_at(self, scope: tuple[str, ...]) -> ast.ClassDef:
        """The masked file's class at this path of class names (one that holds a masked method)."""
        found = next(node for node in self.masked_tree.body if isinstance(node, ast.ClassDef) and node.name == scope[0])
        for name in scope[1:]:
            found = next(node for node in found.body if isinstance(node, ast.ClassDef) and node.name == name)
        return found

    def _plain_base(self, base: ast.expr) -> bool:
        if not isinstance(base, ast.Name) or base.id in self.rebound - self.plain_classes:
            return False
        return base.id in self.plain_classes or isinstance(getattr(builtins, base.id, None), type)

    def run(self) -> tuple[str, list[str]]:
        self._analyse_masked()
        self._analyse_patched()
        m_functions = functions_by_name(self.masked_tree)
        p_functions = functions_by_name(self.p_tree)

        # Canonical names of the masked functions and their places in the masked file.
        self.targets: dict[str, tuple[tuple[str, ...], ast.FunctionDef | ast.AsyncFunctionDef]] = {}
        for name in self.names:
            try:
                canonical = locate_function(self.masked_text, name).qualified_name
            except MaskingError as error:
                self.reasons.append(f"masked function `{name}` was not found in the masked file ({error})")
                continue
            entries = m_functions.get(canonical, [])
            if len(entries) != 1:
                self.reasons.append(f"masked function `{canonical}` is defined more than once in the masked file; its stub stays")
                continue
            self.targets[canonical] = entries[0]

        # Bodies from the bottom up, so the line numbers of those still to do stay valid.
        text = self.masked_text
        for canonical, (_, m_node) in sorted(self.targets.items(), key=lambda item: -item[1][1].lineno):
            candidates = p_functions.get(canonical, [])
            if not candidates:
                self.reasons.append(f"the masked function `{canonical}` is missing from the agent's file; its stub stays")
                continue
            if len(candidates) > 1:
                self.reasons.append(
                    f"`{canonical}` is defined {len(candidates)} times in the agent's file; the last one's body is used"
                )
            p_node = candidates[-1][1]
            self._compare_signature(canonical, m_node, p_node)
            try:
                body = function_body_source(self.p_lines.text, canonical, line_hint=p_node.lineno)
                text = replace_function_body(text, canonical, body, line_hint=m_node.lineno)
            except MaskingError as error:
                self.reasons.append(f"the body of `{canonical}` could not be used ({error}); its stub stays")

        with_bodies = text
        self.m_lines = SourceLines(with_bodies)
        tree = parsed(with_bodies)
        self._compare_block(tree.body, self.p_tree.body, scope=(), class_nodes=None)

        merged = with_bodies
        # From the end backwards, so offsets stay valid and several at one offset end up in order.
        for insertion in sorted(self.insertions, key=lambda item: (item.offset, item.order), reverse=True):
            merged = merged[: insertion.offset] + insertion.text + merged[insertion.offset :]
        versions = [(merged, "the additions")] if self.insertions else []
        for version, problem in [*versions, (with_bodies, "the new bodies")]:
            trouble = _unrunnable_reason(version, self.path, self.masked_text)
            if trouble:
                self.reasons.append(f"with {problem} {trouble}; they are left out")
                continue
            return version, self.reasons
        return self.masked_text, self.reasons

    def _compare_signature(self, canonical: str, m_node: ast.AST, p_node: ast.AST) -> None:
        def same(part: str) -> bool:
            return _fingerprint(None, getattr(m_node, part)) == _fingerprint(None, getattr(p_node, part))

        if not same("decorator_list"):
            self.reasons.append(f"changes the decorators of `{canonical}`; the original ones are kept")
        signature = [type(m_node) is type(p_node), same("args"), same("returns")]
        if not all(signature):
            self.reasons.append(f"changes the signature of `{canonical}`; the original one is kept")

    def _holds_masked(self, path: tuple[str, ...], *, directly: bool) -> bool:
        scopes = [scope for scope, _ in self.targets.values()]
        return any(scope == path if directly else scope[: len(path)] == path for scope in scopes)

    # --- one block of statements: the module, or the body of a class with masked methods -----------

    def _compare_block(
        self, m_body: list[ast.stmt], p_body: list[ast.stmt], *, scope: tuple[str, ...],
        class_nodes: tuple[ast.ClassDef, ast.ClassDef] | None,
    ) -> None:
        where = f"in class `{'.'.join(scope)}`" if scope else "at module level"
        if len(p_body) > MAX_BLOCK_STATEMENTS:
            raise ValueError(f"more than {MAX_BLOCK_STATEMENTS} statements in {where}")
        m_keys = [_key(self.m_lines, node) for node in m_body]
        p_keys = [_key(self.p_lines, node) for node in p_body]
        matcher = difflib.SequenceMatcher(None, m_keys, p_keys, autojunk=False)
        anchors: dict[int, int | None] = {}  # index in p_body -> index in m_body it follows (None: none)
        unmatched: dict[tuple, list[int]] = {}  # key -> indices in m_body the agent's file lacks there
        last_matched = None
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "equal":
                for i, j in zip(range(i1, i2), range(j1, j2)):
                    self._pair(m_body[i], p_body[j], scope)
                last_matched = i2 - 1
                continue
            for i in range(i1, i2):
                unmatched.setdefault(m_keys[i], []).append(i)
            for j in range(j1, j2):
                anchors[j] = last_matched
        # A statement the agent moved is the one the masked file has elsewhere: the original place
        # is kept, and only what changed in it counts.
        for j in list(anchors):
            if unmatched.get(p_keys[j]):
                i = unmatched[p_keys[j]].pop(0)
                del anchors[j]
                if p_keys[j][0] == "stmt" and not isinstance(m_body[i], (ast.Import, ast.ImportFrom)):
                    self.reasons.append(f"moves `{_snippet(self.m_lines, m_body[i])}` {where}; the original order is kept")
                else:
                    self._pair(m_body[i], p_body[j], scope)
        for i in sorted(i for indices in unmatched.values() for i in indices):
            self._removed(m_body[i], scope, where)

        allowed = class_nodes is None or self._holds_masked(scope, directly=True)
        indent = ""
        if class_nodes is not None and allowed:
            m_class, p_class = class_nodes
            indent = self.m_lines.indent(_first_line(m_class.body[0]))
            if self.p_lines.indent(_first_line(p_class.body[0])) != indent and anchors:
                self.reasons.append(f"the indentation changed {where}, so new members there are left out")
                allowed = False
        for j, anchor in anchors.items():
            node = p_body[j]
            if isinstance(node, _FUNCTIONS) and _qualified(scope, node) in self.targets:
                continue  # a masked function defined again: the last definition's body was taken
            if not allowed:
                self.reasons.append(f"adds or changes `{_snippet(self.p_lines, node)}` (line {node.lineno}) {where}")
                continue
            self._added(node, anchor, m_body, scope, indent, where, previous=p_body[j - 1] if j else None)

    def _pair(self, m_node: ast.stmt, p_node: ast.stmt, scope: tuple[str, ...]) -> None:
        """Two statements with the same key; other statements' keys are their meaning, so equal."""
        if isinstance(m_node, _FUNCTIONS):
            name = _qualified(scope, m_node)
            if name in self.targets:
                return  # its decorators and signature were compared when its body was taken
            if _fingerprint(self.m_lines, m_node) != _fingerprint(self.p_lines, p_node):
                inside = self._holds_masked((*scope, m_node.name), directly=False)
                self.reasons.append(
                    f"changes `{name}` outside its masked functions" if inside else f"changes `{name}`, which is not masked"
                )
        elif isinstance(m_node, ast.ClassDef) and isinstance(p_node, ast.ClassDef):  # equal keys: both are
            path = (*scope, m_node.name)
            name = ".".join(path)
            if not self._holds_masked(path, directly=False):
                if _fingerprint(self.m_lines, m_node) != _fingerprint(self.p_lines, p_node):
                    self.reasons.append(f"changes class `{name}`, which has no masked methods")
                return
            header = ("decorator_list", "bases", "keywords")
            if any(
                _fingerprint(self.m_lines, getattr(m_node, part)) != _fingerprint(self.p_lines, getattr(p_node, part))
                for part in header
            ):
                self.reasons.append(f"changes the decorators or bases of class `{name}`; the original ones are kept")
            self._compare_block(m_node.body, p_node.body, scope=path, class_nodes=(m_node, p_node))

    def _removed(self, node: ast.stmt, scope: tuple[str, ...], where: str) -> None:
        if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
            name = _qualified(scope, node)
            if name not in self.targets:
                self.reasons.append(f"removes `{name}`; the original is kept")
        else:
            self.reasons.append(f"removes or changes `{_snippet(self.m_lines, node)}` {where}; the original is kept")

    def _added(
        self, node: ast.stmt, anchor: int | None, m_body: list[ast.stmt], scope: tuple[str, ...], indent: str, where: str,
        previous: ast.stmt | None,
    ) -> None:
        """Keep a statement that is only in the agent's file if it is a new import or definition."""
        in_class = bool(scope)
        line = f"line {node.lineno}"
        snippet = _snippet(self.p_lines, node)
        source = _segment(self.p_lines, node)
        if isinstance(node, (ast.Import, ast.ImportFrom)) and not in_class:
            if isinstance(node, ast.ImportFrom) and any(alias.name == "*" for alias in node.names):
                self.reasons.append(f"`{snippet}` ({line}) could re-bind any name of the file; it is left out")
                return
            if any(_fingerprint(None, node) == _fingerprint(None, m) for m in m_body):
                return  # an import the file already has, moved: nothing new
            # After the file's imports, or where the agent put it if that is earlier.
            imports = [i for i, m in enumerate(m_body) if isinstance(m, (ast.Import, ast.ImportFrom))]
            latest = imports[-1] if imports and not _is_future(node) else self._start_anchor(m_body)
            if anchor is not None and (latest is None or anchor > latest):
                anchor, previous = latest, None
        elif not (isinstance(node, _DEFINITIONS) and self._plain_targets(node)):
            self.reasons.append(f"adds or changes `{snippet}` ({line}) {where}; only new definitions are kept")
            return

        try:
            module_names, member_names = _bindings(source, indent if in_class else None)
        except (SyntaxError, ValueError, RecursionError):
            self.reasons.append(f"`{snippet}` ({line}) {where} could not be analysed; it is left out")
            return
        problem = self._conflict(node, module_names, member_names, scope)
        if problem:
            self.reasons.append(f"`{snippet}` ({line}) {problem}; it is left out")
            return
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            problem = self._import_problem(node)
            if problem:
                self.reasons.append(f"`{snippet}` ({line}) {problem}; it is left out")
                return
        else:
            problem = self._runs_at_import(node, in_class=in_class) or (
                self._attributes_on_foreign_base([node], self._class_at(scope).bases, f"class `{'.'.join(scope)}`")
                if in_class else None
            )
            if problem:
                self.reasons.append(f"`{snippet}` ({line}) would run code at import: {problem}; it is left out")
                return
        self._insert(node, anchor, m_body, indent, source, in_class=in_class, previous=previous)

    def _plain_targets(self, node: ast.stmt) -> bool:
        def plain(target: ast.expr) -> bool:
            if isinstance(target, ast.Name):
                return True
            if isinstance(target, ast.Starred):
                return plain(target.value)
            return isinstance(target, (ast.Tuple, ast.List)) and all(plain(t) for t in target.elts)

        if isinstance(node, ast.Assign):
            return all(plain(t) for t in node.targets)
        if isinstance(node, ast.AnnAssign):
            return isinstance(node.target, ast.Name)
        return True

    def _conflict(self, node: ast.stmt, module_names: set[str], member_names: set[str], scope: tuple[str, ...]) -> str | None:
        """Why a new statement may not bind these names, or None."""
        for name in sorted(module_names):
            if _is_dunder(name):
                return f"binds the special name `{name}`"
            if name in self.top_bound:
                if (
                    isinstance(node, ast.Import)
                    and name in self.imported_modules
                    and any(alias.asname is None and alias.name.split(".")[0] == name for alias in node.names)
                ):
                    continue  # `import a.b` next to `import a`: the same module object
                what = "masked" if name in {n for n in self.targets if "." not in n} else "not masked"
                return f"re-binds `{name}`, which the file already defines ({what})"
            if name in self.top_read:
                return f"binds `{name}`, which the file's own code already uses"
            if name in _BUILTINS:
                return f"binds `{name}`, which would shadow the builtin"
        if not scope:
            return None
        bound = self.class_bound.get(scope, set())
        read = self.class_read.get(scope, set())
        for name in sorted(member_names):
            if _is_dunder(name):
                return f"defines the special member `{name}`"
            if name in bound:
                return f"redefines `{'.'.join((*scope, name))}`, which the class already defines"
            if name in read or name in self.attributes:
                return f"defines `{name}`, which the file's own code already uses as a name or attribute"
        return None

    # --- what runs at import -------------------------------------------------------------------------

    def _import_problem(self, node: ast.Import | ast.ImportFrom) -> str | None:
        """Why importing this would run more than the libraries the task allows, or None."""
        if isinstance(node, ast.ImportFrom) and node.level:
            if all(_relative_key(node, alias) in self.masked_relative for alias in node.names):
                return None
            return "is a relative import (of the workspace's own code) that the file does not have"
        if isinstance(node, ast.Import):
            modules = [alias.name for alias in node.names]
        else:
            modules = [node.module or ""] + [f"{node.module}.{alias.name}" for alias in node.names]
        for module in modules:
            parts = module.split(".")
            if parts[0] in _ACTING_MODULES or "__main__" in parts:
                return f"imports `{module}`, which acts when imported"
            if parts[0] in self.own_modules and parts[0] not in self.masked_imports:
                return f"imports `{parts[0]}`, the workspace's own code, which the file does not import (importing it runs it)"
        return None

    def _runs_at_import(self, node: ast.stmt, *, in_class: bool) -> str | None:
        """What of a new definition Python would run when it executes it (at import), or None.

        Walks the definition with a stack (not recursion: the agent chooses the depth); function
        bodies are not entered, as they run only when called.
        """
        stack: list[tuple[ast.stmt, bool]] = [(node, in_class)]
        while stack:
            node, in_class = stack.pop()
            line = f"line {node.lineno}"
            if isinstance(node, (*_FUNCTIONS, ast.ClassDef)):
                if getattr(node, "type_params", None):
                    return f"the type parameters of `{node.name}` ({line})"
                if len(node.decorator_list) > 1:
                    # `@classmethod` over `@property` runs the body when the class attribute is read.
                    return f"`{node.name}` ({line}) stacks decorators; one of {', '.join('@' + name for name in _DECORATORS)} is kept"
                for decorator in node.decorator_list:
                    if not (isinstance(decorator, ast.Name) and decorator.id in _DECORATORS and decorator.id not in self.rebound):
                        return (
                            f"the decorator `@{self._text(decorator)}` (line {decorator.lineno}) is called; "
                            f"only {', '.join('@' + name for name in _DECORATORS)} are kept"
                        )
                if in_class and _is_dunder(node.name) and not (isinstance(node, _FUNCTIONS) and node.name in _DUNDER_METHODS):
                    return f"`{node.name}` ({line}) is a special member Python may call while it makes classes"
            if isinstance(node, _FUNCTIONS):
                arguments = node.args
                every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
                checks = [("a default value", value) for value in [*arguments.defaults, *arguments.kw_defaults] if value]
                checks += [("an annotation", a.annotation) for a in every if a is not None and a.annotation is not None]
                checks += [("the return annotation", node.returns)] if node.returns else []
                for what, value in checks:
                    problem = self._evaluated(value, what, names=True)
                    if problem:
                        return problem
            elif isinstance(node, ast.ClassDef):
                for base in node.bases:
                    if _root(base) is None:
                        return f"the base `{self._text(base)}` (line {base.lineno}) is not a name or dotted name"
                    if _root(base) in self.calling_bases:
                        return f"the base `{self._text(base)}` (line {base.lineno}) is an enum, whose creation calls the class's own methods"
                for keyword in node.keywords:
                    return f"the class keyword `{keyword.arg or '**'}=` (line {keyword.lineno})"
                problem = self._attributes_on_foreign_base(node.body, node.bases, f"class `{node.name}`")
                if problem:
                    return problem
                stack.extend((member, True) for member in reversed(node.body))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                if not self._plain_targets(node):
                    return f"`{self._text(node)}` ({line}) assigns to more than names"
                if isinstance(node, ast.AnnAssign):
                    problem = self._evaluated(node.annotation, "an annotation", names=True)
                    if problem:
                        return problem
                if node.value is not None:
                    # Not a lambda in a class body: it could stand in for a hook such as `__init_subclass__`.
                    problem = self._evaluated(node.value, "the value", names=False, lambdas=not in_class)
                    if problem:
                        return problem + ("; only literals are kept" if in_class else "; only literals (and lambdas) are kept")
            elif in_class and (isinstance(node, ast.Pass) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))):
                continue
            else:
                return f"its class body has `{self._text(node)}` ({line}); only definitions and literal assignments are kept"
        return None

    def _attributes_on_foreign_base(self, members: list[ast.stmt], bases: list[ast.expr], what: str) -> str | None:
        """Why attributes among `members` may not be kept in a class on `bases` (see `plain_classes`)."""
        foreign = next((base for base in bases if not self._plain_base(base)), None)
        attribute = next((m for m in members if isinstance(m, (ast.Assign, ast.AnnAssign))), None)
        if foreign is None or attribute is None:
            return None
        return (f"{what} has the attribute `{self._text(attribute)}` (line {attribute.lineno}) on the base "
                f"`{self._text(foreign)}`, whose metaclass may act on it (an enum makes it a member and calls the "
                f"class's methods); such a class gets methods only")

    def _evaluated(self, value: ast.expr, what: str, *, names: bool, lambdas: bool = True) -> str | None:
        part = _inert(value, names=names, lambdas=lambdas)
        if part is None:
            return None
        return f"{what} holds {_kind(part)} `{self._text(part)}` (line {part.lineno})"

    def _text(self, node: ast.expr | ast.stmt) -> str:
        """The first line of a node's source in the agent's file, shortened."""
        try:
            start, end = self.p_lines.start_of(node), self.p_lines.end_of(node)
        except (AttributeError, IndexError, ValueError):
            return type(node).__name__
        first = self.p_lines.text[start:end].split("\n")[0].split("\r")[0].strip()
        return first if len(first) <= 40 else first[:37] + "..."

    # --- placing what is kept ------------------------------------------------------------------------

    def _start_anchor(self, m_body: list) -> int | None:
        """The last leading docstring or `from __future__` import, after which new code may start."""
        anchor = None
        for index, node in enumerate(m_body):
            if (index == 0 and _is_docstring(node)) or _is_future(node):
                anchor = index
            else:
                break
        return anchor

    def _insert(
        self, node: ast.stmt, anchor: int | None, m_body: list[ast.stmt], indent: str, source: str, *, in_class: bool,
        previous: ast.stmt | None,
    ) -> None:
        """Queue `source` for insertion after `m_body[anchor]` (None: where new code may start).

        The blank and comment lines that precede it in the agent's file come with it, so that an
        addition looks in the merged file as it did in the agent's.
        """
        start = self._start_anchor(m_body)
        if anchor is None or (start is not None and anchor < start):
            anchor, previous = start, None  # never before the docstring or a `from __future__` import
        newline = self.m_lines.newline(1)
        source = indent + NEWLINE.sub(newline, source)
        is_import = isinstance(node, (ast.Import, ast.ImportFrom))
        is_definition = isinstance(node, (*_FUNCTIONS, ast.ClassDef))
        blank = 1 if in_class else 2
        order = (anchor if anchor is not None else -1, not is_import, node.lineno, node.col_offset)
        if anchor is None:
            first = m_body[0]
            offset = self.m_lines.starts[_first_line(first) - 1]
            after = 0 if is_import and isinstance(first, (ast.Import, ast.ImportFrom)) else blank
            text = source + newline * (1 + after)
        else:
            last = m_body[anchor]
            offset = self.m_lines.ends[(last.end_lineno or last.lineno) - 1]
            leading = self._leading(node, previous)
            if leading is None:
                leading = newline * (blank if is_definition else 0 if is_import or in_class else 1)
            text = newline + leading + source
        self.insertions.append(_Insertion(offset=offset, order=order, text=text))

    def _leading(self, node: ast.stmt, previous: ast.stmt | None) -> str | None:
        """The blank and comment lines between `previous` and `node` in the agent's file, if that is all."""
        if previous is None:
            return None
        rows = range((previous.end_lineno or previous.lineno) + 1, _first_line(node))
        contents = [self.p_lines.content(row) for row in rows]
        if any(content.strip() and not content.strip().startswith("#") for content in contents):
            return None
        newline = self.m_lines.newline(1)
        return "".join(content.rstrip(" \t\f") + newline for content in contents)
