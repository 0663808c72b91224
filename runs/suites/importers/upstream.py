"""Import the upstream AutoExperiment release's metadata (DESIGN.md section 4) as a suite.

Inputs, all in `metadata_dir` (upstream's `dataset/MLRC/`, which also holds one folder per paper,
`<paper_id>/` with `paper.txt`, `code/`, `functions.jsonl` and `experiments.jsonl`):

- `mlrc_main.csv` (Title, github, paper_id, conda_env), `mlrc_funcs.csv` (paper_id, func_id, file,
  name, header_line, optional line_start and line_end, ...) and `mlrc_exps.csv` (paper_id, exp_id,
  description, result, func_dependencies, solution): required, the source of truth. A missing file
  or a missing required column is a whole-file problem and raises SuiteFormatError naming the file
  and column.
- `<paper_id>.functions.jsonl` / `<paper_id>.experiments.jsonl`, or upstream's
  `<paper_id>/functions.jsonl` / `<paper_id>/experiments.jsonl`: optional and stale. They only fill
  what the CSVs lack (function descriptions; an empty description or command), and every
  disagreement with the CSVs is reported. They never supply gold results: a stale gold number is
  worse than none.
- `mlrc_n=<K>*.jsonl`: upstream's samples, imported as Sample rows. Their `func_details` also
  supply function descriptions. Samples are only ever added or updated here, never deleted for
  being absent (samples_ensure may have drawn more), except with a function that is deleted.
- The paper text, from the first of `papers/<paper_id>.md`, `papers/<paper_id>.txt` (our own
  files: an explicit override), `<paper_id>/paper.md` and `<paper_id>/paper.txt` (as upstream ships
  it). A paper with none is imported with an empty text and reported with every place looked at;
  text that is not UTF-8 is read with the bad bytes replaced, and reported.

Code: the gold code of paper P is the directory `<code_dir>/<P>/` (a checkout of the paper's
repository), else the `code/` folder upstream ships in `<metadata_dir>/<P>/` (so the release
imports as it is with `code_dir` = `metadata_dir`). A paper with neither is still imported, with
an empty `code_dir`, so it shows up; its functions, experiments and samples are skipped, because
without code nothing can be located, masked or run. Run the import again once the code is there.
`code_dir` itself must exist (a missing one is far more likely a typo than a release without any
code; pass an empty directory to import the metadata alone).

Re-importing deletes the papers, functions and experiments of the suite that are no longer
imported (gone from the CSVs, or now skipped), and the samples masking a deleted function; each
deletion is reported.

Bad rows never stop the import: each is skipped or repaired and reported as
`<file>:<line>: <field>: <reason>` (the line where the CSV record starts; records span lines).
Function names are resolved in the code by AST and stored qualified. Upstream gives bare names such
as `__call__`, a header_line that may be stale or point at the class statement, and the body's
line_start..line_end: these are only evidence to choose among same-named defs (the rules of
`runs.benchmark.locating.locate_function`), each repair reported with the rule that made it. A row
the evidence cannot resolve is skipped as ambiguous, never guessed.

The reading of the files and the cross-check of the stale ones are in `upstream_files`; finding a
functions row's function in the code is `upstream_functions`.
"""
import re
from dataclasses import dataclass, field
from pathlib import Path

from django.db import transaction

from runs.benchmark.sampling import sample_id
from runs.models import Experiment, Function, Paper, Sample, Suite
from runs.suites.importers.common import (
    ImportReport,
    SuiteFormatError,
    answer_format_of,
    delete_gone_experiments,
    delete_gone_functions,
    delete_gone_papers,
    mark_suite_changed,
    relation_sync,
    upsert,
    upsert_tracked,
)
from runs.suites.importers.environments import from_environment_yml, from_requirements_txt
from runs.suites.importers.schema import PAPER_ID, SLUG
from runs.suites.importers.upstream_files import (
    EXPS,
    FUNCS,
    MAIN,
    REQUIRED_COLUMNS,
    Row,
    compare_with_stale,
    parse_id,
    parse_result,
    read_csv,
    read_jsonl,
    stale_rows,
    text_of,
)
from runs.suites.importers.upstream_functions import locate_row_function

