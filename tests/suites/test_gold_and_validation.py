"""make_gold and validate_suite on a small suite written by the test, run in the bubblewrap sandbox."""
import json
import re
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.models import Experiment
from runs.suites.importers.native import import_native_suite
from tests.support import require_backend

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
RUN = '''\
import json, os, sys
from model import scale, total
factor = float(sys.argv[1])
noise = int.from_bytes(os.urandom(2), "big") / 1e3 if "--noisy" in sys.argv else 0.0
print(json.dumps({"total": total(scale([1.0, 2.0, 3.0], factor)) + noise}))
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


def write(native_suite_writer, tmp_path, commands):
    return native_suite_writer(
        tmp_path / "toy", paper=toy_paper(commands), gold=None, code={"model.py": MODEL, "run.py": RUN}
    )


def test_make_gold_runs_the_gold_code_and_stores_what_it_printed(native_suite_writer, tmp_path):
    root = write(native_suite_writer, tmp_path, ["python3 run.py 2", "python3 run.py 0.5"])
    import_native_suite(root)
    call_command("make_gold", "toy", stdout=StringIO())

    gold = {e.exp_id: (e.gold_result, e.gold_spread) for e in Experiment.objects.all()}
    assert gold == {0: ({"total": 56.0}, 0.0), 1: ({"total": 3.5}, 0.0)}
    document = json.loads((root / "toy-paper" / "gold.json").read_text())
    assert document["results"] == {"0": {"total": 56.0}, "1": {"total": 3.5}}
    assert document["generated_by"] == "python manage.py make_gold"
    # The stored gold survives a re-import: it is what the importer reads back.
    suite, report = import_native_suite(root)
    assert not report.changed_anything


def test_make_gold_refuses_noisy_or_broken_experiments_and_stores_nothing(native_suite_writer, tmp_path):
    root = write(native_suite_writer, tmp_path, ["python3 run.py 2", "python3 run.py 2 --noisy", "python3 missing.py"])
    import_native_suite(root)
    with pytest.raises(CommandError) as error:
        call_command("make_gold", "toy", stdout=StringIO())
    message = str(error.value)
    assert "toy-paper experiment 1: total:" in message and "limit" in message
    assert "toy-paper experiment 2: exited with status 2" in message
    assert not Experiment.objects.exclude(gold_result=None).exists()
    assert not (root / "toy-paper" / "gold.json").exists()


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
