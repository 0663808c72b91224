"""make_gold (repeats, stability, --check) and validate_suite on a small suite written by the test,
run in the bubblewrap sandbox; the native format's stability fields."""
import json
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.benchmark.execution import ExperimentOutcome
from runs.benchmark.stability import drift_rows
from runs.evaluation.verdicts import score_answer, score_dict
from runs.models import Experiment, HeldOutCheck, Paper, Run, Suite
from runs.suites.gold import GoldCheck, ValidationReport, _stability, scoring_tolerances
from runs.suites.importers.common import SuiteFormatError
from runs.suites.importers.native import import_native_suite
from runs.suites.selectors import sample_experiments
from runs.suites.services import samples_ensure
from tests.leaderboard.factories import PASS, make_attempt, make_run
from tests.support import require_backend, standings_refreshed

pytestmark = pytest.mark.django_db

MODEL = '''\
def scale(values, factor):
    """Multiply every value by the factor."""
    out = []
    for value in values:
        out.append(value * factor)
    return out


def total(values):
    """Sum of squares of the values."""
    acc = 0.0
    for value in values:
        acc += value ** 2
    return acc
'''
# --noisy multiplies the result by 10**u, u uniform in [0, 6): three runs all within a few percent
# of each other (stable by chance) happen about once in 10^5 tries.
RUN = '''\
import json, os, sys
from model import scale, total
factor = float(sys.argv[1])
noise = 10 ** (6 * int.from_bytes(os.urandom(4), "big") / 2**32) if "--noisy" in sys.argv else 1.0
key = "k" + os.urandom(8).hex() if "--random-key" in sys.argv else "total"
print(json.dumps({key: total(scale([1.0, 2.0, 3.0], factor)) * noise}))
'''


def toy_paper(commands):
    return {
        "id": "toy-paper",
        "title": "A Toy Paper",
        "functions": [
            {"id": 0, "file": "model.py", "name": "scale", "description": "Scale.", "line": 1},
            {"id": 1, "file": "model.py", "name": "total", "description": "Sum of squares.", "line": 9},
        ],
        "experiments": [
            {"id": i, "description": f"Run {i}.", "command": command, "answer_format": {"total": 0.0},
             "depends_on": [0, 1], "timeout": 30}
            for i, command in enumerate(commands)
        ],
    }


@pytest.fixture(autouse=True)
def bubblewrap(settings):
    require_backend("bubblewrap")
    settings.SANDBOX_BACKEND = "bubblewrap"


def write(native_suite_writer, tmp_path, commands, *, suite=None):
    return native_suite_writer(
        tmp_path / "toy", paper=toy_paper(commands), gold=None, code={"model.py": MODEL, "run.py": RUN}, suite=suite
    )


def test_make_gold_runs_the_gold_code_and_stores_what_it_printed(native_suite_writer, tmp_path):
    root = write(native_suite_writer, tmp_path, ["python3 run.py 2", "python3 run.py 0.5"])
    import_native_suite(root)
    out = StringIO()
    call_command("make_gold", "toy", stdout=out)  # three repeats by default

    gold = {e.exp_id: (e.gold_result, e.gold_spread, e.gold_repeats, e.gold_spreads, e.gold_unstable)
            for e in Experiment.objects.all()}
    assert gold == {
        0: ({"total": 56.0}, 0.0, 3, {"total": {"min": 56.0, "max": 56.0}}, False),
        1: ({"total": 3.5}, 0.0, 3, {"total": {"min": 3.5, "max": 3.5}}, False),
    }
    assert "gold stability: 0 of 2 experiments unstable" in out.getvalue()
    document = json.loads((root / "toy-paper" / "gold.json").read_text())
    assert document["results"] == {"0": {"total": 56.0}, "1": {"total": 3.5}}
    assert (document["repeats"], document["unstable"]) == (3, [])
    assert document["spreads"] == {"0": {"total": {"min": 56.0, "max": 56.0}}, "1": {"total": {"min": 3.5, "max": 3.5}}}
    assert document["generated_by"] == "python manage.py make_gold"
    # The stored gold survives a re-import: it is what the importer reads back.
    suite, report = import_native_suite(root)
    assert not report.changed_anything


