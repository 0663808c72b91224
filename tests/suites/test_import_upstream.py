"""Importing the upstream release's metadata: every quirk reported, nothing ever crashes, idempotent."""
import csv
import shutil
from io import StringIO
from pathlib import Path

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.benchmark.masking import MaskTarget, mask_source
from runs.models import Experiment, Function, Paper, Sample, Suite
from runs.suites.importers.common import SuiteFormatError
from runs.suites.importers.upstream import import_upstream
from runs.suites.importers.upstream_functions import renamed_at_hint

pytestmark = pytest.mark.django_db


def snapshot() -> dict:
    return {
        "suites": list(Suite.objects.values().order_by("pk")),
        "papers": list(Paper.objects.values().order_by("pk")),
        "functions": list(Function.objects.values().order_by("pk")),
        "experiments": list(Experiment.objects.values().order_by("pk")),
        "dependencies": sorted(Experiment.dependencies.through.objects.values_list("experiment_id", "function_id")),
        "samples": list(Sample.objects.values().order_by("pk")),
        "sample functions": sorted(Sample.functions.through.objects.values_list("sample_id", "function_id")),
    }


def entries(report) -> list[str]:
    return [str(entry) for entry in report.skipped + report.repaired]


def copy_metadata(source: Path, target: Path) -> Path:
    # copyfile, not copytree: the fixture is read-only and copytree would copy that too.
    target.mkdir()
    for path in source.iterdir():
        shutil.copyfile(path, target / path.name)
    return target


def edit_csv(path: Path, edit) -> None:
    """Rewrite a CSV through `edit(rows)` (a list of dicts it may change in place or replace)."""
    with open(path, newline="", encoding="utf-8") as handle:
        reader = csv.reader(handle)
        header = next(reader)
        rows = [dict(zip(header, record)) for record in reader]
    rows = edit(rows) or rows
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\r\n")
        writer.writerow(header)
        writer.writerows([[row.get(column, "") for column in header] for row in rows])


def row_of(rows, paper_id: str, id_column: str, number: int) -> dict:
    return next(row for row in rows if row["paper_id"] == paper_id and row[id_column] == str(number))


def function(paper_id: str, func_id: int) -> Function:
    return Function.objects.get(paper__paper_id=paper_id, func_id=func_id)


def experiment(paper_id: str, exp_id: int) -> Experiment:
    return Experiment.objects.get(paper__paper_id=paper_id, exp_id=exp_id)


def dependencies(paper_id: str, exp_id: int) -> list[int]:
    return sorted(experiment(paper_id, exp_id).dependencies.values_list("func_id", flat=True))


