"""Leak-free workspaces: what the agent (and the re-execution) sees of a sample.

A workspace holds the masked codebase under `code/`, the paper (depending on the context
condition), `refsol.sh` with the experiments' commands, and the task in `TASK.md` and `task.json`.
It never holds gold numbers, version-control history, byte-code caches, notebook outputs or editor
backups: each of those can carry the original bodies or the results. `audit_workspace` checks
that promise independently of how the workspace was built. `task_document` gives a spec's task.json,
TASK.md and paper.md without building it, from the same code, so the verifier shows its model the
task the agents were given.

No Django here: the service layer turns a Sample into a `WorkspaceSpec`.
"""
import ast
import json
import os
import re
import shlex
import shutil
import textwrap
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field
from difflib import SequenceMatcher
from enum import StrEnum
from pathlib import Path

from runs.benchmark import python_ast
from runs.benchmark.locating import MaskingError, list_functions, locate_function
from runs.benchmark.masking import MaskTarget, function_body_source, mask_source, normalise_code
from runs.benchmark.scoring import flatten_numbers


class Context(StrEnum):
    """The context condition: how much of the paper the workspace holds."""

    NONE = "none"  # no paper
    FULL = "full"  # the whole paper, without its numeric results
    ORACLE = "oracle"  # each masked function's relevant excerpt


# The conditions as a tuple, for membership tests of plain strings (`"full" in Context` raises
# TypeError before Python 3.12) and argparse's choices.
CONTEXT_CONDITIONS = tuple(Context)

CODE_DIR = "code"

# Directories and files that hold history, caches or backups of the original code.
EXCLUDED_DIRS = {".git", ".hg", ".svn", "__pycache__", ".ipynb_checkpoints", ".pytest_cache", ".mypy_cache", ".tox"}
EXCLUDED_SUFFIXES = (".pyc", ".pyo", ".orig", ".rej", ".bak", ".swp", "~")


@dataclass(frozen=True)
class MaskedFunctionSpec:
    func_id: int
    file: str
    name: str
    description: str = ""
    relevant_paper: str = ""
    line_hint: int | None = None


@dataclass(frozen=True)
class ExperimentSpec:
    exp_id: int
    description: str
    command: str
    answer_format: dict
    timeout_seconds: int = 600


@dataclass(frozen=True)
class WorkspaceSpec:
    sample_id: str
    paper_title: str
    paper_text: str
    code_dir: Path
    masked: list[MaskedFunctionSpec]
    experiments: list[ExperimentSpec]
    context: str = Context.FULL


@dataclass
class WorkspaceManifest:
    root: Path
    files: list[str] = field(default_factory=list)
    missing_functions: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


class WorkspaceError(Exception):
    pass


def experiment_label(number: int) -> str:
    """How experiments are named to the agent and keyed in its answer (upstream numbers them from 1)."""
    return f"Experiment {number}"


@dataclass(frozen=True)
class TaskDocument:
    """The task as a workspace states it: the content of task.json, the text of TASK.md and the
    text of paper.md (None when the context condition gives no paper).

    Whoever shows a model the task (the agents through the workspace, the verifier through
    `task_document`) shows these, so every model sees the same task.
    """

    task: dict
    markdown: str
    context_text: str | None


@dataclass(frozen=True)
class MaskedCodeFile:
    """One file of the codebase with its masked functions' bodies replaced, as the workspace holds it."""

    relative: str
    text: str
    notes: tuple[str, ...]
    missing_functions: tuple[dict, ...]  # task.json's entries of its stubs, lines in `text`


def task_json(task: dict) -> str:
    """The text of task.json for `task` (the verifier quotes the task in this spelling too)."""
    return json.dumps(task, indent=2) + "\n"


def task_document(spec: WorkspaceSpec) -> TaskDocument:
    """The task.json, TASK.md and paper.md of `spec`'s workspace, without building it.

    The masked files are masked in memory exactly as `build_workspace` masks them, so each missing
    function's line is the one in the masked file the agent opens. Raises WorkspaceError for an
    unknown context condition, a missing gold code directory or masked file, or a masked file that
    cannot be masked (not UTF-8, or a function no longer where the suite says).
    """
    code_dir = _gold_code_dir(spec)
    return _task_document_of(spec, _mask_files(spec, code_dir))


