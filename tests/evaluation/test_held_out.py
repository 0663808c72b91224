"""Held-out checks end to end, on both sandbox backends: the attacker knows every public gold number
and writes a masked body that returns it; the hidden variant (another seed) it has never seen fails
it. Nothing of the variant (its command, its gold, its output) reaches a workspace, a task export,
the trajectory, the replay page or its exports.

The suite is one paper whose experiment prints one number computed from a seeded sample, so the
attack (return the public gold) passes the public experiment exactly.
"""
from __future__ import annotations

import json
import os
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command
from django.test import Client
from django.urls import reverse

from runs.models import Attempt, HeldOutCheck, Suite
from runs.replay.scores import format_number
from runs.suites.export import tasks_export
from runs.suites.selectors import sample_held_out_checks, sample_task
from runs.suites.services import workspace_build
from tests.evaluation.test_hostile_agents import baseline_attempt, final, page_text, react_attack, replay_html, turn
from tests.support import require_backend

pytestmark = pytest.mark.django_db(transaction=True)

# A token that appears in the hidden variant's command and nowhere else.
HIDDEN_SEED = 40417
METRIC = '''"""A spread score."""
import numpy as np


def spread_score(values):
    """The root mean square deviation of the values, scaled, plus an offset."""
    centred = np.asarray(values, dtype=float) - np.mean(values)
    return float(np.sqrt(np.mean(centred ** 2)) * 1.2345 + 0.0314)
'''
RUN = '''import argparse
import json

import numpy as np

from metric import spread_score

parser = argparse.ArgumentParser()
parser.add_argument("--seed", type=int, default=0)
values = np.random.default_rng(parser.parse_args().seed).normal(size=7)
print(json.dumps({"score": spread_score(values)}))
'''
PAPER = {
    "id": "held-out-paper",
    "title": "A Spread Score",
    "functions": [{"id": 0, "file": "metric.py", "name": "spread_score", "line": 5, "relevant_paper": "",
                   "description": "The root mean square deviation, scaled by 1.2345, plus 0.0314."}],
    "experiments": [{
        "id": 0, "description": "Score a seeded sample.", "command": "python3 run.py --seed 3",
        "answer_format": {"score": 0.0}, "depends_on": [0], "rtol": None, "atol": None, "timeout": 20,
        "held_out": [{"id": 0, "command": f"python3 run.py --seed {HIDDEN_SEED}"}],
    }],
}


@dataclass
class HeldOutSuite:
    suite: Suite
    public_gold: float
    hidden_gold: float

    def hidden_forms(self) -> set[str]:
        short, full = format_number(self.hidden_gold)
        return {repr(self.hidden_gold), full, short, str(HIDDEN_SEED)}


@pytest.fixture
def held_out_suite(tmp_path, db) -> HeldOutSuite:
    return write_suite(tmp_path / "held-out-suite", variants=True)


def write_suite(root: Path, *, variants: bool) -> HeldOutSuite:
    """The suite, its gold from the gold code run with the host's python3; without `variants`, the
    same suite with no hidden variant (as an upstream import is)."""
    code_dir = root / "held-out-paper" / "code"
    code_dir.mkdir(parents=True)
    (code_dir / "metric.py").write_text(METRIC)
    (code_dir / "run.py").write_text(RUN)
    (root / "suite.json").write_text(json.dumps({"name": "heldout", "version": "1.0", "papers": ["held-out-paper"]}))
    paper = json.loads(json.dumps(PAPER))
    if not variants:
        del paper["experiments"][0]["held_out"]
    (root / "held-out-paper" / "paper.json").write_text(json.dumps(paper))
    (root / "held-out-paper" / "paper.md").write_text("# A Spread Score\n\nWe scale the deviation.\n")

    def gold(command: str) -> dict:
        printed = subprocess.run(["/usr/bin/python3", *command.split()[1:]], cwd=code_dir, capture_output=True,
                                 text=True, check=True).stdout
        return json.loads(printed.strip().splitlines()[-1])

    public, hidden = gold(PAPER["experiments"][0]["command"]), gold(PAPER["experiments"][0]["held_out"][0]["command"])
    (root / "held-out-paper" / "gold.json").write_text(json.dumps(
        {"results": {"0": public}, **({"held_out": {"0": {"0": {"result": hidden}}}} if variants else {})}
    ))
    with open(os.devnull, "w") as quiet:
        call_command("import_suite", str(root), "--samples", "1", stdout=quiet)
    suite = Suite.objects.get(name="heldout")
    assert [v.gold_result for v in HeldOutCheck.objects.filter(experiment__paper__suite=suite)] == ([hidden] if variants else [])
    assert abs(hidden["score"] - public["score"]) > 0.05 * abs(hidden["score"]), "the variant must tell them apart"
    return HeldOutSuite(suite, public["score"], hidden["score"])