def test_fixture_imports_with_its_quirks_reported(upstream_metadata, upstream_code):
    suite, report = import_upstream(metadata_dir=upstream_metadata, code_dir=upstream_code)

    assert (suite.name, suite.source_format, suite.gold_root) == ("upstream", Suite.Format.UPSTREAM, str(upstream_code.resolve()))
    assert report.created == {"suite": 1, "paper": 5, "function": 8 + 15, "experiment": 4 + 12, "sample": 3}
    found = entries(report)

    # Papers: all five rows imported; three have no code, so only their paper row is stored.
    papers = {paper.paper_id: paper for paper in suite.papers.all()}
    assert papers["2205.00048"].code_dir == str((upstream_code / "2205.00048").resolve())
    assert papers["2309.05569"].code_dir == ""
    assert papers["2303.11932"].source_url == "https://github.com/ryan-ott/model-guidance-reproducibility/tree/main"
    assert not Function.objects.filter(paper__paper_id__in=["2309.05569", "2203.01928", "2110.03485"]).exists()
    assert (f"mlrc_main.csv:2: code: no code directory {upstream_code / '2309.05569'} (nor "
            f"{upstream_metadata / '2309.05569' / 'code'}): paper imported without code; its functions, experiments "
            "and samples are skipped") in found
    assert "mlrc_funcs.csv:85: row: paper 2309.05569 has no code directory" in found
    assert "mlrc_exps.csv:64: row: paper 2110.03485 has no code directory" in found
    assert ("mlrc_main.csv:6: text: no paper text: none of papers/2205.00048.md, papers/2205.00048.txt, "
            "2205.00048/paper.md, 2205.00048/paper.txt in the metadata directory; paper text left empty") in found

    # Blank rows (five ",,,,,,," lines) are skipped, with the line numbers a person sees in an editor.
    assert [e for e in found if e.endswith("blank row")] == [f"mlrc_funcs.csv:{n}: row: blank row" for n in range(348, 353)]

    # Results given as a Python literal with list values are parsed, and the answer format keeps the lists.
    assert "mlrc_exps.csv:60: result: a Python literal, not JSON; parsed with ast.literal_eval" in found
    movielens = experiment("2205.00048", 0)
    assert movielens.gold_result["IIF"] == [0.00022957766970338144]
    assert len(movielens.answer_format) == 18 and set(map(str, movielens.answer_format.values())) == {"[0.0]"}
    assert movielens.command == "python src/run_metric.py --ndatapoints 1 --conduct sh --model Pop --age N"
    assert experiment("2303.11932", 0).answer_format == {"IoU": 0.0}
    assert dependencies("2303.11932", 0) == [0, 4, 5, 6, 7, 8, 9, 10]

    # Bare names are resolved by the line hint (or else the line_start..line_end span) among same-named
    # defs and stored qualified.
    assert [(function("2303.11932", i).name, function("2303.11932", i).line_hint) for i in range(4)] == [
        ("F0.__call__", 68), ("F1.__call__", 90), ("F2.__call__", 120), ("F3.__call__", 107)]
    assert (function("2303.11932", 8).name, function("2303.11932", 8).line_hint) == ("F8.update", 170)
    assert function("2205.00048", 0).name == "II_F"
    # Stale hints: the real def line is stored and the repair reported with the rule that found it.
    assert ("mlrc_funcs.csv:39: header_line: stale line hint 105 (the def in the row's span 106-117): F3.__call__ "
            "is defined at line 107; stored 107") in found
    assert ("mlrc_funcs.csv:257: header_line: stale line hint 88 (matches no definition): GG_F is defined at "
            "line 90; stored 90") in found
    assert function("2205.00048", 3).line_hint == 90

    # Descriptions: the CSV has none; 2205.00048's come from its functions.jsonl, 2303.11932 has none anywhere.
    assert function("2205.00048", 0).description.startswith("Performs certain calculations on energy systems")
    assert function("2205.00048", 0).relevant_paper.startswith("We refer to the expected exposure")
    assert function("2303.11932", 3).description == ""
    assert ("mlrc_funcs.csv:39: description: none in mlrc_funcs.csv, 2303.11932.functions.jsonl, "
            "2303.11932/functions.jsonl or the samples' func_details; left empty, so the masked stub gets no "
            "docstring") in found
    assert not [e for e in found if e.startswith("mlrc_funcs.csv:177: description")]

    # The stale experiments.jsonl: disagreements reported, the CSV kept, renumbering explained.
    assert ("2205.00048.experiments.jsonl:1: result: IIF=0.00014674579181979676 disagrees with mlrc_exps.csv:60 "
            "(IIF=[0.00022957766970338144]); the CSV value is kept") in found
    assert ("2205.00048.experiments.jsonl:5: row: experiment 4 of 2205.00048 has no usable row in mlrc_exps.csv (the CSV is "
            "the source of truth); ignored (its command is that of mlrc_exps.csv exp_id 2: the jsonl numbering is "
            "stale)") in found

    # Samples from mlrc_n=1.sample.jsonl.
    samples = Sample.objects.filter(paper__suite=suite).order_by("sample_id")
    assert [(s.sample_id, s.n, [f.func_id for f in s.functions.all()]) for s in samples] == [
        ("2205.00048_0", 1, [0]), ("2205.00048_1", 1, [1]), ("2205.00048_2", 1, [2])]
    # Their copies of the gold agree with the CSV here, so nothing is reported about them.
    assert not [e for e in found if e.startswith("mlrc_n=1")]


def test_importing_twice_changes_nothing(upstream_metadata, upstream_code):
    _, first = import_upstream(metadata_dir=upstream_metadata, code_dir=upstream_code)
    before = snapshot()

    _, second = import_upstream(metadata_dir=upstream_metadata, code_dir=upstream_code)

    assert not second.changed_anything
    assert second.unchanged == {"suite": 1, "paper": 5, "function": 23, "experiment": 16, "sample": 3}
    assert entries(second) == entries(first)
    assert snapshot() == before