SAMPLE_FILE = re.compile(r"^mlrc_n=(\d+).*\.jsonl$")
# Where a paper's text may be, in order of precedence: our own papers/ files override upstream's.
PAPER_TEXT_PLACES = ("papers/{}.md", "papers/{}.txt", "{}/paper.md", "{}/paper.txt")
URL = re.compile(r"^https?://\S+$")
TITLE_LENGTH = Paper._meta.get_field("title").max_length
URL_LENGTH = Paper._meta.get_field("source_url").max_length
SAMPLE_ID_LENGTH = Sample._meta.get_field("sample_id").max_length


@dataclass
class _Paper:
    paper_id: str
    title: str
    text: str
    code_dir: str
    source_url: str
    environment: dict | None = None


@dataclass
class _Function:
    paper_id: str
    func_id: int
    file: str
    name: str
    description: str
    relevant_paper: str
    line_hint: int


@dataclass
class _Experiment:
    paper_id: str
    exp_id: int
    description: str
    command: str
    answer_format: dict
    gold_result: dict
    depends_on: list[int]


@dataclass
class _Sample:
    paper_id: str
    sample_id: str
    n: int
    func_ids: list[int]


@dataclass
class _Plan:
    papers: dict[str, _Paper] = field(default_factory=dict)
    functions: dict[tuple[str, int], _Function] = field(default_factory=dict)
    experiments: dict[tuple[str, int], _Experiment] = field(default_factory=dict)
    samples: dict[str, _Sample] = field(default_factory=dict)
    # Why a function row that exists in the CSV was not imported, to explain dropped dependencies.
    function_skipped: dict[tuple[str, int], str] = field(default_factory=dict)


def _read_paper_text(metadata_dir: Path, paper_id: str, *, row: Row, report: ImportReport) -> str:
    """The paper's text from the first of PAPER_TEXT_PLACES that has it, or "" after reporting it."""
    places = [place.format(paper_id) for place in PAPER_TEXT_PLACES]
    for place in places:
        path = metadata_dir / place
        if not path.is_file():
            continue
        try:
            data = path.read_bytes()
        except OSError as error:
            report.repair(row.at("text"), f"{place} cannot be read ({error}); looking further")
            continue
        try:
            text = data.decode("utf-8-sig")
        except UnicodeDecodeError as error:
            report.repair(row.at("text"), f"{place} is not valid UTF-8 ({error.reason} at byte {error.start}); "
                          "read with every undecodable byte replaced by U+FFFD")
            text = data.decode("utf-8-sig", errors="replace")
        if "\x00" in text:
            # Postgres text cannot hold NUL, and text extracted from a PDF sometimes has one.
            report.repair(row.at("text"), f"{place} holds {text.count(chr(0))} NUL character(s); removed")
            text = text.replace("\x00", "")
        return text
    report.repair(row.at("text"), f"no paper text: none of {', '.join(places)} in the metadata directory; "
                  "paper text left empty")
    return ""


def _paper_code_dir(metadata_dir: Path, code_dir: Path, paper_id: str) -> Path | None:
    """Paper P's gold code: a checkout at `<code_dir>/P/`, else the `code/` upstream ships in `<metadata_dir>/P/`."""
    checkout, shipped = code_dir / paper_id, metadata_dir / paper_id / "code"
    # With code_dir = metadata_dir, `<code_dir>/P/` is upstream's paper folder, not the checkout.
    if checkout.is_dir() and checkout.resolve() != shipped.parent.resolve():
        return checkout
    return shipped if shipped.is_dir() else None


