"""The scope rule's merge of one file: the agent's version of a file with masked functions, merged
into its masked text.

`FileMerge` puts in the masked functions' new bodies (their decorators and signatures stay the
original ones), pairs the other statements of the two files (definitions by name, the rest by
meaning) and keeps what is only in the agent's file when it is a new import or definition that
binds no name the masked file uses and runs nothing at import (runs.benchmark.scope_import_time),
placed where the agent put it. Every other change is dropped with a reason.
runs.benchmark.scope's docstring states the rule in full and calls this for each file.

Pure Python: no Django here.
"""
from __future__ import annotations

import ast
import builtins
import difflib
import re
import symtable
from dataclasses import dataclass

from runs.benchmark.locating import MaskingError, accessor_kind, functions_by_name, locate_function, parsed
from runs.benchmark.masking import function_body_source, replace_function_body
from runs.benchmark.scope_import_time import (
    FUNCTIONS,
    ImportTimeRule,
    binds,
    is_dunder,
    plain_targets,
    symbols,
)
from runs.benchmark.source_lines import NEWLINE, SourceLines

# Beyond this the file keeps its masked text.
MAX_BLOCK_STATEMENTS = 5_000

_CODING = re.compile(r"^[ \t\f]*#.*?coding[:=]", re.ASCII)  # as tokenize.cookie_re, on the first two lines
_DEFINITIONS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Assign, ast.AnnAssign)
_BUILTINS = frozenset(dir(builtins))


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
    """A definition's qualified name as `runs.benchmark.locating` names it (a property's setter: `C.x.setter`)."""
    name = ".".join((*scope, node.name))
    accessor = accessor_kind(node) if isinstance(node, FUNCTIONS) else None
    return f"{name}.{accessor}" if accessor else name


def _key(lines: SourceLines, node: ast.stmt) -> tuple[str, str]:
    """How statements of the two files are paired: definitions by name, the rest by meaning."""
    if isinstance(node, FUNCTIONS):
        return ("def", _qualified((), node))
    if isinstance(node, ast.ClassDef):
        return ("class", node.name)
    return ("stmt", _fingerprint(lines, node))


def _is_docstring(node: ast.stmt) -> bool:
    return isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str)


def _is_future(node: ast.stmt) -> bool:
    return isinstance(node, ast.ImportFrom) and node.module == "__future__" and not node.level


def _bindings(source: str, class_indent: str | None) -> tuple[set[str], set[str]]:
    """Names a new statement binds in the module and, for a class member, in its class.

    The statement is analysed alone (inside a stand-in class for a member), so walrus targets and
    names a nested function declares `global` count too.
    """
    if class_indent is not None:
        source = "class _Scope_:\n" + class_indent + source
    table = symtable.symtable(source, "<new>", "exec")
    module, member = set(), set()
    for _, path, symbol in symbols(table):
        if symbol.is_declared_global() and binds(symbol) or not path and binds(symbol):
            module.add(symbol.get_name())
        elif path == ("_Scope_",) and class_indent is not None and binds(symbol):
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


@dataclass
class _Insertion:
    offset: int
    order: tuple
    text: str


class FileMerge:
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
        for current, path, symbol in symbols(table):
            name = symbol.get_name()
            if not path:
                if binds(symbol):
                    self.top_bound.add(name)
                if symbol.is_referenced():
                    self.top_read.add(name)
                continue
            if symbol.is_declared_global() and binds(symbol):
                self.top_bound.add(name)
            if current.get_type() == "class":
                if binds(symbol):
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

    def _class_at(self, scope: tuple[str, ...]) -> ast.ClassDef:
        """The masked file's class at this path of class names (one that holds a masked method)."""
        found = next(node for node in self.masked_tree.body if isinstance(node, ast.ClassDef) and node.name == scope[0])
        for name in scope[1:]:
            found = next(node for node in found.body if isinstance(node, ast.ClassDef) and node.name == name)
        return found

    def run(self) -> tuple[str, list[str]]:
        self._analyse_masked()
        self.rule = ImportTimeRule(
            path=self.path, masked_tree=self.masked_tree, patched_lines=self.p_lines, patched_tree=self.p_tree,
            masked_bound=self.top_bound | {name for names in self.class_bound.values() for name in names},
            own_modules=self.own_modules,
        )
        with_bodies = self._with_new_bodies()
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

    def _with_new_bodies(self) -> str:
        """The masked text with the agent's bodies of the masked functions put in."""
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
        return text

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
            if isinstance(node, FUNCTIONS) and _qualified(scope, node) in self.targets:
                continue  # a masked function defined again: the last definition's body was taken
            if not allowed:
                self.reasons.append(f"adds or changes `{_snippet(self.p_lines, node)}` (line {node.lineno}) {where}")
                continue
            self._added(node, anchor, m_body, scope, indent, where, previous=p_body[j - 1] if j else None)

    def _pair(self, m_node: ast.stmt, p_node: ast.stmt, scope: tuple[str, ...]) -> None:
        """Two statements with the same key; other statements' keys are their meaning, so equal."""
        if isinstance(m_node, FUNCTIONS):
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
        if isinstance(node, (*FUNCTIONS, ast.ClassDef)):
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
        elif not (isinstance(node, _DEFINITIONS) and plain_targets(node)):
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
            problem = self.rule.import_problem(node)
            if problem:
                self.reasons.append(f"`{snippet}` ({line}) {problem}; it is left out")
                return
        else:
            problem = self.rule.runs_at_import(node, in_class=in_class) or (
                self.rule.attributes_on_foreign_base([node], self._class_at(scope).bases, f"class `{'.'.join(scope)}`")
                if in_class else None
            )
            if problem:
                self.reasons.append(f"`{snippet}` ({line}) would run code at import: {problem}; it is left out")
                return
        self._insert(node, anchor, m_body, indent, source, in_class=in_class, previous=previous)

    def _conflict(self, node: ast.stmt, module_names: set[str], member_names: set[str], scope: tuple[str, ...]) -> str | None:
        """Why a new statement may not bind these names, or None."""
        for name in sorted(module_names):
            if is_dunder(name):
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
            if is_dunder(name):
                return f"defines the special member `{name}`"
            if name in bound:
                return f"redefines `{'.'.join((*scope, name))}`, which the class already defines"
            if name in read or name in self.attributes:
                return f"defines `{name}`, which the file's own code already uses as a name or attribute"
        return None

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
        is_definition = isinstance(node, (*FUNCTIONS, ast.ClassDef))
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