def test_make_gold_refuses_crashes_and_differing_keys_and_stores_nothing(native_suite_writer, tmp_path):
    root = write(native_suite_writer, tmp_path,
                 ["python3 run.py 2", "python3 run.py 2 --random-key", "python3 missing.py"])
    import_native_suite(root)
    with pytest.raises(CommandError) as error:
        call_command("make_gold", "toy", "--repeats", "2", stdout=StringIO())
    message = str(error.value)
    assert "toy-paper experiment 1: run 1 and run 2 printed different keys" in message
    assert "toy-paper experiment 2: run 1 of 2: exited with status 2" in message
    assert not Experiment.objects.exclude(gold_result=None).exists()
    assert not (root / "toy-paper" / "gold.json").exists()
    with pytest.raises(CommandError, match="at least 2 repeats"):
        call_command("make_gold", "toy", "--repeats", "1", stdout=StringIO())


def test_a_noisy_experiment_is_marked_unstable_and_scored_by_the_suites_policy(native_suite_writer, tmp_path, client):
    root = write(native_suite_writer, tmp_path, ["python3 run.py 2", "python3 run.py 2 --noisy"])
    suite, _ = import_native_suite(root)
    out = StringIO()
    call_command("make_gold", "toy", "--repeats", "3", stdout=out)
    assert "gold stability: 1 of 2 experiments unstable" in out.getvalue()
    assert "UNSTABLE: toy-paper experiment 1" in out.getvalue()

    stable, noisy = Experiment.objects.select_related("paper__suite").order_by("exp_id")
    assert (stable.gold_unstable, stable.gold_spreads, stable.gold_spread) == (False, {"total": {"min": 56.0, "max": 56.0}}, 0.0)
    spread = noisy.gold_spreads["total"]
    gold = noisy.gold_result["total"]
    assert noisy.gold_unstable and noisy.gold_repeats == 3 and spread["min"] <= gold <= spread["max"]
    assert spread["max"] - spread["min"] > 0.5 * 0.05 * gold  # more than half its tolerance
    document = json.loads((root / "toy-paper" / "gold.json").read_text())
    assert document["unstable"] == [1] and document["spreads"]["1"] == noisy.gold_spreads
    assert not import_native_suite(root)[1].changed_anything  # read back as written

    # Policy "widen" (the default): the noisy experiment is scored with a tolerance covering its spread.
    sample = samples_ensure(suite=suite, n_values=[1])[0]
    experiments = sample_experiments(sample=sample)
    assert [e.exp_id for e in experiments] == [0, 1]
    # Read with its paper and suite (scoring reads the policy), not with the paper's text on every row.
    assert "text" in experiments[0].paper.get_deferred_fields() and experiments[0].paper.suite.unstable_policy
    _, _, widened = scoring_tolerances(noisy)
    widened_rtol = widened["total"][0]
    assert widened_rtol > 0.05
    halfway = {"Experiment 1": {"total": 56.0}, "Experiment 2": {"total": gold + (spread["max"] - spread["min"]) / 2}}
    score = score_dict(score_answer(experiments=experiments, answer=halfway), experiments)
    assert score["passed"]
    assert [(e["exp_id"], e["rtol"], e["numbers"][0].get("rtol")) for e in score["experiments"]] == [
        (0, 0.05, None), (1, 0.05, widened_rtol)]
    beyond = gold + 2 * (spread["max"] - spread["min"]) + 1  # farther from gold than any gold run
    wrong = {"Experiment 1": {"total": 56.0}, "Experiment 2": {"total": beyond}}
    assert not score_answer(experiments=experiments, answer=wrong).passed

    # Policy "exclude", declared in suite.json: the noisy experiment is not scored, the stable one is.
    write(native_suite_writer, tmp_path, ["python3 run.py 2", "python3 run.py 2 --noisy"],
          suite={"name": "toy", "version": "1.0", "papers": ["toy-paper"], "unstable_policy": "exclude"})
    (root / "toy-paper" / "gold.json").write_text(json.dumps(document))
    import_native_suite(root)
    assert Suite.objects.get(name="toy").unstable_policy == Suite.UnstablePolicy.EXCLUDE
    experiments = sample_experiments(sample=sample)
    score = score_dict(score_answer(experiments=experiments, answer={"Experiment 1": {"total": 56.0}}), experiments)
    assert score["passed"] and [e["exp_id"] for e in score["experiments"]] == [0]
    assert not score_answer(experiments=experiments, answer={"Experiment 1": {"total": 50.0}, "Experiment 2": {"total": gold}}).passed
    # A sample with nothing but unstable experiments falls back to widening: it must stay passable.
    alone = [experiments[1]]
    assert score_answer(experiments=alone, answer={"total": gold + (spread["max"] - spread["min"]) / 2}).passed
    assert not score_answer(experiments=alone, answer={"total": beyond}).passed

    # The leaderboard says so next to the suite's systems.
    make_attempt(make_run(suite), sample, 0, PASS)
    standings_refreshed()
    page = client.get("/").content.decode()
    note = re.sub(r"<[^>]+>", "", re.search(r'<p class="lb-note" id="gold-stability">(.*?)</p>', page).group(1))
    assert note == ("Gold stability (toy): 1 of 2 experiments unstable (policy: excluded from scoring); passes are not "
                    "held-out checked (2 of 2 experiments have no hidden variant; implementations holding a gold "
                    "number are failed instead).")
    assert 'href="/benchmark/toy/"' in page
    assert client.get("/?format=json").json()["gold_stability"] == [
        {"suite": "toy", "experiments": 2, "unstable": 1, "policy": "exclude", "held_out_checked": False}]
    assert Run.objects.count() == 1