def test_paper_text_and_a_function_without_header_line(tmp_path, upstream_metadata, upstream_code_writer):
    metadata = copy_metadata(upstream_metadata, tmp_path / "meta")
    (metadata / "papers").mkdir()
    (metadata / "papers" / "2205.00048.md").write_text("# Joint Multisided Exposure Fairness\n\nProse.\n")
    code = upstream_code_writer(tmp_path / "code", paper_ids=("2205.00048", "2203.01928"))

    suite, report = import_upstream(metadata_dir=metadata, code_dir=code, suite_name="mlrc")

    assert suite.name == "mlrc"
    assert Paper.objects.get(paper_id="2205.00048").text.startswith("# Joint Multisided")
    assert ("mlrc_funcs.csv:353: header_line: empty; consistency_feature_importance found by name at line 61; "
            "stored 61") in entries(report)
    # 2203.01928 has a function but no experiment in mlrc_exps.csv: nothing depends on it, nothing breaks.
    assert function("2203.01928", 0).line_hint == 61
    assert not Experiment.objects.filter(paper__paper_id="2203.01928").exists()


# Upstream's losses.py in miniature: four `__call__` in four classes, as in 2303.11932.
LOSSES = """\
import torch


class BBMultipleLoss:
    def __call__(self, attributions, bb_coordinates):
        raise NotImplementedError


class EnergyLoss(BBMultipleLoss):
    def __init__(self):
        self.only_positive = False

    def __call__(self, attributions, bb_coordinates):
        positive = attributions.clamp(min=0)
        return 1 - positive.sum()


class RRRLoss(BBMultipleLoss):
    def __call__(self, attributions, bb_coordinates):
        return (attributions ** 2).sum()


class GradiaLoss(BBMultipleLoss):
    def __call__(self, attributions, bb_coordinates):
        return attributions.abs().sum()


class ImgDataset:
    def prepare_data_list(self):
        return []
"""


def write_csv(path: Path, header: list[str], rows: list[list]) -> None:
    with open(path, "w", newline="", encoding="utf-8") as handle:
        writer = csv.writer(handle, lineterminator="\r\n")
        writer.writerow(header)
        writer.writerows(rows)


def write_upstream_release(root: Path, upstream_metadata: Path) -> Path:
    """A release in upstream's own layout: metadata CSVs beside one folder per paper (paper.txt, code/)."""
    root.mkdir()
    shutil.copyfile(upstream_metadata / "mlrc_main.csv", root / "mlrc_main.csv")  # the fixture's five papers
    with open(upstream_metadata / "mlrc_funcs.csv", newline="", encoding="utf-8") as handle:
        header = next(csv.reader(handle))
    assert header == ["paper_id", "func_id", "file", "name", "header_line", "line_start", "line_end", "relevant_paper"]
    write_csv(root / "mlrc_funcs.csv", header, [
        ["2303.11932", 0, "losses.py", "__call__", 9, 14, 15, "Energy loss."],  # hint: `class EnergyLoss`
        ["2303.11932", 1, "losses.py", "__call__", 18, 20, 20, "RRR loss."],  # hint: `class RRRLoss`
        ["2303.11932", 2, "losses.py", "__call__", 22, 24, 25, "L1 loss."],  # hint: a blank line; the span decides
        ["2303.11932", 3, "losses.py", "__call__", 2, "", "", "Base."],  # nothing decides: ambiguous
        ["2303.11932", 4, "losses.py", "__init__", 10, "x", 12, ""],  # an exact hint and an unusable span
        ["2303.11932", 5, "losses.py", "prepare_datalist", 29, 30, 30, "List."],  # renamed; the def line agrees
        ["2303.11932", 6, "losses.py", "prepare_datalist", 28, 30, 30, "List."],  # renamed; only a similar name
    ])
    write_csv(root / "mlrc_exps.csv", ["paper_id", "exp_id", "description", "result", "func_dependencies", "solution"], [
        ["2303.11932", 0, 'Train with the energy loss. Return {"IoU": 0.0}.', '{"IoU": 0.5}', "0,1,2,3",
         "python train.py --localization_loss_fn Energy"],
    ])
    (root / "mlrc_n=1.jsonl").write_text('{"paper_id": "2303.11932", "func_ids": "1"}\n')
    guide = root / "2303.11932"
    (guide / "code").mkdir(parents=True)
    (guide / "code" / "losses.py").write_text(LOSSES)
    (guide / "paper.txt").write_text("Guide Models with Explanations\n\nBounding boxes — naïvely.\n")
    (guide / "functions.jsonl").write_text(
        '{"paper_id": "2303.11932", "func_id": "0", "header_line": 8, "description": "Compute the Energy loss."}\n')
    (root / "2309.05569").mkdir()
    (root / "2309.05569" / "paper.txt").write_bytes(b"ITI-GEN \xff prompts\x00\n")  # not UTF-8, and a NUL
    (root / "papers").mkdir()
    (root / "papers" / "2205.00048.md").write_text("# Joint Multisided Exposure Fairness\n")  # overrides paper.txt
    (root / "2205.00048").mkdir()
    (root / "2205.00048" / "paper.txt").write_text("upstream's copy\n")
    return root