def _plan_papers(rows: list[Row], *, metadata_dir: Path, code_dir: Path, plan: _Plan, report: ImportReport):
    first_line: dict[str, int] = {}
    for row in rows:
        paper_id = row.get("paper_id")
        if not PAPER_ID.match(paper_id) or len(paper_id) > 100:
            report.skip(row.at("paper_id"), f"{paper_id!r} is not a usable paper id")
            continue
        if paper_id in first_line:
            report.skip(row.at("row"), f"duplicate of line {first_line[paper_id]} (paper {paper_id}); the first is kept")
            continue
        first_line[paper_id] = row.line
        title = row.get("Title")
        if not title:
            title = paper_id
            report.repair(row.at("Title"), f"empty; the paper id {paper_id} is used as title")
        elif len(title) > TITLE_LENGTH:
            title = title[: TITLE_LENGTH - 1] + "…"
            report.repair(row.at("Title"), f"longer than {TITLE_LENGTH} characters; truncated")
        url = row.get("github")
        if url and not (URL.match(url) and len(url) <= URL_LENGTH):
            report.repair(row.at("github"), f"{url[:80]!r} is not an http(s) URL; left empty")
            url = ""
        text = _read_paper_text(metadata_dir, paper_id, row=row, report=report)
        paper_code = _paper_code_dir(metadata_dir, code_dir, paper_id)
        if paper_code is not None:
            code = str(paper_code.resolve())
        else:
            code = ""
            report.skip(row.at("code"), f"no code directory {code_dir / paper_id} (nor "
                        f"{metadata_dir / paper_id / 'code'}): paper imported without code; "
                        "its functions, experiments and samples are skipped")
        environment = _paper_environment(paper_code, paper_id, report=report) if paper_code is not None else None
        plan.papers[paper_id] = _Paper(paper_id=paper_id, title=title, text=text, code_dir=code, source_url=url,
                                       environment=environment)


# The environment files an upstream paper's code may ship, in the order they are preferred.
ENVIRONMENT_FILES = {
    "requirements.txt": from_requirements_txt,
    "environment.yml": from_environment_yml,
    "environment.yaml": from_environment_yml,
}


def _paper_environment(code_dir: Path, paper_id: str, *, report: ImportReport) -> dict | None:
    """The paper's environment declaration, read from the first environment file its code ships;
    each line that cannot be translated is reported (and then nothing is declared: the paper runs
    with the sandboxes' default until its declaration is written by hand)."""
    for name, translate in ENVIRONMENT_FILES.items():
        path = code_dir / name
        if not path.is_file():
            continue
        try:
            text = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as error:
            report.skip(f"{paper_id}/{name}", f"cannot be read ({error}); no environment declared")
            return None
        translated = translate(text, source=f"{paper_id}/{name}")
        for problem in translated.problems:
            report.skip(problem.split(":", 1)[0], problem.split(":", 1)[1].strip() if ":" in problem else problem)
        if translated.environment is None:
            report.skip(f"{paper_id}/{name}", "not translated into an environment declaration (see the lines above); "
                        "the paper runs with the sandboxes' default until one is written")
        return translated.environment
    return None


def _row_key(row: Row, id_column: str, *, plan: _Plan, seen: dict, report: ImportReport):
    """(paper_id, id) of a functions/experiments row, or None after reporting why the row is skipped."""
    paper_id = row.get("paper_id")
    if paper_id not in plan.papers:
        report.skip(row.at("paper_id"), f"paper {paper_id!r} is not in {MAIN}")
        return None
    number = parse_id(row.values.get(id_column))
    if number is None:
        report.skip(row.at(id_column), f"{row.values.get(id_column)!r} is not a non-negative integer")
        return None
    key = (paper_id, number)
    if key in seen:
        earlier = seen[key]
        same = "identical" if earlier.values == row.values else "conflicting"
        report.skip(row.at("row"), f"{same} duplicate of line {earlier.line} ({paper_id} {id_column} {number}); "
                    "the first is kept")
        return None
    seen[key] = row
    return key