def test_make_gold_check_reports_drift_per_number_and_writes_nothing(native_suite_writer, tmp_path):
    root = write(native_suite_writer, tmp_path, ["python3 run.py 2", "python3 run.py 0.5"])
    import_native_suite(root)
    call_command("make_gold", "toy", "--repeats", "2", stdout=StringIO())
    out = StringIO()
    call_command("make_gold", "toy", "--check", stdout=out)
    assert "2 numbers checked over 1 run(s): 0 drifted beyond tolerance" in out.getvalue()

    Experiment.objects.filter(exp_id=1).update(gold_result={"total": 3.9})  # what another machine might have made
    gold_file = root / "toy-paper" / "gold.json"
    stored_file = gold_file.read_bytes()
    stored_rows = list(Experiment.objects.order_by("exp_id").values())
    out = StringIO()
    with pytest.raises(CommandError, match="1 number\\(s\\) beyond tolerance"):
        call_command("make_gold", "toy", "--check", "--repeats", "2", stdout=out)
    lines = out.getvalue().splitlines()
    assert "toy-paper experiment 0 total: stored 56.0, now 56.0, relative drift 0.00e+00: ok" in lines
    assert [line for line in lines if "DRIFTED" in line] == [
        "toy-paper experiment 1 total: stored 3.9, now 3.5, relative drift 1.03e-01: DRIFTED beyond tolerance"
    ]
    assert gold_file.read_bytes() == stored_file
    assert list(Experiment.objects.order_by("exp_id").values()) == stored_rows


def test_validate_suite_reports_masks_and_mutants(native_suite_writer, tmp_path):
    root = write(native_suite_writer, tmp_path, ["python3 run.py 2", "python3 run.py 0.5"])
    import_native_suite(root)
    call_command("make_gold", "toy", stdout=StringIO())
    out = StringIO()
    call_command("validate_suite", "toy", "--mutants", "4", stdout=out)
    table = out.getvalue()
    assert "toy-paper#0 scale" in table and "toy-paper#1 total" in table
    assert "NO" not in table
    caught, tried = re.search(r"mutants caught: (\d+)/(\d+)", table).groups()
    assert caught == tried and int(tried) >= 5  # `*`->`/` in scale; `**2`, `+=`, `0.0`, zeroed return in total
    crash, wrong = map(int, re.search(rf"mutants: {tried} tried: (\d+) crash, (\d+) print wrong numbers, 0 survive", table).groups())
    assert crash + wrong == int(tried) and wrong >= 4  # each of the above runs and prints a wrong total
    assert re.search(r"toy-paper experiment 0 +stable, largest spread 0 of tolerance", table)
    assert "gold stability: 0 of 2 experiments unstable (policy: scored with a tolerance widened" in table


