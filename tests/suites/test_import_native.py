"""Importing a suite in our own format: strict validation, idempotent writes, the import_suite command."""
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.models import Experiment, Function, HeldOutCheck, Paper, Sample, Suite
from runs.suites.importers.common import SuiteFormatError
from runs.suites.importers.native import import_native_suite
from runs.suites.services import samples_ensure

pytestmark = pytest.mark.django_db


def snapshot() -> dict:
    """Every stored value of the benchmark tables, to prove a second import wrote nothing."""
    return {
        "suites": list(Suite.objects.values().order_by("pk")),
        "papers": list(Paper.objects.values().order_by("pk")),
        "functions": list(Function.objects.values().order_by("pk")),
        "experiments": list(Experiment.objects.values().order_by("pk")),
        "dependencies": sorted(Experiment.dependencies.through.objects.values_list("experiment_id", "function_id")),
        "samples": list(Sample.objects.values().order_by("pk")),
    }


def entries(entries_list) -> list[str]:
    return [str(entry) for entry in entries_list]


def test_good_suite_imports(native_suite):
    suite, report = import_native_suite(native_suite)

    assert (suite.name, suite.version, suite.source_format) == ("toy", "1.0", Suite.Format.NATIVE)
    assert suite.gold_root == str(native_suite.resolve())
    assert dict(report.created) == {"suite": 1, "paper": 1, "function": 4, "experiment": 2}
    paper = suite.papers.get()
    assert (paper.paper_id, paper.title) == ("toy-paper", "A Toy Paper")
    assert paper.text.startswith("# A Toy Paper\n")
    assert paper.code_dir == str((native_suite / "toy-paper" / "code").resolve())

    functions = {f.func_id: f for f in paper.functions.all()}
    assert [(f.file, f.name, f.line_hint) for f in functions.values()] == [
        ("model.py", "Loss.__call__", 5),
        ("model.py", "Other.__call__", 10),
        ("model.py", "train", 14),  # stored the real def line, not the stale hint 3
        ("utils/metrics.py", "mean", 1),  # no hint given: the def line is filled in
    ]
    assert functions[0].relevant_paper == "We double."
    assert functions[1].relevant_paper == ""

    first, second = paper.experiments.order_by("exp_id")
    assert first.gold_result == {"loss": 0.25, "curve": [1.0, 0.5]}
    assert first.gold_spread == 0.001
    assert first.answer_format == {"loss": 0.0, "curve": [0.0, 0.0]}
    assert (first.rtol, first.atol, first.timeout_seconds) == (None, None, 60)
    assert sorted(first.dependencies.values_list("func_id", flat=True)) == [0, 2]
    assert second.gold_result is None
    assert (second.rtol, second.atol, second.timeout_seconds) == (0.1, 1e-6, 30)
    assert sorted(second.dependencies.values_list("func_id", flat=True)) == [1, 3]

    assert entries(report.repaired) == [
        "toy-paper/paper.json: functions[2].line: stale line hint 3 (matches no definition): train is defined at "
        "line 14; stored 14"
    ]
    assert entries(report.skipped) == [
        "toy-paper/gold.json: results.1: no gold result yet: run `python manage.py make_gold toy`"
    ]
    assert "Repaired (1):" in report.render()


def test_bare_name_is_resolved_and_stored_qualified(tmp_path, native_suite_writer, native_paper):
    native_paper["functions"][1]["name"] = "__call__"  # the hint (line 10) chooses Other.__call__
    suite, report = import_native_suite(native_suite_writer(tmp_path / "toy", paper=native_paper))

    assert Function.objects.get(func_id=1).name == "Other.__call__"
    assert "toy-paper/paper.json: functions[1].name: '__call__' resolved to the qualified name " \
           "'Other.__call__', which is stored" in entries(report.repaired)


def test_importing_twice_changes_nothing(native_suite):
    import_native_suite(native_suite)
    before = snapshot()

    _, report = import_native_suite(native_suite)

    assert not report.changed_anything
    assert not report.created and not report.updated and not report.deleted
    assert dict(report.unchanged) == {"suite": 1, "paper": 1, "function": 4, "experiment": 2}
    # The stale hint and the missing gold are still reported: they are still true of the source.
    assert len(report.repaired) == 1 and len(report.skipped) == 1
    assert snapshot() == before  # including Suite.imported_at, which only moves on a real write