def _plan_functions(rows: list[Row], *, stale: dict, details: dict, plan: _Plan, report: ImportReport):
    seen: dict = {}
    sources: dict[Path, str | None] = {}
    defs: dict[tuple, int] = {}
    for row in rows:
        key = _row_key(row, "func_id", plan=plan, seen=seen, report=report)
        if key is None:
            continue
        paper_id, func_id = key
        stale_row = stale.get(key)
        compare_with_stale(row, stale_row, [("file", "file"), ("name", "name"), ("header_line", "header_line"),
                                            ("relevant_paper", "relevant_paper")], report=report)
        paper = plan.papers[paper_id]
        if not paper.code_dir:
            plan.function_skipped[key] = "its paper has no code"
            report.skip(row.at("row"), f"paper {paper_id} has no code directory")
            continue
        function = locate_row_function(row, Path(paper.code_dir), sources=sources, report=report)
        if function is None:
            plan.function_skipped[key] = f"{FUNCS}:{row.line} was skipped"
            continue
        qualified, def_line = function
        other = defs.get((paper_id, row.get("file"), qualified, def_line))
        if other is not None:
            plan.function_skipped[key] = f"{FUNCS}:{row.line} was skipped"
            report.skip(row.at("name"), f"{qualified} at line {def_line} is already function {other}; "
                        "masking it twice would duplicate code")
            continue
        defs[(paper_id, row.get("file"), qualified, def_line)] = func_id
        description = row.get("description")
        if not description and stale_row is not None:
            description = text_of(stale_row.values.get("description"))
        if not description:
            description = details.get(key, "")
        if not description:
            report.repair(row.at("description"), f"none in {FUNCS}, {paper_id}.functions.jsonl, "
                          f"{paper_id}/functions.jsonl or the samples' func_details; left empty, so the masked "
                          "stub gets no docstring")
        relevant = row.get("relevant_paper") or (text_of(stale_row.values.get("relevant_paper")) if stale_row else "")
        plan.functions[key] = _Function(paper_id=paper_id, func_id=func_id, file=row.get("file"), name=qualified,
                                        description=description, relevant_paper=relevant, line_hint=def_line)
    for key, stale_row in stale.items():
        if key not in seen:
            report.skip(stale_row.at("row"), f"function {key[1]} of {key[0]} has no usable row in {FUNCS} "
                        "(the CSV is the source of truth); ignored")


def _plan_experiments(rows: list[Row], *, stale: dict, plan: _Plan, report: ImportReport):
    seen: dict = {}
    commands = {}
    for row in rows:
        commands.setdefault((row.get("paper_id"), row.get("solution")), row.get("exp_id"))

    def renumbered(key, stale_row) -> str:
        # Upstream dropped experiments and renumbered the rest in the CSV but not in the jsonl;
        # saying so explains a wall of disagreements.
        match = commands.get((key[0], text_of(stale_row.values.get("solution"))))
        if match is None or parse_id(match) == key[1]:
            return ""
        return f" (its command is that of {EXPS} exp_id {match}: the jsonl numbering is stale)"

    for row in rows:
        key = _row_key(row, "exp_id", plan=plan, seen=seen, report=report)
        if key is None:
            continue
        paper_id, exp_id = key
        stale_row = stale.get(key)
        if stale_row is not None:
            compare_with_stale(row, stale_row, [("description", "description"), ("solution", "solution"),
                                                ("func_dependencies", "func_dependencies"), ("result", "result")],
                               report=report, note=renumbered(key, stale_row))
        if not plan.papers[paper_id].code_dir:
            report.skip(row.at("row"), f"paper {paper_id} has no code directory")
            continue
        texts = {}
        for column in ("description", "solution"):
            texts[column] = row.get(column)
            if not texts[column] and stale_row is not None and text_of(stale_row.values.get(column)):
                texts[column] = text_of(stale_row.values.get(column))
                report.repair(row.at(column), f"empty; filled from {stale_row.file}:{stale_row.line}")
        if not texts["description"] or not texts["solution"]:
            missing = "description" if not texts["description"] else "solution"
            report.skip(row.at(missing), "empty" + (" (no command to run)" if missing == "solution" else ""))
            continue
        result, error, literal = parse_result(row.get("result"))
        if error:
            report.skip(row.at("result"), f"{error}; experiment skipped (stale jsonl results are never used as gold)")
            continue
        if literal:
            report.repair(row.at("result"), "a Python literal, not JSON; parsed with ast.literal_eval")
        depends_on = _dependencies(row, paper_id, plan=plan, report=report)
        if not depends_on:
            report.skip(row.at("func_dependencies"), "no importable function dependencies remain; experiment skipped")
            continue
        plan.experiments[key] = _Experiment(paper_id=paper_id, exp_id=exp_id, description=texts["description"],
                                            command=texts["solution"], answer_format=answer_format_of(result),
                                            gold_result=result, depends_on=depends_on)
    for key, stale_row in stale.items():
        if key not in seen:
            report.skip(stale_row.at("row"), f"experiment {key[1]} of {key[0]} has no usable row in {EXPS} "
                        f"(the CSV is the source of truth); ignored{renumbered(key, stale_row)}")


