"""First-level check of the built-in suite: its files agree with each other, and the gold code
reproduces gold.json.

Every experiment runs in a temporary copy of its paper's code/ with the project's own interpreter
(current numpy), and every number must be within the experiment's tolerance (5% relative by default)
of gold.json, which was made with Debian's numpy 1.24 (the sandboxes' interpreter; that run is
tests/suites/test_builtin_suite.py). Together they show the suite works with both numpy versions.
"""
import ast
import json
import math
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

SUITE = Path(__file__).resolve().parents[2] / "runs" / "suites" / "builtin"
DEFAULT_RTOL = 0.05
DEFAULT_ATOL = 1e-8


def _papers() -> list[str]:
    return json.loads((SUITE / "suite.json").read_text())["papers"]


def _load(paper: str, name: str) -> dict:
    return json.loads((SUITE / paper / name).read_text())


def _experiments() -> list[tuple[str, dict]]:
    return [(paper, experiment) for paper in _papers() for experiment in _load(paper, "paper.json")["experiments"]]


def _qualified_defs(tree: ast.Module) -> dict[str, int]:
    """Qualified name -> def line of every function and method (one level of classes)."""
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = node.lineno
        elif isinstance(node, ast.ClassDef):
            for child in node.body:
                if isinstance(child, ast.FunctionDef):
                    found[f"{node.name}.{child.name}"] = child.lineno
    return found


@pytest.mark.parametrize("paper", _papers())
def test_paper_files_are_consistent(paper):
    root = SUITE / paper
    meta = _load(paper, "paper.json")
    gold = _load(paper, "gold.json")
    text = (root / "paper.md").read_text()

    assert meta["id"] == paper
    assert text.splitlines()[0] == f"# {meta['title']}"
    assert not list(root.rglob("__pycache__")) and not list(root.rglob("*.pyc"))

    functions = meta["functions"]
    assert [f["id"] for f in functions] == list(range(len(functions)))
    for function in functions:
        source = (root / "code" / function["file"]).read_text()
        assert _qualified_defs(ast.parse(source)).get(function["name"]) == function["line"], function["name"]
        assert function["description"].strip()
        assert function["relevant_paper"] and all(part in text for part in function["relevant_paper"].split("\n\n"))

    experiments = meta["experiments"]
    assert [e["id"] for e in experiments] == list(range(len(experiments)))
    used = {i for e in experiments for i in e["depends_on"]}
    assert used == set(range(len(functions))), "every function must be a dependency of some experiment"
    assert set(gold["results"]) == {str(e["id"]) for e in experiments}
    for experiment in experiments:
        result = gold["results"][str(experiment["id"])]
        assert set(result) == set(experiment["answer_format"])
        assert all(isinstance(v, float) and math.isfinite(v) and v != 0 for v in result.values()), result
        assert json.dumps(experiment["answer_format"]) in experiment["description"]


@pytest.fixture(scope="module")
def code_copies(tmp_path_factory):
    """One temporary copy of each paper's code/, shared by the paper's experiments."""
    copies = {}
    for paper in _papers():
        target = tmp_path_factory.mktemp(paper) / "code"
        shutil.copytree(SUITE / paper / "code", target)
        copies[paper] = target
    return copies


@pytest.mark.slow
@pytest.mark.parametrize(("paper", "experiment"), _experiments(), ids=lambda v: v if isinstance(v, str) else str(v["id"]))
def test_gold_code_reproduces_gold(paper, experiment, code_copies):
    argv = shlex.split(experiment["command"])
    assert argv[0] == "python3"
    completed = subprocess.run(
        [sys.executable, *argv[1:]],
        cwd=code_copies[paper],
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=experiment["timeout"],
    )
    assert completed.returncode == 0, completed.stderr[-3000:]
    result = json.loads(completed.stdout.strip().splitlines()[-1])
    gold = _load(paper, "gold.json")["results"][str(experiment["id"])]
    assert set(result) == set(gold)
    rtol = DEFAULT_RTOL if experiment["rtol"] is None else experiment["rtol"]
    atol = DEFAULT_ATOL if experiment["atol"] is None else experiment["atol"]
    off = {key: (result[key], gold[key]) for key in gold if not abs(result[key] - gold[key]) <= rtol * abs(gold[key]) + atol}
    assert not off, f"{paper} experiment {experiment['id']}: (got, gold) outside tolerance: {off}"