def test_upstream_layout_paper_folders_and_line_hints_resolved_by_evidence(tmp_path, upstream_metadata):
    release = write_upstream_release(tmp_path / "MLRC", upstream_metadata)

    # The release as it is: each paper's code is its own folder's code/.
    suite, report = import_upstream(metadata_dir=release, code_dir=release)
    found = entries(report)

    texts = dict(Paper.objects.filter(suite=suite).values_list("paper_id", "text"))
    assert texts == {
        "2303.11932": "Guide Models with Explanations\n\nBounding boxes — naïvely.\n",
        "2205.00048": "# Joint Multisided Exposure Fairness\n",
        "2309.05569": "ITI-GEN \ufffd prompts\n",
        "2110.03485": "",
        "2203.01928": "",
    }
    assert ("mlrc_main.csv:2: text: 2309.05569/paper.txt is not valid UTF-8 (invalid start byte at byte 8); read "
            "with every undecodable byte replaced by U+FFFD") in found
    assert "mlrc_main.csv:2: text: 2309.05569/paper.txt holds 1 NUL character(s); removed" in found
    assert ("mlrc_main.csv:5: text: no paper text: none of papers/2110.03485.md, papers/2110.03485.txt, "
            "2110.03485/paper.md, 2110.03485/paper.txt in the metadata directory; paper text left empty") in found
    assert [e for e in found if ": text: " in e and "2205.00048" in e] == []
    assert Paper.objects.get(paper_id="2303.11932").code_dir == str((release / "2303.11932" / "code").resolve())

    functions = {f.func_id: (f.name, f.line_hint) for f in Function.objects.filter(paper__paper_id="2303.11932")}
    assert functions == {0: ("EnergyLoss.__call__", 13), 1: ("RRRLoss.__call__", 19), 2: ("GradiaLoss.__call__", 24),
                         4: ("EnergyLoss.__init__", 10), 5: ("ImgDataset.prepare_data_list", 29)}
    assert function("2303.11932", 0).description == "Compute the Energy loss."  # from 2303.11932/functions.jsonl
    no_description = ("none in mlrc_funcs.csv, 2303.11932.functions.jsonl, 2303.11932/functions.jsonl or the "
                      "samples' func_details; left empty, so the masked stub gets no docstring")
    assert [e for e in found if e.startswith(("mlrc_funcs.csv", "2303.11932/"))] == [
        "2303.11932/functions.jsonl:1: header_line: '8' disagrees with mlrc_funcs.csv:2 ('9'); the CSV value is kept",
        "mlrc_funcs.csv:5: name: losses.py: `__call__` is ambiguous: 4 definitions match (`BBMultipleLoss.__call__` "
        "at line 5, `EnergyLoss.__call__` at line 13, `RRRLoss.__call__` at line 19, `GradiaLoss.__call__` at line "
        "24) and no evidence picks one (line hint 2 is in none of them nor on the statement of a class defining one; "
        "no span); give the qualified name or the def line as hint",
        "mlrc_funcs.csv:8: name: losses.py: no function `prepare_datalist` (line hint 28); did you mean "
        "`ImgDataset.prepare_data_list` at line 29?",
        "mlrc_funcs.csv:2: header_line: stale line hint 9 (a class line: the method inside class EnergyLoss): "
        "EnergyLoss.__call__ is defined at line 13; stored 13",
        "mlrc_funcs.csv:3: header_line: stale line hint 18 (a class line: the method inside class RRRLoss): "
        "RRRLoss.__call__ is defined at line 19; stored 19",
        "mlrc_funcs.csv:3: description: " + no_description,
        "mlrc_funcs.csv:4: header_line: stale line hint 22 (the def in the row's span 24-25): GradiaLoss.__call__ is "
        "defined at line 24; stored 24",
        "mlrc_funcs.csv:4: description: " + no_description,
        "mlrc_funcs.csv:6: line_start: 'x' is not a line number; the row's span is not used",
        "mlrc_funcs.csv:6: description: " + no_description,
        "mlrc_funcs.csv:7: name: no function `prepare_datalist` in losses.py, but `ImgDataset.prepare_data_list` is "
        "defined at the hinted line 29 and its name differs only in underscores or case; ImgDataset.prepare_data_list "
        "stored",
        "mlrc_funcs.csv:7: description: " + no_description,
    ]
    # The ambiguous row is not guessed: experiment 0 depends on the three resolved functions only.
    assert dependencies("2303.11932", 0) == [0, 1, 2]
    assert "mlrc_exps.csv:2: func_dependencies: function 3 is not imported (mlrc_funcs.csv:5 was skipped); dropped" \
        in found
    assert list(Sample.objects.values_list("sample_id", flat=True)) == ["2303.11932_1"]

    # The stored (name, def line) pairs mask exactly the methods chosen, and a second import changes nothing.
    masked = mask_source(LOSSES, [MaskTarget(name, "", line_hint=line) for name, line in functions.values()])
    assert [location.qualified_name for location in masked.locations] == [name for name, _ in functions.values()]
    assert masked.notes == []
    _, again = import_upstream(metadata_dir=release, code_dir=release)
    assert not again.changed_anything