def test_a_reimport_that_only_edits_a_description_moves_imported_at(native_suite, native_suite_writer, native_paper):
    """The caches of a suite's downloads are keyed by `imported_at`: a docstring edited in place must
    make them stale, though no field of the suite's own row changed."""
    suite, _ = import_native_suite(native_suite)
    before = Suite.objects.get(pk=suite.pk).imported_at
    native_paper["functions"][0]["description"] = "Doubles x, carefully."
    native_suite_writer(native_suite, paper=native_paper)

    suite, report = import_native_suite(native_suite)

    assert dict(report.updated) == {"function": 1}
    assert Suite.objects.get(pk=suite.pk).imported_at > before


def test_reimport_updates_changed_rows_and_deletes_gone_ones(native_suite, native_suite_writer, native_paper,
                                                             native_gold):
    suite, _ = import_native_suite(native_suite)
    samples_ensure(suite=suite, n_values=[1, 2])
    assert Sample.objects.filter(functions__func_id=3).count() == 4  # {3} and {0,3}, {1,3}, {2,3}

    native_paper["functions"][0]["description"] = "Doubles x, carefully."
    del native_paper["functions"][3]
    native_paper["experiments"][1]["depends_on"] = [1]
    native_gold["results"]["1"] = {"mean": 2.5}
    native_suite_writer(native_suite, paper=native_paper, gold=native_gold)

    _, report = import_native_suite(native_suite)

    assert report.changed_anything
    # The dependency on function 3 went with the function, so the relation itself needs no update.
    assert report.updated == {"function": 1, "experiment": 1}
    assert report.deleted == {"function": 1, "sample": 4}
    assert Function.objects.get(func_id=0).description == "Doubles x, carefully."
    assert not Function.objects.filter(func_id=3).exists()
    assert Experiment.objects.get(exp_id=1).gold_result == {"mean": 2.5}
    assert list(Experiment.objects.get(exp_id=1).dependencies.values_list("func_id", flat=True)) == [1]
    # Samples that masked the deleted function are gone, the others stay untouched.
    assert not Sample.objects.filter(sample_id__endswith="3").exists()
    assert Sample.objects.count() == 3 + 3  # n=1: {0},{1},{2}; n=2: {0,1},{0,2},{1,2}
    removed = entries(report.removed)
    assert removed[-1] == "toy-paper/paper.json: functions: function 3 (utils/metrics.py:mean) is no longer in the source"
    assert "toy-paper_0,3" in removed[0]
    assert "Deleted (2):" in report.render()


def test_removing_a_paper_deletes_it(native_suite, native_paper):
    root = native_suite
    second = dict(native_paper, id="second-paper")
    (root / "second").mkdir()
    (root / "second" / "code").symlink_to(root / "toy-paper" / "code")
    (root / "second" / "paper.json").write_text(json.dumps(second))
    (root / "second" / "paper.md").write_text("# A Toy Paper\n")
    (root / "suite.json").write_text(json.dumps({"name": "toy", "papers": ["toy-paper", "second"]}))
    import_native_suite(root)
    assert Paper.objects.count() == 2

    (root / "suite.json").write_text(json.dumps({"name": "toy", "papers": ["toy-paper"]}))
    _, report = import_native_suite(root)

    assert list(Paper.objects.values_list("paper_id", flat=True)) == ["toy-paper"]
    assert report.deleted == {"paper": 1}
    assert entries(report.removed) == [
        "suite.json: papers: paper second-paper is no longer in the source (with its 4 function(s), "
        "2 experiment(s) and 0 sample(s))"
    ]


def pop(key):
    return lambda item: item.pop(key)


def set_(**values):
    return lambda item: item.update(values)