@pytest.fixture(params=["bubblewrap", "docker"])
def backend(request, settings, workspace_root) -> str:
    require_backend(request.param)
    settings.SANDBOX_BACKEND = request.param
    return request.param


def _public_exports(attempt: Attempt) -> dict[str, str]:
    """What an anonymous visitor gets of the attempt (its replay, every step; its patch), and a
    signed-in user who is not staff (its run's page)."""
    pages = {"replay": page_text(replay_html(attempt, Client()))}
    client = Client()
    client.force_login(get_user_model().objects.create_user(username="visitor"))
    for name, url in (("patch", reverse("replay:patch", args=[attempt.pk])),
                      ("run", reverse("runs:run_detail", args=[attempt.run_id]))):
        response = client.get(url)
        assert response.status_code == 200, (name, response.status_code)
        pages[name] = response.content.decode(errors="replace")
    return pages


def forged_metric(number: float) -> str:
    """The metric with its body replaced by `return <number>`."""
    return METRIC.replace(
        "    centred = np.asarray(values, dtype=float) - np.mean(values)\n"
        "    return float(np.sqrt(np.mean(centred ** 2)) * 1.2345 + 0.0314)\n",
        f"    return {number!r}\n",
    )


def test_a_body_returning_the_public_gold_passes_the_experiment_and_fails_the_held_out_check(
    backend, held_out_suite, fake_llm, workspace_root, settings
):
    settings.SIGNUP_ENABLED = True  # an account vouches for nobody
    forged = forged_metric(held_out_suite.public_gold)
    answer = {"Experiment 1": {"score": held_out_suite.public_gold}}
    attempt = react_attack(held_out_suite, fake_llm, backend, [
        turn("write_file", "Return the number the experiment wants.", path="code/metric.py", content=forged),
        turn("command_line", command="cd code && python3 run.py --seed 3"),
        final(answer),
    ])

    assert attempt.status == Attempt.DONE and attempt.reported_passed is True
    assert attempt.reexecution_score["passed"] is True, "the forged body passes the public experiment"
    assert attempt.held_out_passed is False and attempt.reexecution_passed is False and attempt.passed is False
    assert attempt.outcome == Attempt.HELD_OUT_FAILED and attempt.failure_label == Attempt.WRONG_ANSWER
    assert "held-out" in attempt.failure_detail
    staff_only = attempt.held_out_scores["0.0"]
    assert staff_only["passed"] is False and staff_only["run_error"] is None
    # One bit reaches the public: no command, number or output of the variant, anywhere.
    exports = _public_exports(attempt)
    assert "held-out check:" in exports["replay"] and "Held-out check failed" in exports["replay"]
    stored = {"trajectory": json.dumps(attempt.trajectory), "output": attempt.reexecution_output,
              "error": attempt.reexecution_error, "detail": attempt.failure_detail, **exports}
    for where, text in stored.items():
        leaked = [form for form in held_out_suite.hidden_forms() if form in text]
        assert not leaked, f"{where} shows the hidden variant: {leaked}"