def test_validate_suite_checks_papers_at_once_with_the_same_report(native_suite_writer, tmp_path):
    """--jobs: papers checked in threads of their own, which read nothing from the database (they
    could not see this test's uncommitted suite); the table is the one a paper at a time gives."""
    root = write(native_suite_writer, tmp_path, ["python3 run.py 2", "python3 run.py 0.5"])
    (root / "toy-paper").rename(root / "toy-paper-b")  # a second paper: the first one again, renamed
    paper = toy_paper(["python3 run.py 3"])
    (root / "toy-paper-b" / "paper.json").write_text(json.dumps({**paper, "id": "toy-paper-b"}))
    write(native_suite_writer, tmp_path, ["python3 run.py 2", "python3 run.py 0.5"],
          suite={"name": "toy", "version": "1.0", "description": "Two papers.", "papers": ["toy-paper", "toy-paper-b"]})
    import_native_suite(root)
    call_command("make_gold", "toy", "--repeats", "2", stdout=StringIO())

    tables = []
    for jobs in ("1", "2"):
        call_command("validate_suite", "toy", "--mutants", "2", "--repeats", "2", "--jobs", jobs, stdout=(out := StringIO()))
        tables.append(out.getvalue())
    assert tables[0] == tables[1]
    labels = [line.split()[0] for line in tables[1].splitlines() if "#" in line]
    assert labels == ["toy-paper#0", "toy-paper#1", "toy-paper-b#0", "toy-paper-b#1"]  # in the papers' order
    assert "gold stability: 0 of 3 experiments unstable" in tables[1]
    with pytest.raises(CommandError, match="at least 1 job, got 0"):
        call_command("validate_suite", "toy", "--jobs", "0", stdout=StringIO())


def test_make_gold_and_validate_suite_run_the_hidden_variants(native_suite_writer, tmp_path):
    paper = toy_paper(["python3 run.py 2", "python3 run.py 0.5"])
    paper["experiments"][0]["held_out"] = [{"id": 0, "command": "python3 run.py 3"}]
    root = native_suite_writer(tmp_path / "toy", paper=paper, gold=None, code={"model.py": MODEL, "run.py": RUN})
    import_native_suite(root)
    out = StringIO()
    call_command("make_gold", "toy", stdout=out)

    variant = HeldOutCheck.objects.get()
    assert (variant.gold_result, variant.gold_repeats, variant.gold_unstable) == ({"total": 126.0}, 3, False)
    assert 'toy-paper experiment 0 held-out variant 0: {"total": 126.0} (stable' in out.getvalue()
    assert "gold stability: 0 of 2 experiments unstable, 0 of 1 hidden variants (policy:" in out.getvalue()
    document = json.loads((root / "toy-paper" / "gold.json").read_text())
    assert document["results"] == {"0": {"total": 56.0}, "1": {"total": 3.5}}, "variants stay apart from results"
    assert document["held_out"] == {"0": {"0": {"result": {"total": 126.0}, "spread": 0.0, "unstable": False,
                                                "spreads": {"total": {"min": 126.0, "max": 126.0}}}}}
    assert not import_native_suite(root)[1].changed_anything  # read back as written

    out = StringIO()
    call_command("validate_suite", "toy", "--mutants", "4", stdout=out)
    table = out.getvalue()
    assert "held-out checks: 1 hidden variants; 2 of 2 functions have some among their dependent experiments" in table
    assert "gold passes every variant: yes" in table
    assert "noop (the function masked) fails its variants: 2/2 functions" in table
    # The variants run on the mutants the experiments let through, as in re-execution.
    survived = int(re.search(r"mutants: \d+ tried: \d+ crash, \d+ print wrong numbers, (\d+) survive", table).group(1))
    caught, tried, crash, wrong, survive = map(int, re.search(
        r"mutants the public experiments let through, caught by the variants: (\d+)/(\d+) "
        r"\((\d+) crash, (\d+) print wrong numbers, (\d+) survive both\)", table).groups())
    assert tried == survived and caught == crash + wrong and caught + survive == tried
    assert re.search(r"toy-paper experiment 0 held-out variant 0 +stable, largest spread 0 of tolerance", table)
    assert "held-out gold stability: 0 of 1 hidden variants unstable" in table

    # A variant whose gold the code does not reproduce makes the suite invalid, named.
    HeldOutCheck.objects.update(gold_result={"total": 1.0})
    with pytest.raises(CommandError):
        call_command("validate_suite", "toy", "--mutants", "1", stdout=(out := StringIO()))
    assert "GOLD FAILS: toy-paper experiment 0 held-out variant 0: numbers differ from gold" in out.getvalue()