# case: (where to apply the change, the change, an expected line of the error message)
FORMAT_ERRORS = {
    "missing key": (
        "functions[1]", pop("name"), "toy-paper/paper.json: functions[1].name: missing required key",
    ),
    "wrong type": (
        "experiments[0]", set_(timeout="60"),
        "toy-paper/paper.json: experiments[0].timeout: expected a positive integer number of seconds, got '60'",
    ),
    "unknown key": (
        "experiments[0]", set_(timout=5), "toy-paper/paper.json: experiments[0].timout: unknown key",
    ),
    "duplicate function id": (
        "functions[3]", set_(id=0), "toy-paper/paper.json: functions[3].id: duplicate id 0 (also functions[0])",
    ),
    "duplicate experiment id": (
        "experiments[1]", set_(id=0),
        "toy-paper/paper.json: experiments[1].id: duplicate id 0 (also experiments[0])",
    ),
    "unknown dependency": (
        "experiments[0]", set_(depends_on=[0, 9]),
        "toy-paper/paper.json: experiments[0].depends_on: unknown function id(s) [9]",
    ),
    "missing file": (
        "functions[0]", set_(file="nope.py"), "toy-paper/paper.json: functions[0].file: 'nope.py': no such file in",
    ),
    "path escapes code": (
        "functions[0]", set_(file="../paper.md"),
        "toy-paper/paper.json: functions[0].file: '../paper.md' is not a relative path inside the code directory",
    ),
    "function not found": (
        "functions[0]", set_(name="Loss.forward"),
        "toy-paper/paper.json: functions[0].name: model.py: no function `Loss.forward`",
    ),
    "ambiguous name": (
        "functions[0]", set_(name="__call__", line=None),
        "toy-paper/paper.json: functions[0].name: model.py: `__call__` is ambiguous",
    ),
    "same function twice": (
        "functions[1]", set_(name="Loss.__call__", line=None),
        "toy-paper/paper.json: functions[1].name: same function as functions[0] (Loss.__call__ at line 5)",
    ),
    "answer format not an object": (
        "experiments[1]", set_(answer_format=[0.0]),
        "toy-paper/paper.json: experiments[1].answer_format: expected an object",
    ),
    "negative tolerance": (
        "experiments[1]", set_(rtol=-0.1),
        "toy-paper/paper.json: experiments[1].rtol: expected null or a non-negative number, got -0.1",
    ),
    "gold for unknown experiment": (
        "gold.results", set_(**{"7": {"mean": 1.0}}),
        "toy-paper/gold.json: results.7: no experiment with id '7' in paper.json",
    ),
    "gold shape differs from answer format": (
        "gold.results", set_(**{"0": {"loss": 0.25}}),
        "toy-paper/gold.json: results.0: has the shape {\"loss\": 0.0} but the experiment's answer_format is",
    ),
    "gold with NaN": (
        "gold.results", set_(**{"0": {"loss": float("nan"), "curve": [1.0, 2.0]}}),
        "toy-paper/gold.json: invalid JSON: NaN is not allowed in JSON",
    ),
    "title differs": (
        "paper.md", "# Another Title\n",
        "toy-paper/paper.md: line 1: title 'Another Title' differs from paper.json title 'A Toy Paper'",
    ),
    "suite name not a slug": (
        "suite", {"name": "my suite", "papers": ["toy-paper"]}, "suite.json: name: 'my suite' is not a slug",
    ),
    "paper directory missing": (
        "suite", {"name": "toy", "papers": ["toy-paper", "elsewhere"]},
        "suite.json: papers: 'elsewhere': no such directory in the suite",
    ),
}


@pytest.mark.parametrize("case", FORMAT_ERRORS, ids=list(FORMAT_ERRORS))
def test_format_error_is_reported_with_file_and_path_and_nothing_is_stored(
    tmp_path, native_suite_writer, native_paper, native_gold, case
):
    target, change, expected = FORMAT_ERRORS[case]
    arguments = {"paper": native_paper, "gold": native_gold}
    if target == "suite":
        arguments["suite"] = change
    elif target == "paper.md":
        arguments["paper_md"] = change
    elif target == "gold.results":
        change(native_gold["results"])
    else:
        section, index = target.rstrip("]").split("[")
        change(native_paper[section][int(index)])
    root = native_suite_writer(tmp_path / "toy", **arguments)

    with pytest.raises(SuiteFormatError) as raised:
        import_native_suite(root)

    assert expected in str(raised.value)
    assert not Suite.objects.exists()