def test_a_renamed_function_keeps_the_qualifier_the_csv_gives():
    # LOSSES defines ImgDataset.prepare_data_list at line 29: the CSV's other spelling resolves to it
    # only if its class (when given) is that one too.
    assert renamed_at_hint(LOSSES, "prepare_datalist", 29) == "ImgDataset.prepare_data_list"
    assert renamed_at_hint(LOSSES, "imgdataset.PrepareDataList", 29) == "ImgDataset.prepare_data_list"
    assert renamed_at_hint(LOSSES, "TextDataset.prepare_datalist", 29) is None
    assert renamed_at_hint(LOSSES, "Outer.ImgDataset.prepare_datalist", 29) is None


def test_corrupted_rows_are_skipped_or_repaired_and_the_rest_imported(tmp_path, upstream_metadata, upstream_code):
    metadata = copy_metadata(upstream_metadata, tmp_path / "meta")

    def break_functions(rows):
        row_of(rows, "2205.00048", "func_id", 7)["func_id"] = "seven"  # line 318
        row_of(rows, "2303.11932", "func_id", 9)["name"] = "missing_fn"  # line 45
        row_of(rows, "2303.11932", "func_id", 6)["file"] = "../../outside.py"  # line 42
        row_of(rows, "2303.11932", "func_id", 5)["header_line"] = "about 118"  # line 41
        row_of(rows, "2303.11932", "func_id", 7)["line_start"] = ""  # line 43
        row_of(rows, "2303.11932", "func_id", 8)["line_end"] = "100"  # line 44: before line_start 171
        rows.append(dict(row_of(rows, "2205.00048", "func_id", 0)))  # an identical duplicate at the end
        rows.append({"paper_id": "9999.99999", "func_id": "0", "file": "x.py", "name": "f"})
    edit_csv(metadata / "mlrc_funcs.csv", break_functions)

    def break_experiments(rows):
        row_of(rows, "2303.11932", "exp_id", 1)["result"] = '{"IoU": 0.09'  # line 3
        row_of(rows, "2303.11932", "exp_id", 2)["result"] = '{"IoU": "high"}'  # line 4
        row_of(rows, "2303.11932", "exp_id", 3)["result"] = "[0.1]"  # line 5
        row_of(rows, "2303.11932", "exp_id", 4)["func_dependencies"] = "2,4,99"  # line 6
        row_of(rows, "2303.11932", "exp_id", 5)["func_dependencies"] = "99, x"  # line 7
        row_of(rows, "2303.11932", "exp_id", 6)["solution"] = "  "  # line 8
        row_of(rows, "2303.11932", "exp_id", 7)["exp_id"] = "-7"  # line 9
        row_of(rows, "2303.11932", "exp_id", 8)["result"] = '{"IoU": NaN}'  # line 10
    edit_csv(metadata / "mlrc_exps.csv", break_experiments)
    with open(metadata / "mlrc_exps.csv", "a", newline="") as handle:
        handle.write("2205.00048,9,too few fields\r\n")  # line 70

    with open(metadata / "mlrc_n=1.sample.jsonl", "a") as handle:
        handle.write("\n{not json\n")  # lines 4 and 5
        handle.write('{"paper_id": "2205.00048", "func_ids": "0,99"}\n')  # line 6
        handle.write('{"paper_id": "2205.00048", "func_ids": "1"}\n')  # line 7: duplicate of line 2
        handle.write('{"paper_id": "2205.00048", "func_ids": "a,b"}\n')  # line 8
        handle.write('{"paper_id": "2205.00048", "func_ids": "3,4"}\n')  # line 9: n=2 in an n=1 file
        handle.write('["a list"]\n')  # line 10

    suite, report = import_upstream(metadata_dir=metadata, code_dir=upstream_code)
    found = entries(report)

    expected = [
        "mlrc_funcs.csv:318: func_id: 'seven' is not a non-negative integer",
        "mlrc_funcs.csv:42: file: '../../outside.py' is not a relative path inside the code directory",
        "mlrc_funcs.csv:41: header_line: 'about 118' is not a line number; ignored",
        "mlrc_funcs.csv:43: line_start: empty while the other end is given; the row's span is not used",
        "mlrc_funcs.csv:44: line_end: 100 is before line_start 171; the row's span is not used",
        "mlrc_funcs.csv:373: row: identical duplicate of line 177 (2205.00048 func_id 0); the first is kept",
        # The duplicate's relevant_paper spans 30 lines, so the next record starts at line 403.
        "mlrc_funcs.csv:403: paper_id: paper '9999.99999' is not in mlrc_main.csv",
        "2205.00048.functions.jsonl:8: row: function 7 of 2205.00048 has no usable row in mlrc_funcs.csv (the CSV "
        "is the source of truth); ignored",
        "mlrc_exps.csv:4: result: value at 'IoU' is 'high', not a number; experiment skipped (stale jsonl results "
        "are never used as gold)",
        "mlrc_exps.csv:5: result: expected a non-empty object of numbers, got list '[0.1]'; experiment skipped "
        "(stale jsonl results are never used as gold)",
        "mlrc_exps.csv:6: func_dependencies: function 99 is not in mlrc_funcs.csv; dropped",
        "mlrc_exps.csv:7: func_dependencies: 'x' is not a function id; dropped",
        "mlrc_exps.csv:7: func_dependencies: function 99 is not in mlrc_funcs.csv; dropped",
        "mlrc_exps.csv:7: func_dependencies: no importable function dependencies remain; experiment skipped",
        "mlrc_exps.csv:8: solution: empty (no command to run)",
        "mlrc_exps.csv:9: exp_id: '-7' is not a non-negative integer",
        "mlrc_exps.csv:70: row: has 3 fields but the header has 6",
        "mlrc_exps.csv:2: func_dependencies: function 9 is not imported (mlrc_funcs.csv:45 was skipped); dropped",
        "mlrc_n=1.sample.jsonl:4: row: blank line",
        "mlrc_n=1.sample.jsonl:7: row: duplicate of mlrc_n=1.sample.jsonl:2 (sample 2205.00048_1)",
        "mlrc_n=1.sample.jsonl:8: func_ids: 'a,b' is not a list of function ids",
        "mlrc_n=1.sample.jsonl:9: func_ids: the file name says n=1 but the sample masks 2 function(s); stored n=2",
        "mlrc_n=1.sample.jsonl:10: row: expected a JSON object, got list",
    ]
    missing = [line for line in expected if line not in found]
    assert not missing, "\n".join(missing + ["--- report:", report.render()])
    prefixes = [
        "mlrc_funcs.csv:45: name: attribution_methods.py: no function `missing_fn`",
        "mlrc_exps.csv:3: result: neither JSON (",
        "mlrc_exps.csv:10: result: neither JSON (NaN is not allowed in JSON) nor a Python literal",
        "mlrc_n=1.sample.jsonl:5: row: not valid JSON:",
        "mlrc_n=1.sample.jsonl:6: func_ids: masks function(s) that are not imported (99: not in mlrc_funcs.csv)",
    ]
    for prefix in prefixes:
        assert any(line.startswith(prefix) for line in found), prefix

    # The sound rows are all there.
    assert not Function.objects.filter(paper__paper_id="2205.00048", func_id=7).exists()
    assert not Function.objects.filter(paper__paper_id="2303.11932", func_id__in=[6, 9]).exists()
    assert function("2303.11932", 5).line_hint == 118  # found by name; the hint was unusable
    assert Function.objects.filter(paper__suite=suite).count() == 23 - 3
    assert sorted(Experiment.objects.filter(paper__paper_id="2303.11932").values_list("exp_id", flat=True)) == [
        0, 4, 9, 10, 11]
    assert dependencies("2303.11932", 0) == [0, 4, 5, 7, 8, 10]  # 6 and 9 were skipped functions
    assert dependencies("2303.11932", 4) == [2, 4]  # "2,4,99"
    assert sorted(Sample.objects.values_list("sample_id", "n")) == [
        ("2205.00048_0", 1), ("2205.00048_1", 1), ("2205.00048_2", 1), ("2205.00048_3,4", 2)]