def test_validate_suite_reports_an_unstable_experiment_and_refuses_one_not_marked(native_suite_writer, tmp_path):
    root = write(native_suite_writer, tmp_path, ["python3 run.py 2", "python3 run.py 2 --noisy"])
    import_native_suite(root)
    call_command("make_gold", "toy", "--repeats", "2", stdout=StringIO())
    out = StringIO()
    call_command("validate_suite", "toy", "--mutants", "1", stdout=out)  # marked: the policy handles it
    assert re.search(r"toy-paper experiment 1 +UNSTABLE, largest spread", out.getvalue())
    assert "gold stability: 1 of 2 experiments unstable" in out.getvalue()

    Experiment.objects.filter(exp_id=1).update(gold_unstable=False)
    out = StringIO()
    with pytest.raises(CommandError, match="must be marked so by make_gold"):
        call_command("validate_suite", "toy", "--mutants", "1", stdout=out)
    assert "UNSTABLE but stored as stable: re-run make_gold" in out.getvalue()


def test_validate_suite_fails_when_a_function_does_not_matter(native_suite_writer, tmp_path):
    paper = toy_paper(["python3 run.py 2"])
    paper["functions"].append({"id": 2, "file": "extra.py", "name": "unused", "description": "Unused.", "line": 1})
    paper["experiments"][0]["depends_on"] = [0, 1, 2]
    root = native_suite_writer(
        tmp_path / "toy", paper=paper, gold=None,
        code={"model.py": MODEL, "run.py": RUN, "extra.py": "def unused(x):\n    return x + 1\n"},
    )
    import_native_suite(root)
    call_command("make_gold", "toy", stdout=StringIO())
    out = StringIO()
    with pytest.raises(CommandError, match="suite is not valid"):
        call_command("validate_suite", "toy", stdout=out)
    assert [line for line in out.getvalue().splitlines() if "#2 unused" in line][0].split()[3] == "NO"


GOLD = {"results": {"0": {"total": 56.0}}, "repeats": 3, "spreads": {"0": {"total": {"min": 55.0, "max": 57.0}}},
        "unstable": [0]}