def test_every_problem_is_listed_at_once(tmp_path, native_suite_writer, native_paper):
    native_paper["functions"][0]["file"] = "missing.py"
    native_paper["functions"][2]["description"] = ""
    native_paper["experiments"][0]["depends_on"] = [0, 8]
    native_paper["experiments"][1]["command"] = 5
    root = native_suite_writer(tmp_path / "toy", paper=native_paper, paper_md="No heading\n")
    (root / "suite.json").write_text(json.dumps({"name": "toy", "papers": ["toy-paper"], "extra": 1}))

    with pytest.raises(SuiteFormatError) as raised:
        import_native_suite(root)

    lines = str(raised.value).splitlines()
    assert lines[0] == f"{root}: the suite cannot be imported (6 problem(s)):"
    assert [line.split(": ")[0:2] for line in lines[1:]] == [
        ["  suite.json", "extra"],
        ["  toy-paper/paper.md", "line 1"],
        ["  toy-paper/paper.json", "functions[0].file"],
        ["  toy-paper/paper.json", "functions[2].description"],
        ["  toy-paper/paper.json", "experiments[0].depends_on"],
        ["  toy-paper/paper.json", "experiments[1].command"],
    ]


def test_unreadable_json_names_the_file_and_position(native_suite):
    root = native_suite
    (root / "toy-paper" / "paper.json").write_text('{"id": "toy-paper",\n "title": }')

    with pytest.raises(SuiteFormatError, match=r"toy-paper/paper.json: invalid JSON at line 2 column 11"):
        import_native_suite(root)


@pytest.mark.parametrize("literal, shown", [("1e999", "inf"), ("-1e999", "-inf"), ("1" + "0" * 400, "1" + "0" * 39)])
def test_a_spread_beyond_float_range_is_refused(tmp_path, native_suite_writer, native_gold, literal, shown):
    # json reads 1e999 as inf (NaN and Infinity themselves are refused on reading): a spread without end.
    native_gold.update(repeats=3, spreads={"0": {"loss": {"min": 0.25, "max": 12345.5}}})
    root = native_suite_writer(tmp_path / "toy", gold=native_gold)
    gold_file = root / "toy-paper" / "gold.json"
    gold_file.write_text(gold_file.read_text().replace("12345.5", literal))

    with pytest.raises(SuiteFormatError) as raised:
        import_native_suite(root)

    assert (f'toy-paper/gold.json: spreads.0.loss: "max" must be a finite number, got {shown} (beyond the range of a float)'
            in str(raised.value))
    assert not Suite.objects.exists()


def test_a_gold_number_beyond_float_range_is_refused(tmp_path, native_suite_writer, native_gold):
    root = native_suite_writer(tmp_path / "toy", gold=native_gold)
    gold_file = root / "toy-paper" / "gold.json"
    gold_file.write_text(gold_file.read_text().replace("0.5", "-1e999"))  # curve[1]

    with pytest.raises(SuiteFormatError) as raised:
        import_native_suite(root)

    assert ("toy-paper/gold.json: results.0.curve[1]: must be a finite number, got a literal beyond the range of a float"
            in str(raised.value))
    assert not Suite.objects.exists()


def test_missing_suite_json(tmp_path):
    (tmp_path / "empty").mkdir()
    with pytest.raises(SuiteFormatError, match="suite.json: file not found"):
        import_native_suite(tmp_path / "empty")


def test_failed_reimport_leaves_the_previous_import_intact(native_suite, native_suite_writer, native_paper):
    import_native_suite(native_suite)
    before = snapshot()
    native_paper["title"] = "Changed"  # would be an update...
    native_paper["functions"][3]["name"] = "median"  # ...but this is an error, so nothing is written
    native_suite_writer(native_suite, paper=native_paper, paper_md="# Changed\n")

    with pytest.raises(SuiteFormatError, match=r"functions\[3\].name: utils/metrics.py: no function `median`"):
        import_native_suite(native_suite)

    assert snapshot() == before


def test_suite_name_taken_by_an_upstream_import(native_suite):
    Suite.objects.create(name="toy", source_format=Suite.Format.UPSTREAM, gold_root="/x")
    with pytest.raises(SuiteFormatError, match="suite.json: name: a suite named 'toy' was imported from another format"):
        import_native_suite(native_suite)