def build_workspace(spec: WorkspaceSpec, dest: Path) -> WorkspaceManifest:
    """Write the workspace of `spec` into `dest`, which must not exist or be empty."""
    code_dir = _gold_code_dir(spec)
    dest = Path(dest)
    if dest.exists() and any(dest.iterdir()):
        raise WorkspaceError(f"{dest} is not empty; a workspace is always built into a fresh directory")
    if dest.resolve().is_relative_to(code_dir):
        raise WorkspaceError(f"{dest} is inside the gold code directory {code_dir}")
    masked_files = _mask_files(spec, code_dir)
    document = _task_document_of(spec, masked_files)
    dest.mkdir(parents=True, exist_ok=True)
    manifest = WorkspaceManifest(root=dest)

    _copy_code(code_dir, dest / CODE_DIR, masked_files={f.relative for f in masked_files}, manifest=manifest)
    for masked_file in masked_files:
        manifest.notes.extend(f"{masked_file.relative}: {note}" for note in masked_file.notes)
        _write(dest / CODE_DIR / masked_file.relative, masked_file.text, manifest)
    manifest.missing_functions.extend(document.task["missing_functions"])

    _write(dest / "task.json", task_json(document.task), manifest)
    _write(dest / "TASK.md", document.markdown, manifest)
    _write(dest / "refsol.sh", _refsol(spec), manifest)
    (dest / "refsol.sh").chmod(0o755)
    if document.context_text is not None:
        _write(dest / "paper.md", document.context_text, manifest)
    return manifest


def _gold_code_dir(spec: WorkspaceSpec) -> Path:
    """The spec's gold code directory, resolved, after checking the spec can be built at all."""
    if spec.context not in CONTEXT_CONDITIONS:
        raise WorkspaceError(f"context {spec.context!r} is not one of {', '.join(CONTEXT_CONDITIONS)}")
    code_dir = Path(spec.code_dir).resolve()
    if not code_dir.is_dir():
        raise WorkspaceError(f"gold code directory {code_dir} does not exist")
    return code_dir


def _task_document_of(spec: WorkspaceSpec, masked_files: list[MaskedCodeFile]) -> TaskDocument:
    missing = [entry for masked_file in masked_files for entry in masked_file.missing_functions]
    task = _task_document(spec, missing)
    return TaskDocument(task=task, markdown=_task_markdown(spec, task), context_text=_paper_for_context(spec))


def _write(path: Path, text: str, manifest: WorkspaceManifest) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8", newline="")
    manifest.files.append(str(path.relative_to(manifest.root)))


def _excluded(name: str) -> bool:
    return name in EXCLUDED_DIRS or name.endswith(EXCLUDED_SUFFIXES)


def _copy_code(source: Path, target: Path, *, masked_files: set[str], manifest: WorkspaceManifest) -> None:
    for walked, subdirs, files in os.walk(source):
        directory = Path(walked)
        relative_dir = directory.relative_to(source)
        subdirs[:] = sorted(name for name in subdirs if not _excluded(name))
        (target / relative_dir).mkdir(parents=True, exist_ok=True)
        for name in sorted(files) + [d for d in subdirs if (directory / d).is_symlink()]:
            path = directory / name
            relative = (relative_dir / name).as_posix()
            if _excluded(name):
                manifest.notes.append(f"left out {relative}: history, cache or backup file")
                continue
            if path.is_symlink():
                if not path.resolve().is_relative_to(source):
                    manifest.notes.append(f"left out {relative}: symlink pointing outside the codebase")
                    continue
                (target / relative).symlink_to(os.readlink(path))
            elif relative in masked_files:
                continue  # written masked afterwards
            elif name.endswith(".ipynb"):
                _write(target / relative, _strip_notebook_outputs(path, relative, manifest), manifest)
                continue
            else:
                shutil.copyfile(path, target / relative)
            manifest.files.append(f"{CODE_DIR}/{relative}")