@pytest.mark.parametrize("file, column", [("mlrc_exps.csv", "result"), ("mlrc_funcs.csv", "func_id"),
                                          ("mlrc_main.csv", "paper_id")])
def test_a_missing_required_column_is_a_whole_file_error(tmp_path, upstream_metadata, upstream_code, file, column):
    metadata = copy_metadata(upstream_metadata, tmp_path / "meta")
    text = (metadata / file).read_bytes().decode()
    header, rest = text.split("\r\n", 1)
    (metadata / file).write_bytes((header.replace(column, f"{column}_renamed") + "\r\n" + rest).encode())

    with pytest.raises(SuiteFormatError) as raised:
        import_upstream(metadata_dir=metadata, code_dir=upstream_code)

    assert f"{file}: line 1: missing required column '{column}'" in str(raised.value)
    assert not Suite.objects.exists()


def test_missing_files_and_directories_are_named(tmp_path, upstream_metadata, upstream_code):
    metadata = copy_metadata(upstream_metadata, tmp_path / "meta")
    (metadata / "mlrc_main.csv").unlink()
    (metadata / "mlrc_exps.csv").write_text("")

    with pytest.raises(SuiteFormatError) as raised:
        import_upstream(metadata_dir=metadata, code_dir=tmp_path / "no-code", suite_name="bad name")

    message = str(raised.value)
    assert "suite name 'bad name' is not a slug" in message
    assert f"{tmp_path / 'no-code'}: code directory not found" in message
    assert f"mlrc_main.csv: file not found in {metadata}" in message
    assert "mlrc_exps.csv: empty file (expected a header row)" in message
    with pytest.raises(SuiteFormatError, match="metadata directory not found"):
        import_upstream(metadata_dir=tmp_path / "nowhere", code_dir=upstream_code)