def _dependencies(row: Row, paper_id: str, *, plan: _Plan, report: ImportReport) -> list[int]:
    kept = []
    for token in row.get("func_dependencies").split(","):
        token = token.strip()
        if not token:
            continue
        func_id = parse_id(token)
        if func_id is None:
            report.repair(row.at("func_dependencies"), f"{token!r} is not a function id; dropped")
        elif (paper_id, func_id) in plan.functions:
            if func_id not in kept:
                kept.append(func_id)
        elif (paper_id, func_id) in plan.function_skipped:
            report.repair(row.at("func_dependencies"), f"function {func_id} is not imported "
                          f"({plan.function_skipped[(paper_id, func_id)]}); dropped")
        else:
            report.repair(row.at("func_dependencies"), f"function {func_id} is not in {FUNCS}; dropped")
    return sorted(kept)


def _sample_ids(value) -> list[int] | None:
    if isinstance(value, int) and not isinstance(value, bool):
        value = [value]
    elif isinstance(value, str):
        value = [part for part in value.split(",") if part.strip()]
    if not isinstance(value, list):
        return None
    ids = [parse_id(item) for item in value]
    return None if any(item is None for item in ids) else ids


def _plan_samples(files: list[tuple[int, list[Row]]], *, plan: _Plan, report: ImportReport):
    first: dict[str, Row] = {}
    for declared_n, rows in files:
        for row in rows:
            paper_id = text_of(row.values.get("paper_id"))
            if paper_id not in plan.papers:
                report.skip(row.at("paper_id"), f"paper {paper_id!r} is not in {MAIN}")
                continue
            ids = _sample_ids(row.values.get("func_ids"))
            if not ids:
                report.skip(row.at("func_ids"), f"{row.values.get('func_ids')!r} is not a list of function ids")
                continue
            if len(set(ids)) != len(ids):
                report.skip(row.at("func_ids"), f"{row.values.get('func_ids')!r} names a function twice")
                continue
            name = sample_id(paper_id, ids)
            if name in first:
                report.skip(row.at("row"), f"duplicate of {first[name].file}:{first[name].line} (sample {name})")
                continue
            first[name] = row
            if not plan.papers[paper_id].code_dir:
                report.skip(row.at("row"), f"paper {paper_id} has no code directory")
                continue
            missing = [i for i in ids if (paper_id, i) not in plan.functions]
            if missing:
                reasons = "; ".join(f"{i}: {plan.function_skipped.get((paper_id, i), f'not in {FUNCS}')}" for i in missing)
                report.skip(row.at("func_ids"), f"masks function(s) that are not imported ({reasons})")
                continue
            if len(name) > SAMPLE_ID_LENGTH:
                report.skip(row.at("func_ids"), f"sample id longer than {SAMPLE_ID_LENGTH} characters")
                continue
            if len(ids) != declared_n:
                report.repair(row.at("func_ids"), f"the file name says n={declared_n} but the sample masks "
                              f"{len(ids)} function(s); stored n={len(ids)}")
            _check_sample_results(row, paper_id, ids, plan=plan, report=report)
            plan.samples[name] = _Sample(paper_id=paper_id, sample_id=name, n=len(ids), func_ids=sorted(ids))