def _strip_notebook_outputs(path: Path, relative: str, manifest: WorkspaceManifest) -> str:
    """Outputs of a notebook are results of the original code; the cells' sources stay."""
    try:
        notebook = json.loads(path.read_text(encoding="utf-8"))
        for cell in notebook.get("cells", []):
            if cell.get("cell_type") == "code":
                cell["outputs"] = []
                cell["execution_count"] = None
    except (ValueError, AttributeError) as error:
        manifest.notes.append(f"notebook {relative} is not valid JSON ({error}); copied as an empty notebook")
        notebook = {"cells": [], "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    return json.dumps(notebook, indent=1) + "\n"


def _mask_files(spec: WorkspaceSpec, code_dir: Path) -> list[MaskedCodeFile]:
    """Each file holding masked functions, masked once, in path order (the order of task.json's entries)."""
    by_file: dict[str, list[MaskedFunctionSpec]] = defaultdict(list)
    for function in spec.masked:
        by_file[function.file].append(function)
    return [mask_file(code_dir, relative, functions) for relative, functions in sorted(by_file.items())]


def mask_file(source: Path, relative: str, functions: list[MaskedFunctionSpec]) -> MaskedCodeFile:
    """One file of the gold code in `source` with `functions` masked, as a workspace holds it.
    Raises WorkspaceError when it cannot be read or masked."""
    path = source / relative
    if not path.is_file():
        raise WorkspaceError(f"masked function file {relative} does not exist in {source}")
    # The functions were located when the suite was imported; gold code changed since (a renamed
    # function, a stale hint, another encoding) is a broken workspace, reported as such to every
    # caller (build_workspace's and task_document's), not a traceback.
    try:
        original = path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as error:
        raise WorkspaceError(
            f"masked function file {relative} in {source} is not valid UTF-8 ({error.reason} at byte {error.start})"
        ) from None
    targets = [MaskTarget(name=f.name, description=f.description, line_hint=f.line_hint) for f in functions]
    try:
        masked = mask_source(original, targets, filename=relative)
        # Report each stub's line in the masked file, which is what the agent will open; earlier stubs
        # shift it, so look it up again rather than reuse the original line.
        missing = tuple(
            {
                "file": f"{CODE_DIR}/{relative}",
                "name": location.qualified_name,
                "line": locate_function(masked.text, location.qualified_name, line_hint=location.def_line).def_line,
            }
            for location in masked.locations
        )
    except MaskingError as error:  # its message starts with `relative`
        raise WorkspaceError(f"cannot mask the functions of {source}: {error}") from None
    except SyntaxError as error:
        raise WorkspaceError(f"cannot mask the functions of {source}: {relative}: {error}") from None
    return MaskedCodeFile(relative=relative, text=masked.text, notes=tuple(masked.notes), missing_functions=missing)


def _paper_for_context(spec: WorkspaceSpec) -> str | None:
    if spec.context == Context.NONE:
        return None
    if spec.context == Context.FULL:
        return spec.paper_text
    sections = [f"# {spec.paper_title}\n\nExcerpts of the paper relevant to each missing function.\n"]
    for function in spec.masked:
        excerpt = function.relevant_paper.strip() or "(no excerpt is available for this function)"
        sections.append(f"## {CODE_DIR}/{function.file}: {function.name}\n\n{excerpt}\n")
    return "\n".join(sections)


def _task_document(spec: WorkspaceSpec, missing: list[dict]) -> dict:
    experiments = [
        {
            "label": experiment_label(number),
            "description": experiment.description,
            "command": experiment.command,
            "answer_format": experiment.answer_format,
        }
        for number, experiment in enumerate(spec.experiments, start=1)
    ]
    answer_format = {item["label"]: item["answer_format"] for item in experiments}
    return {
        "sample_id": spec.sample_id,
        "paper_title": spec.paper_title,
        "context": spec.context,
        "missing_functions": missing,
        "experiments": experiments,
        "answer_format": answer_format,
        "working_directory": CODE_DIR,
    }


def _task_markdown(spec: WorkspaceSpec, task: dict) -> str:
    lines = [f"# Task: {spec.paper_title}", ""]
    lines.append("Some functions of this paper's code have been removed: their bodies raise NotImplementedError.")
    lines.append("Implement them from the paper and their docstrings, run the experiments below, and report")
    lines.append("the numbers they print.")
    lines.append("")
    if spec.context == Context.FULL:
        lines.append("The paper is in `paper.md`.")
    elif spec.context == Context.ORACLE:
        lines.append("The parts of the paper that describe each missing function are in `paper.md`.")
    else:
        lines.append("The paper is not available for this task.")
    lines += ["", "## Missing functions", ""]
    lines += [f"- `{f['file']}` line {f['line']}: `{f['name']}`" for f in task["missing_functions"]] or ["- none"]
    lines += ["", "## Experiments", "", f"Run each command from the `{CODE_DIR}/` directory (all of them: `bash refsol.sh`).", ""]
    for item in task["experiments"]:
        lines += [f"### {item['label']}", "", item["description"], "", "```", item["command"], "```", ""]
    lines += ["## Answer", "", "Submit one JSON object with one entry per experiment, in this format:", "", "```json"]
    lines += [json.dumps(task["answer_format"], indent=2), "```", ""]
    return "\n".join(lines)


def _refsol(spec: WorkspaceSpec) -> str:
    lines = ["#!/usr/bin/env bash", "# Runs every experiment of this task; each prints its result as JSON.", "set -u"]
    lines.append(f'cd "$(dirname "$0")/{CODE_DIR}"')
    for number, experiment in enumerate(spec.experiments, start=1):
        label = experiment_label(number)
        lines.append(f"echo {shlex.quote('=== ' + label + ' ===')}")
        lines.append(experiment.command)
    return "\n".join(lines) + "\n"


# --- the audit -----------------------------------------------------------------------------------

MIN_LEAK_LENGTH = 40
NEAR_COPY_RATIO = 0.85


@dataclass
class AuditResult:
    leaks: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def _squash_line(line: str) -> str:
    """A line as compared for copies: comment markers, trailing comments and all whitespace removed.

    Stripping leading `#` and `>` finds bodies pasted as comments, quotes or indented in Markdown.
    """
    line = line.strip().lstrip("#>").strip()
    line = re.sub(r"\s+#.*$", "", line)
    return re.sub(r"\s+", "", line)


def _body_fingerprint(body: str) -> list[str]:
    """The code lines of a body (docstring and comment-only lines dropped), squashed."""
    lines = textwrap.dedent(body).splitlines()
    try:
        statements = python_ast.parse(textwrap.dedent(body)).body
        first = statements[0] if statements else None
        if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant) and isinstance(first.value.value, str):
            lines = lines[first.end_lineno :]
    except SyntaxError:
        pass
    return [squashed for line in lines if not line.strip().startswith("#") and (squashed := _squash_line(line))]