def test_garbage_in_any_cell_never_crashes(tmp_path, upstream_metadata, upstream_code):
    garbage = ["", "   ", "x", "-1", "1e3", "99999999999999", "{", "[1, 2]", "None", "0,,1", "\x00", "ünï", "../.."]
    metadata = copy_metadata(upstream_metadata, tmp_path / "meta")
    original = {name: (metadata / name).read_bytes() for name in ("mlrc_main.csv", "mlrc_funcs.csv", "mlrc_exps.csv")}
    count = 0
    for name in original:
        with open(metadata / name, newline="", encoding="utf-8") as handle:
            header = next(csv.reader(handle))
        for column in header:
            value = garbage[count % len(garbage)]
            count += 1
            (metadata / name).write_bytes(original[name])
            # The 2205.00048 rows, which have code, so the garbage reaches the deepest checks.

            def spoil(rows):
                for row in rows:
                    if row.get("paper_id") == "2205.00048":
                        row[column] = value

            edit_csv(metadata / name, spoil)
            import_upstream(metadata_dir=metadata, code_dir=upstream_code)
        (metadata / name).write_bytes(original[name])
    _, report = import_upstream(metadata_dir=metadata, code_dir=upstream_code)
    assert report.created or report.updated or report.unchanged


def test_reimport_deletes_rows_gone_from_the_csv(tmp_path, upstream_metadata, upstream_code):
    metadata = copy_metadata(upstream_metadata, tmp_path / "meta")
    import_upstream(metadata_dir=metadata, code_dir=upstream_code)
    edit_csv(metadata / "mlrc_funcs.csv",
             lambda rows: [row for row in rows if not (row["paper_id"] == "2205.00048" and row["func_id"] == "0")])

    _, report = import_upstream(metadata_dir=metadata, code_dir=upstream_code)

    assert report.deleted == {"function": 1, "sample": 1}
    assert not Sample.objects.filter(sample_id="2205.00048_0").exists()
    assert dependencies("2205.00048", 0) == [1, 2, 3, 4, 5, 6]
    assert "mlrc_exps.csv:60: func_dependencies: function 0 is not in mlrc_funcs.csv; dropped" in entries(report)
    assert "mlrc_n=1.sample.jsonl:1: func_ids: masks function(s) that are not imported (0: not in mlrc_funcs.csv)" \
        in entries(report)
    assert [str(e) for e in report.removed] == [
        "mlrc_funcs.csv: 2205.00048: sample(s) 2205.00048_0: they mask function 0, which is gone",
        "mlrc_funcs.csv: 2205.00048: function 0 (src/utils/evaluation_functions/fairness_metrics.py:II_F) is no "
        "longer in the source",
    ]


