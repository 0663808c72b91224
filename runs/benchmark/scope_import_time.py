"""The scope rule's test of what a new definition or import runs when the merged file is imported.

Nothing new may run at import: the agent's code runs only when the masked functions are called.
A new definition is kept only when what Python evaluates while executing it comes from a small
whitelist (`_inert`), its decorators are builtins nothing rebinds, and a class's bases and members
call none of its own methods while it is made; a new import only when it imports no module that
acts when imported and none of the workspace's own code that the masked file does not import.
runs.benchmark.scope's docstring states the rule in full; runs.benchmark.scope_merge asks
`ImportTimeRule` about each new statement it would keep.

Pure Python: no Django here.
"""
from __future__ import annotations

import ast
import builtins
import symtable
from collections.abc import Iterator

from runs.benchmark.source_lines import SourceLines

FUNCTIONS = (ast.FunctionDef, ast.AsyncFunctionDef)

# Applying a decorator calls it: only these builtins, which run nothing of the agent's.
DECORATORS = ("staticmethod", "classmethod", "property")
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


def symbols(table: symtable.SymbolTable) -> Iterator[tuple[symtable.SymbolTable, tuple[str, ...], symtable.Symbol]]:
    """(table, path of scope names below the module, symbol) for every symbol of every scope."""
    stack: list[tuple[symtable.SymbolTable, tuple[str, ...]]] = [(table, ())]
    while stack:
        current, path = stack.pop()
        for symbol in current.get_symbols():
            yield current, path, symbol
        for child in current.get_children():
            stack.append((child, (*path, child.get_name())))


def binds(symbol: symtable.Symbol) -> bool:
    """Whether a symbol is bound in its scope: assigned, imported, or a definition's name."""
    return symbol.is_assigned() or symbol.is_imported() or symbol.is_namespace()


def is_dunder(name: str) -> bool:
    return name.startswith("__") and name.endswith("__")


def relative_key(node: ast.ImportFrom, alias: ast.alias) -> tuple:
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


def plain_targets(node: ast.stmt) -> bool:
    """Whether an assignment assigns to names only (in tuples, lists and starred too); True for any other statement."""
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