def _contains_body(haystack: list[str], needle: list[str]) -> bool:
    """Whether the needle's lines occur in order in the haystack, close together.

    Extra lines in between are allowed (a copy keeps the original's comments, or gains some), up
    to as many again as the body has.
    """
    window = 2 * len(needle) + 2
    for start, line in enumerate(haystack):
        if line != needle[0]:
            continue
        position = 1
        for candidate in haystack[start + 1 : start + window]:
            if position == len(needle):
                break
            if candidate == needle[position]:
                position += 1
        if position == len(needle):
            return True
    return False


def _gold_number_strings(values: list[float]) -> set[str]:
    """Spellings of gold numbers specific enough that finding one in a file is a leak, not chance.

    Short numbers (0.5, 10, 1e-3) occur everywhere in code as hyperparameters, so only values
    with at least four significant digits are searched for, both in full and rounded to 4-6 digits.
    """
    spellings = set()
    for value in values:
        if not isinstance(value, float) or value != value or value in (float("inf"), float("-inf")):
            continue
        digits = re.sub(r"[^0-9]", "", f"{abs(value):.15g}".split("e")[0]).strip("0")
        if len(digits) < 4:
            continue
        spellings.add(repr(value))
        for significant in (4, 5, 6):
            spellings.add(f"{value:.{significant}g}")
    return spellings