def test_import_suite_command_imports_and_draws_samples(native_suite):
    out = StringIO()
    call_command("import_suite", str(native_suite), "--samples", "1,2", stdout=out)

    output = out.getvalue()
    assert "function: 4 created, 0 updated, 0 unchanged" in output
    assert "stale line hint 3" in output
    assert "Samples of suite toy (seed 0, cap 100 per paper and n):\n  n=1: 4\n  n=2: 6\n" in output
    assert Sample.objects.filter(n=2).count() == 6

    again = StringIO()
    call_command("import_suite", str(native_suite), "--samples", "2", "--cap", "3", stdout=again)
    assert "function: 0 created, 0 updated, 4 unchanged" in again.getvalue()
    assert "n=2: 6" in again.getvalue()  # existing samples are kept; the cap only limits new draws


def test_import_suite_command_without_samples(native_suite):
    out = StringIO()
    call_command("import_suite", str(native_suite), "--samples", "", stdout=out)
    assert "Samples" not in out.getvalue()
    assert not Sample.objects.exists()


def test_import_suite_command_fails_with_the_problems(tmp_path, native_suite_writer, native_paper):
    native_paper["functions"][0].pop("file")
    root = native_suite_writer(tmp_path / "toy", paper=native_paper)
    with pytest.raises(CommandError, match=r"toy-paper/paper.json: functions\[0\].file: missing required key"):
        call_command("import_suite", str(root), stdout=StringIO())
    with pytest.raises(CommandError, match="--samples 'a': expected comma-separated numbers"):
        call_command("import_suite", str(root), "--samples", "a", stdout=StringIO())
    assert not Suite.objects.exists()


# --- hidden variants (held-out checks) ---------------------------------------------------------------


def test_hidden_variants_are_imported_with_their_gold_and_kept_apart_from_the_experiments(
    tmp_path, native_suite_writer, native_paper, native_gold
):
    native_paper["experiments"][0]["held_out"] = [{"id": 0, "command": "python3 run.py --seed 9"},
                                                  {"id": 3, "command": "python3 run.py --seed 11"}]
    native_gold["held_out"] = {"0": {"0": {"result": {"loss": 0.5, "curve": [2.0, 1.0]}, "spread": 0.0}}}
    root = native_suite_writer(tmp_path / "toy", paper=native_paper, gold=native_gold)

    suite, report = import_native_suite(root)

    variants = HeldOutCheck.objects.filter(experiment__paper__suite=suite).order_by("variant_id")
    assert [(v.experiment.exp_id, v.variant_id, v.command) for v in variants] == [
        (0, 0, "python3 run.py --seed 9"), (0, 3, "python3 run.py --seed 11"),
    ]
    assert variants[0].gold_result == {"loss": 0.5, "curve": [2.0, 1.0]} and variants[1].gold_result is None
    assert report.created["held-out check"] == 2
    assert any("toy-paper/gold.json: held_out.0.3: no gold result for a hidden variant yet" in entry
               for entry in entries(report.skipped))
    assert Experiment.objects.count() == 2, "a variant is no experiment: nothing that lists experiments sees it"

    del native_paper["experiments"][0]["held_out"][1]
    native_suite_writer(root, paper=native_paper, gold=native_gold)
    _, again = import_native_suite(root)
    assert list(HeldOutCheck.objects.values_list("variant_id", flat=True)) == [0]
    assert again.deleted["held-out check"] == 1


def test_hidden_variant_problems_are_named_with_file_and_path(tmp_path, native_suite_writer, native_paper, native_gold):
    native_paper["experiments"][0]["held_out"] = [{"id": 0, "command": ""}, {"id": 0, "command": "x"}]
    native_paper["experiments"][1]["held_out"] = [{"id": 1, "command": "python3 run.py", "seed": 2}]
    native_gold["held_out"] = {"1": {"1": {"result": {"other": 1.0}}, "7": {"result": {"mean": 1.0}}}, "5": {}}
    root = native_suite_writer(tmp_path / "toy", paper=native_paper, gold=native_gold)

    with pytest.raises(SuiteFormatError) as raised:
        import_native_suite(root)

    problems = str(raised.value).splitlines()[1:]
    assert any("experiments[0].held_out: lists a variant id more than once" in line for line in problems), problems
    assert any("experiments[1].held_out[0].seed: unknown key" in line for line in problems), problems
    assert any("gold.json: held_out.5: no experiment with id '5'" in line for line in problems), problems
    assert HeldOutCheck.objects.count() == 0 and Suite.objects.count() == 0