@pytest.mark.parametrize(
    "suite_extra, gold_change, problem",
    [
        ({"unstable_policy": "drop"}, {}, 'suite.json: unstable_policy: expected "widen" or "exclude", got \'drop\''),
        ({}, {"spreads": {"0": {"loss": {"min": 1.0, "max": 2.0}}}},
         "toy-paper/gold.json: spreads.0.loss: not a number of the experiment's gold result"),
        ({}, {"spreads": {"0": {"total": {"min": 58.0, "max": 57.0}}}},
         'toy-paper/gold.json: spreads.0.total: "min" 58.0 is larger than "max" 57.0'),
        ({}, {"spreads": {"0": {"total": {"min": "55"}}}},
         'toy-paper/gold.json: spreads.0.total: expected {"min": number, "max": number}'),
        ({}, {"spreads": {"3": {}}}, "toy-paper/gold.json: spreads.3: no experiment with id '3' in paper.json"),
        ({}, {"spreads": {}}, "toy-paper/gold.json: unstable[0]: experiment 0 is marked unstable but has no spreads"),
        ({}, {"unstable": [0, 4]}, "toy-paper/gold.json: unstable[1]: no experiment with id 4 in paper.json"),
        ({}, {"unstable": "0"}, "toy-paper/gold.json: unstable: expected an array of experiment ids, got '0'"),
        ({}, {"repeats": 0}, "toy-paper/gold.json: repeats: expected a positive number of gold runs, got 0"),
    ],
)
def test_the_native_format_checks_the_stability_fields(native_suite_writer, tmp_path, suite_extra, gold_change, problem):
    suite = {"name": "toy", "version": "1.0", "papers": ["toy-paper"], **suite_extra}
    root = native_suite_writer(tmp_path / "toy", paper=toy_paper(["python3 run.py 2"]), gold={**GOLD, **gold_change},
                               code={"model.py": MODEL, "run.py": RUN}, suite=suite)
    with pytest.raises(SuiteFormatError) as error:
        import_native_suite(root)
    assert problem in str(error.value)
    assert not Suite.objects.exists()


def test_the_native_format_reads_the_stability_fields(native_suite_writer, tmp_path):
    root = native_suite_writer(tmp_path / "toy", paper=toy_paper(["python3 run.py 2"]), gold=GOLD,
                               code={"model.py": MODEL, "run.py": RUN})
    suite, _ = import_native_suite(root)
    experiment = Experiment.objects.get()
    assert suite.unstable_policy == Suite.UnstablePolicy.WIDEN
    assert (experiment.gold_repeats, experiment.gold_spreads, experiment.gold_unstable) == (3, GOLD["spreads"]["0"], True)


def gold_run(result) -> ExperimentOutcome:
    return ExperimentOutcome(exp_id=0, result=result, error=None, output=json.dumps(result), exit_code=0,
                             timed_out=False, duration=0.1)


@pytest.mark.parametrize("second_run, problem", [
    ({"k0123": 56.0}, "run 1 and run 2 printed different keys: ['k0123', 'total']"),
    ({"total": "n/a"}, "total: not a finite number in every run, and the runs differ: [56.0, 'n/a']"),
])
def test_gold_runs_that_cannot_be_compared_make_the_suite_invalid(second_run, problem):
    # validate_suite's repeated gold runs as `_stability` gets them (no sandbox needed): runs printing
    # another key (run.py --random-key) or another non-number have no spread, so no policy covers them.
    experiment = Experiment(paper=Paper(paper_id="toy-paper"), exp_id=0, gold_result={"total": 56.0})
    stability = _stability(experiment, [gold_run({"total": 56.0}), gold_run(second_run)])
    report = ValidationReport(stability=[stability])
    assert not stability.handled and not report.passed(min_catch_rate=0.0)
    assert re.search(rf"toy-paper experiment 0 +NOT COMPARABLE over runs: {re.escape(problem)}$", report.table(), re.M)
    # A value printed as NaN in every run is the same in every run: comparable, and stable.
    nan_runs = [gold_run({"total": 56.0, "loss": float("nan")}) for _ in range(2)]
    stable = _stability(Experiment(paper=experiment.paper, exp_id=0, gold_result={"total": 56.0, "loss": "NaN"}), nan_runs)
    assert stable.handled and stable.describe() == "stable, largest spread 0 of tolerance"


def test_make_gold_check_shows_a_key_the_stored_gold_lacks_as_not_scored():
    experiment = Experiment(paper=Paper(paper_id="toy-paper"), exp_id=0, gold_result={"total": 56.0})
    rows = drift_rows(experiment.gold_result, [{"total": 56.0, "seconds": 1.5}], 0.05, 1e-8)
    check = GoldCheck(repeats=1, rows=[(experiment, row) for row in rows])
    assert check.lines() == [
        "toy-paper experiment 0 total: stored 56.0, now 56.0, relative drift 0.00e+00: ok",
        "toy-paper experiment 0 seconds: stored None, now 1.5, relative drift n/a: new key, not scored",
    ]
    assert check.drifted == []