def _gold_numbers(gold: Mapping) -> list[float]:
    """The numbers of a gold result (its int and float leaves; not booleans, not numeric text)."""
    return [float(leaf) for leaf in flatten_numbers(gold).values() if isinstance(leaf, int | float) and not isinstance(leaf, bool)]


def _texts_of(path: Path) -> str | None:
    """The searchable text of a workspace file: notebooks by their cells' sources; binaries skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except (UnicodeDecodeError, OSError):
        return None
    if path.suffix == ".ipynb":
        try:
            cells = json.loads(text).get("cells", [])
            return "\n".join("".join(c.get("source", [])) for c in cells) + "\n" + text
        except (ValueError, AttributeError):
            return text
    return text


def audit_workspace(root: Path, *, original_bodies: dict[str, str], gold_results: list) -> AuditResult:
    """Check a built workspace for the original bodies of its masked functions and for gold numbers.

    `original_bodies` maps a label (file and qualified name) to the gold body text. An exact copy of
    a body (ignoring whitespace and comments) or any gold number anywhere in the workspace is a leak;
    a function elsewhere whose body is nearly the same is a warning for a person to look at.
    """
    result = AuditResult()
    fingerprints = {label: _body_fingerprint(body) for label, body in original_bodies.items()}
    # Bodies of a line or two (`return self.x`) are too generic for a copy to prove anything.
    fingerprints = {label: lines for label, lines in fingerprints.items() if sum(map(len, lines)) >= MIN_LEAK_LENGTH}
    normalised_bodies = {label: normalise_code(body) for label, body in original_bodies.items()}
    gold_strings = sorted(_gold_number_strings([n for gold in gold_results for n in _gold_numbers(gold)]))
    for path in sorted(p for p in Path(root).rglob("*") if p.is_file() and not p.is_symlink()):
        relative = path.relative_to(root).as_posix()
        if set(path.relative_to(root).parts) & EXCLUDED_DIRS or path.name.endswith(EXCLUDED_SUFFIXES):
            result.leaks.append(f"{relative}: history, cache or backup file present in the workspace")
        text = _texts_of(path)
        if text is None:
            continue
        lines = [squashed for line in text.splitlines() if (squashed := _squash_line(line))]
        for label, fingerprint in fingerprints.items():
            if _contains_body(lines, fingerprint):
                result.leaks.append(f"{relative}: contains the original body of masked function {label}")
        for spelling in gold_strings:
            # The substring first: a file holds hardly any of the hundreds of spellings, and a pattern
            # per spelling (more than re's cache keeps) compiled for every file was most of an audit.
            if spelling in text and re.search(rf"(?<![0-9.]){re.escape(spelling)}(?![0-9])", text):
                result.leaks.append(f"{relative}: contains the gold result value {spelling}")
        if path.suffix == ".py":
            result.warnings.extend(_near_copies(relative, text, normalised_bodies))
    return result


def _near_copies(relative: str, text: str, normalised_bodies: dict[str, str]) -> list[str]:
    warnings = []
    try:
        functions = list_functions(text)
    except SyntaxError:
        return [f"{relative}: does not parse, so it was not checked for near-copies"]
    stub = normalise_code("raise NotImplementedError")
    comparable = {label: body for label, body in normalised_bodies.items() if len(body) >= MIN_LEAK_LENGTH}
    for name, line in functions:
        try:
            candidate = normalise_code(function_body_source(text, name, line_hint=line))
        except Exception:  # noqa: BLE001 - an odd definition must not stop the audit
            continue
        if candidate == stub:
            continue
        for label, body in comparable.items():
            matcher = SequenceMatcher(None, candidate, body, autojunk=False)
            # The quick ratios are upper bounds of the ratio: most pairs are ruled out by them, cheaply.
            if matcher.real_quick_ratio() < NEAR_COPY_RATIO or matcher.quick_ratio() < NEAR_COPY_RATIO:
                continue
            ratio = matcher.ratio()
            if ratio >= NEAR_COPY_RATIO:
                warnings.append(f"{relative}:{line} `{name}` is a near-copy ({ratio:.0%}) of masked function {label}")
    return warnings