def _check_sample_results(row: Row, paper_id: str, ids: list[int], *, plan: _Plan, report: ImportReport):
    """Report where a sample's copy of the gold ("Experiment 1..k") disagrees with mlrc_exps.csv.

    Upstream renumbers a sample's experiments 1..k in exp_id order; ours are derived from the
    dependencies, so this only reports, it never changes what is imported.
    """
    results = row.values.get("results")
    if not isinstance(results, dict):
        return
    ours = [e for (p, _), e in sorted(plan.experiments.items()) if p == paper_id and set(e.depends_on) & set(ids)]
    if len(results) != len(ours):
        report.skip(row.at("results"), f"{len(results)} experiment(s) but {len(ours)} imported experiment(s) of "
                    f"{paper_id} depend on functions {sorted(ids)}; the CSV experiments are used")
        return
    for index, experiment in enumerate(ours, start=1):
        theirs = results.get(f"Experiment {index}")
        if theirs != experiment.gold_result:
            report.skip(row.at(f"results.Experiment {index}"), f"disagrees with the gold of {EXPS} {paper_id} "
                        f"exp_id {experiment.exp_id}; the CSV gold is kept")


def _collect_details(files: list[tuple[int, list[Row]]]) -> dict[tuple[str, int], str]:
    """Function descriptions found in the samples' func_details (the CSV has no description column)."""
    found = {}
    for _, rows in files:
        for row in rows:
            details = row.values.get("func_details")
            for detail in details if isinstance(details, list) else []:
                if not isinstance(detail, dict):
                    continue
                func_id = parse_id(detail.get("func_id"))
                description = text_of(detail.get("description"))
                paper_id = text_of(detail.get("paper_id") or row.values.get("paper_id"))
                if func_id is not None and description:
                    found.setdefault((paper_id, func_id), description)
    return found


def _write(plan: _Plan, *, suite_name: str, metadata_dir: Path, code_dir: Path, report: ImportReport) -> Suite:
    suite = upsert(Suite, lookup={"name": suite_name}, report=report, kind="suite",
                   values={"version": "", "source_format": Suite.Format.UPSTREAM, "gold_root": str(code_dir.resolve()),
                           "description": f"Upstream AutoExperiment metadata imported from {metadata_dir.resolve()}"})
    for paper_plan in plan.papers.values():
        paper = upsert(Paper, lookup={"suite": suite, "paper_id": paper_plan.paper_id}, report=report, kind="paper",
                       values={"title": paper_plan.title, "text": paper_plan.text, "code_dir": paper_plan.code_dir,
                               "source_url": paper_plan.source_url, "environment": paper_plan.environment})
        functions = {}
        for (paper_id, func_id), spec in plan.functions.items():
            if paper_id == paper.paper_id:
                functions[func_id] = upsert(
                    Function, lookup={"paper": paper, "func_id": func_id}, report=report, kind="function",
                    values={"file": spec.file, "name": spec.name, "description": spec.description,
                            "relevant_paper": spec.relevant_paper, "line_hint": spec.line_hint},
                )
        delete_gone_functions(paper=paper, keep=set(functions), report=report, where=f"{FUNCS}: {paper.paper_id}")
        kept_experiments = set()
        for (paper_id, exp_id), spec in plan.experiments.items():
            if paper_id != paper.paper_id:
                continue
            kept_experiments.add(exp_id)
            # timeout_seconds and tolerances are not in upstream's data: left as set here or in the admin.
            experiment, created = upsert_tracked(
                Experiment, lookup={"paper": paper, "exp_id": exp_id}, report=report, kind="experiment",
                values={"description": spec.description, "command": spec.command,
                        "answer_format": spec.answer_format, "gold_result": spec.gold_result},
            )
            relation_sync(experiment.dependencies, [functions[i] for i in spec.depends_on], created=created,
                          report=report, kind="experiment dependencies")
        delete_gone_experiments(paper=paper, keep=kept_experiments, report=report, where=f"{EXPS}: {paper.paper_id}")
        for spec in plan.samples.values():
            if spec.paper_id != paper.paper_id:
                continue
            sample, created = upsert_tracked(Sample, lookup={"paper": paper, "sample_id": spec.sample_id},
                                             values={"n": spec.n}, report=report, kind="sample")
            relation_sync(sample.functions, [functions[i] for i in spec.func_ids], created=created,
                          report=report, kind="sample functions")
    delete_gone_papers(suite=suite, keep=set(plan.papers), report=report, where=f"{MAIN}")
    return suite


