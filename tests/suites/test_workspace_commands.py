"""build_workspace and audit_leaks, end to end through the database and the management commands."""
import json
from io import StringIO

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from runs.models import Sample
from runs.suites.importers.native import import_native_suite
from runs.suites.services import samples_ensure

pytestmark = pytest.mark.django_db

CODE = {
    "model.py": (
        "import math\n"
        "\n"
        "\n"
        "class Loss:\n"
        "    def __call__(self, x):\n"
        "        scaled = [value * 2.0 for value in x]\n"
        "        return math.fsum(scaled) / max(len(scaled), 1)\n"
        "\n"
        "\n"
        "class Other:\n"
        "    def __call__(self, x):\n"
        "        shifted = [value + 1.0 for value in x]\n"
        "        return math.fsum(shifted) / max(len(shifted), 1)\n"
        "\n"
        "\n"
        "def train(steps):\n"
        "    history = [1.0 / (step + 1) for step in range(steps)]\n"
        "    return history[-1] if history else float('nan')\n"
    ),
    "utils/metrics.py": "def mean(values):\n    total = sum(values)\n    return total / len(values)\n",
    "run.py": "print('{\"loss\": 1.0}')\n",
}


@pytest.fixture
def imported(tmp_path, native_suite_writer, native_paper, native_gold):
    native_paper["functions"][2]["line"] = 16
    native_gold["results"] = {"0": {"loss": 0.2512345, "curve": [1.0, 0.5]}}
    root = native_suite_writer(tmp_path / "toy", paper=native_paper, gold=native_gold, code=CODE)
    suite, _ = import_native_suite(root)
    samples_ensure(suite=suite, n_values=[1, 2])
    return root


def test_build_workspace_command_writes_the_task(imported, tmp_path):
    dest = tmp_path / "ws"
    out = StringIO()
    call_command("build_workspace", "toy-paper_0,2", str(dest), stdout=out)

    task = json.loads((dest / "task.json").read_text())
    assert {f["name"] for f in task["missing_functions"]} == {"Loss.__call__", "train"}
    assert [e["label"] for e in task["experiments"]] == ["Experiment 1"]  # only experiment 0 needs 0 or 2
    assert "raise NotImplementedError" in (dest / "code" / "model.py").read_text()
    assert "0.2512345" not in "".join(p.read_text() for p in dest.rglob("*") if p.is_file())
    assert "masked: code/model.py:Loss.__call__, code/model.py:train" in out.getvalue()


def test_build_workspace_command_explains_an_unknown_sample(imported, tmp_path):
    with pytest.raises(CommandError, match="no sample 'toy-paper_9'"):
        call_command("build_workspace", "toy-paper_9", str(tmp_path / "ws"))


def test_audit_leaks_passes_a_clean_suite(imported):
    out = StringIO()
    call_command("audit_leaks", "toy", "--n", "1,2", stdout=out)
    assert "Audited 10 samples (n=1,2): 0 leaks" in out.getvalue()  # 4 + C(4,2)
    assert Sample.objects.count() == 10


def test_audit_leaks_fails_on_a_copied_body_or_a_gold_number(imported):
    code = imported / "toy-paper" / "code"
    (code / "NOTES.md").write_text(
        "The loss we used:\n\n```python\n    scaled = [value * 2.0 for value in x]\n"
        "    return math.fsum(scaled) / max(len(scaled), 1)\n```\n\nIt reached 0.2512 in our runs.\n"
    )
    err = StringIO()
    with pytest.raises(CommandError, match="leaks found"):
        call_command("audit_leaks", "toy", "--n", "1", stderr=err)
    assert "NOTES.md: contains the original body of masked function model.py:Loss.__call__" in err.getvalue()
    assert "NOTES.md: contains the gold result value 0.2512" in err.getvalue()


def test_audit_leaks_names_an_unknown_suite():
    with pytest.raises(CommandError, match="no suite named 'nope'"):
        call_command("audit_leaks", "nope")