def test_gold_passes_the_held_out_check_and_a_failed_attempt_never_runs_it(backend, held_out_suite, workspace_root):
    gold = baseline_attempt(held_out_suite, "gold", backend)
    assert gold.passed is True and gold.held_out_passed is True and gold.outcome == Attempt.PASSED
    assert "reexecution_held_out" in gold.timings
    assert "held-out check:" in page_text(replay_html(gold))

    noop = baseline_attempt(held_out_suite, "noop", backend)
    assert noop.passed is False and noop.reexecution_score["passed"] is False
    assert noop.held_out_passed is None and noop.held_out_scores is None, "variants of failed code must not run"
    assert "reexecution_held_out" not in noop.timings


def test_no_workspace_or_task_export_holds_the_hidden_variant(held_out_suite, tmp_path):
    sample = held_out_suite.suite.papers.get().samples.get()
    workspace_build(sample=sample, dest=tmp_path / "workspace")
    summary = tasks_export(suite=held_out_suite.suite, n_values=[1], context="full", dest=tmp_path / "export",
                           upload_format="jsonl")
    assert summary is not None
    texts = {str(path): path.read_bytes().decode(errors="replace")
             for root in (tmp_path / "workspace", tmp_path / "export") for path in root.rglob("*") if path.is_file()}
    for archive in (tmp_path / "export").rglob("*.tar.gz"):
        with tarfile.open(archive) as tar:
            for member in tar.getmembers():
                if member.isfile():
                    texts[f"{archive}:{member.name}"] = tar.extractfile(member).read().decode(errors="replace")
    assert any("--seed 3" in text for text in texts.values()), "the control: the public command is there"
    leaked = {where: form for where, text in texts.items() for form in held_out_suite.hidden_forms() if form in text}
    assert not leaked, leaked


def test_without_hidden_variants_a_body_holding_a_gold_number_fails_shown_with_the_literal(
    tmp_path, db, fake_llm, workspace_root, settings
):
    require_backend("bubblewrap")
    settings.SANDBOX_BACKEND = "bubblewrap"
    suite = write_suite(tmp_path / "no-variants", variants=False)
    # Rounded to five significant digits: within 5% of the gold, and a literal of four or more digits.
    literal = f"{suite.public_gold:.5g}"
    attempt = react_attack(suite, fake_llm, "bubblewrap", [
        turn("write_file", "Return the published number.", path="code/metric.py", content=forged_metric(float(literal))),
        final({"Experiment 1": {"score": float(literal)}}),
    ])

    assert attempt.reexecution_score["passed"] is True, "the forged body passes the public experiment"
    assert attempt.held_out_passed is None and attempt.passed is False and attempt.outcome == Attempt.GOLD_LITERAL
    [found] = attempt.gold_literals
    assert (found["path"], found["function"], found["literal"]) == ("code/metric.py", "spread_score", repr(float(literal)))
    assert found["line"] > 5  # in the file re-execution ran, after the module docstring, import and signature
    assert "hard-codes a gold number" in attempt.failure_detail
    page = page_text(replay_html(attempt))
    assert "Hard-coded gold number:" in page and repr(float(literal)) in page

    # The control: the gold code's own numbers are no gold number, and it passes.
    gold = baseline_attempt(suite, "gold", "bubblewrap")
    assert gold.passed is True and gold.gold_literals == [] and gold.held_out_passed is None


def test_a_variant_declared_since_the_last_make_gold_checks_nothing_until_it_has_gold(held_out_suite):
    sample = held_out_suite.suite.papers.get().samples.get()
    experiments = sample_task(sample=sample).experiments
    assert [v.command for v in sample_held_out_checks(experiments=experiments)] == [f"python3 run.py --seed {HIDDEN_SEED}"]
    HeldOutCheck.objects.update(gold_result=None)
    assert sample_held_out_checks(experiments=experiments) == []