def import_upstream(*, metadata_dir: Path, code_dir: Path, suite_name: str = "upstream") -> tuple[Suite, ImportReport]:
    """Import upstream metadata from `metadata_dir`, with paper P's gold code at `<code_dir>/P/`.

    Sound rows are imported and every skipped or repaired row is in the report; only whole-file
    problems (a required file or column missing, a directory that does not exist) raise
    SuiteFormatError, before anything is written. The writes are one transaction, and importing
    the same data twice changes nothing the second time.
    """
    metadata_dir, code_dir = Path(metadata_dir), Path(code_dir)
    problems = []
    if not SLUG.match(suite_name) or len(suite_name) > 100:
        problems.append(f"suite name {suite_name!r} is not a slug (letters, digits, '-' and '_')")
    if not metadata_dir.is_dir():
        raise SuiteFormatError(f"{metadata_dir}: metadata directory not found")
    if not code_dir.is_dir():
        problems.append(f"{code_dir}: code directory not found (paper P's code is expected at {code_dir}/P/)")
    report = ImportReport()
    tables = {name: read_csv(metadata_dir / name, report=report, problems=problems) for name in REQUIRED_COLUMNS}
    existing = Suite.objects.filter(name=suite_name).exclude(source_format=Suite.Format.UPSTREAM).first()
    if existing is not None:
        problems.append(f"a suite named {suite_name!r} was imported from another format ({existing.source_format})")
    if problems:
        raise SuiteFormatError("the upstream metadata cannot be imported:\n" + "\n".join(f"  {p}" for p in problems))

    sample_files = []
    for path in sorted(metadata_dir.glob("mlrc_n=*.jsonl")):
        match = SAMPLE_FILE.match(path.name)
        if match is None:
            report.skip(f"{path.name}:0: file", "name does not start with mlrc_n=<number>; ignored")
            continue
        sample_files.append((int(match.group(1)), read_jsonl(path, report=report)))

    plan = _Plan()
    _plan_papers(tables[MAIN], metadata_dir=metadata_dir, code_dir=code_dir, plan=plan, report=report)
    _plan_functions(tables[FUNCS], stale=stale_rows(metadata_dir, "functions.jsonl", "func_id", report=report),
                    details=_collect_details(sample_files), plan=plan, report=report)
    _plan_experiments(tables[EXPS], stale=stale_rows(metadata_dir, "experiments.jsonl", "exp_id", report=report),
                      plan=plan, report=report)
    _plan_samples(sample_files, plan=plan, report=report)
    with transaction.atomic():
        suite = _write(plan, suite_name=suite_name, metadata_dir=metadata_dir, code_dir=code_dir, report=report)
        mark_suite_changed(suite, report)
    return suite, report