def test_suite_name_taken_by_a_native_suite(upstream_metadata, upstream_code):
    Suite.objects.create(name="upstream", source_format=Suite.Format.NATIVE, gold_root="/x")
    with pytest.raises(SuiteFormatError, match="a suite named 'upstream' was imported from another format"):
        import_upstream(metadata_dir=upstream_metadata, code_dir=upstream_code)


def test_import_upstream_command(upstream_metadata, upstream_code):
    out = StringIO()
    call_command("import_upstream", "--metadata", str(upstream_metadata), "--code", str(upstream_code),
                 "--suite", "mlrc", stdout=out)
    output = out.getvalue()
    assert "function: 23 created, 0 updated, 0 unchanged" in output
    assert "  - mlrc_funcs.csv:348: row: blank row" in output
    assert output.rstrip().endswith("Suite mlrc: 5 paper(s).")

    with pytest.raises(CommandError, match="metadata directory not found"):
        call_command("import_upstream", "--metadata", str(upstream_code / "nowhere"), "--code", str(upstream_code),
                     stdout=StringIO())


def test_a_papers_requirements_become_its_environment_and_what_cannot_be_translated_is_reported(upstream_metadata, upstream_code):
    (upstream_code / "2205.00048" / "requirements.txt").write_text("torch==2.13.0\nnumpy==1.26.4\n")
    (upstream_code / "2303.11932" / "environment.yml").write_text(
        "dependencies:\n  - pytorch=1.10.0\n  - cudatoolkit=11.3\n  - pip:\n    - tqdm>=4\n"
    )
    _, report = import_upstream(metadata_dir=upstream_metadata, code_dir=upstream_code)

    assert Paper.objects.get(paper_id="2205.00048").environment == {
        "requirements": ["torch==2.13.0", "numpy==1.26.4"], "debian_packages": [],
    }
    assert Paper.objects.get(paper_id="2303.11932").environment is None
    reported = "\n".join(entries(report))
    assert "2303.11932/environment.yml dependencies[1]" in reported and "CUDA toolkit" in reported
    assert "2303.11932/environment.yml dependencies[2].pip[0]" in reported and "tqdm>=4" in reported
    assert "the paper runs with the sandboxes' default until one is written" in reported