class ImportTimeRule:
    """What of a new statement of the agent's file would run at import, for one merge.

    Knows what the masked file imports itself (`masked_imports`, `masked_relative`), the names
    either file could have rebound (`rebound`: a decorator's name among them is not trusted), the
    local names of enums and of the masked file's classes built on them (`calling_bases`) and the
    masked file's classes whose creation runs nothing of their attributes (`plain_classes`).
    """

    def __init__(
        self, *, path: str, masked_tree: ast.Module, patched_lines: SourceLines, patched_tree: ast.Module,
        masked_bound: set[str], own_modules: frozenset[str],
    ) -> None:
        self.lines = patched_lines
        self.own_modules = own_modules
        self._note_masked_imports(masked_tree)
        self._find_rebound(path, masked_bound)
        classes = [node for node in masked_tree.body if isinstance(node, ast.ClassDef)]
        self._find_calling_bases(classes, (masked_tree, patched_tree))
        self._find_plain_classes(classes)

    def _note_masked_imports(self, tree: ast.Module) -> None:
        # What the masked file imports itself: the agent may import the same workspace modules.
        imports = [node for node in ast.walk(tree) if isinstance(node, (ast.Import, ast.ImportFrom))]
        self.masked_imports = {
            alias.name.split(".")[0] for node in imports if isinstance(node, ast.Import) for alias in node.names
        } | {node.module.split(".")[0] for node in imports if isinstance(node, ast.ImportFrom) and node.module and not node.level}
        self.masked_relative = {relative_key(node, alias) for node in imports if isinstance(node, ast.ImportFrom) and node.level
                                for alias in node.names}

    def _find_rebound(self, path: str, masked_bound: set[str]) -> None:
        """Names the agent's file could have rebound that the import-time rule relies on."""
        try:
            table = symtable.symtable(self.lines.text, path, "exec")
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            rebound = set(DECORATORS)  # a file that does not compile: no decorator is trusted
        else:
            rebound = {
                symbol.get_name()
                for current, scope, symbol in symbols(table)
                if binds(symbol) and (not scope or current.get_type() == "class" or symbol.is_declared_global())
            }
        self.rebound = rebound | masked_bound

    def _find_calling_bases(self, classes: list[ast.ClassDef], trees: tuple[ast.Module, ...]) -> None:
        # Local names for the enum module or its classes, in either file; and the masked file's
        # classes built on them (a member-less enum can be subclassed).
        self.calling_bases: set[str] = set()
        for tree in trees:
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
        while True:  # a class on a class on an enum...
            derived = {c.name for c in classes if any(_root(base) in self.calling_bases for base in c.bases)}
            if derived <= self.calling_bases:
                break
            self.calling_bases |= derived

    def _find_plain_classes(self, classes: list[ast.ClassDef]) -> None:
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

    def _plain_base(self, base: ast.expr) -> bool:
        if not isinstance(base, ast.Name) or base.id in self.rebound - self.plain_classes:
            return False
        return base.id in self.plain_classes or isinstance(getattr(builtins, base.id, None), type)

    def import_problem(self, node: ast.Import | ast.ImportFrom) -> str | None:
        """Why importing this would run more than the libraries the task allows, or None."""
        if isinstance(node, ast.ImportFrom) and node.level:
            if all(relative_key(node, alias) in self.masked_relative for alias in node.names):
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

    def runs_at_import(self, node: ast.stmt, *, in_class: bool) -> str | None:
        """What of a new definition Python would run when it executes it (at import), or None.

        Walks the definition with a stack (not recursion: the agent chooses the depth); function
        bodies are not entered, as they run only when called.
        """
        stack: list[tuple[ast.stmt, bool]] = [(node, in_class)]
        while stack:
            node, in_class = stack.pop()
            line = f"line {node.lineno}"
            problem = None
            if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
                problem = self._header_problem(node, line, in_class=in_class)
            if problem:
                return problem
            if isinstance(node, FUNCTIONS):
                problem = self._signature_problem(node)
            elif isinstance(node, ast.ClassDef):
                problem = self._class_problem(node)
                if problem is None:
                    stack.extend((member, True) for member in reversed(node.body))
            elif isinstance(node, (ast.Assign, ast.AnnAssign)):
                problem = self._assignment_problem(node, line, in_class=in_class)
            elif in_class and (isinstance(node, ast.Pass) or (isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant))):
                continue
            else:
                return f"its class body has `{self._text(node)}` ({line}); only definitions and literal assignments are kept"
            if problem:
                return problem
        return None

    def _header_problem(
        self, node: ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef, line: str, *, in_class: bool
    ) -> str | None:
        """What a definition's type parameters, decorators or special name would run."""
        if getattr(node, "type_params", None):
            return f"the type parameters of `{node.name}` ({line})"
        if len(node.decorator_list) > 1:
            # `@classmethod` over `@property` runs the body when the class attribute is read.
            return f"`{node.name}` ({line}) stacks decorators; one of {', '.join('@' + name for name in DECORATORS)} is kept"
        for decorator in node.decorator_list:
            if not (isinstance(decorator, ast.Name) and decorator.id in DECORATORS and decorator.id not in self.rebound):
                return (
                    f"the decorator `@{self._text(decorator)}` (line {decorator.lineno}) is called; "
                    f"only {', '.join('@' + name for name in DECORATORS)} are kept"
                )
        if in_class and is_dunder(node.name) and not (isinstance(node, FUNCTIONS) and node.name in _DUNDER_METHODS):
            return f"`{node.name}` ({line}) is a special member Python may call while it makes classes"
        return None

    def _signature_problem(self, node: ast.FunctionDef | ast.AsyncFunctionDef) -> str | None:
        """What a function's default values and annotations would evaluate."""
        arguments = node.args
        every = [*arguments.posonlyargs, *arguments.args, *arguments.kwonlyargs, arguments.vararg, arguments.kwarg]
        checks = [("a default value", value) for value in [*arguments.defaults, *arguments.kw_defaults] if value]
        checks += [("an annotation", a.annotation) for a in every if a is not None and a.annotation is not None]
        checks += [("the return annotation", node.returns)] if node.returns else []
        for what, value in checks:
            problem = self._evaluated(value, what, names=True)
            if problem:
                return problem
        return None

    def _class_problem(self, node: ast.ClassDef) -> str | None:
        """What a class's bases and keywords would run, or its attributes on a base that may act on them."""
        for base in node.bases:
            if _root(base) is None:
                return f"the base `{self._text(base)}` (line {base.lineno}) is not a name or dotted name"
            if _root(base) in self.calling_bases:
                return f"the base `{self._text(base)}` (line {base.lineno}) is an enum, whose creation calls the class's own methods"
        for keyword in node.keywords:
            return f"the class keyword `{keyword.arg or '**'}=` (line {keyword.lineno})"
        return self.attributes_on_foreign_base(node.body, node.bases, f"class `{node.name}`")

    def _assignment_problem(self, node: ast.Assign | ast.AnnAssign, line: str, *, in_class: bool) -> str | None:
        """What an assignment's annotation and value would evaluate, beyond literals (and lambdas)."""
        if not plain_targets(node):
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
        return None

    def attributes_on_foreign_base(self, members: list[ast.stmt], bases: list[ast.expr], what: str) -> str | None:
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
            start, end = self.lines.start_of(node), self.lines.end_of(node)
        except (AttributeError, IndexError, ValueError):
            return type(node).__name__
        first = self.lines.text[start:end].split("\n")[0].split("\r")[0].strip()
        return first if len(first) <= 40 else first[:37] + "..."
