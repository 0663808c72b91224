"""The workspace builder and the leak audit, on a small codebase written by the test."""
import json
import os
import textwrap
from pathlib import Path

import pytest

from runs.benchmark.masking import function_body_source
from runs.benchmark.workspace import (
    CONTEXT_CONDITIONS,
    ExperimentSpec,
    MaskedFunctionSpec,
    WorkspaceError,
    WorkspaceSpec,
    audit_workspace,
    build_workspace,
    task_document,
)

MODEL_PY = textwrap.dedent(
    '''\
    import numpy as np


    class Scaler:
        def fit(self, values):
            """Remember the mean and spread."""
            self.mean = float(np.mean(values))
            self.spread = float(np.std(values)) + 1e-3
            return self

        def transform(self, values):
            centred = np.asarray(values) - self.mean
            return centred / self.spread


    def weighted_loss(predictions, targets, weights):
        residual = np.asarray(predictions) - np.asarray(targets)
        weighted = np.asarray(weights) * residual ** 2
        return float(np.sum(weighted) / np.sum(weights))
    '''
)
GOLD = {"loss": 0.7312846619, "scale": 1.5}


@pytest.fixture
def codebase(tmp_path):
    code = tmp_path / "gold" / "code"
    (code / "lib").mkdir(parents=True)
    (code / "lib" / "model.py").write_text(MODEL_PY)
    (code / "lib" / "model.py.orig").write_text(MODEL_PY)
    (code / "main.py").write_text("from lib.model import weighted_loss\nprint('{\"loss\": 1.0}')\n")
    (code / ".git").mkdir()
    (code / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (code / "lib" / "__pycache__").mkdir()
    (code / "lib" / "__pycache__" / "model.cpython-311.pyc").write_bytes(b"\x00compiled")
    notebook = {
        "cells": [{"cell_type": "code", "source": ["print(1)"], "outputs": [{"text": "loss 0.7312846619"}], "execution_count": 3}],
        "metadata": {},
        "nbformat": 4,
        "nbformat_minor": 5,
    }
    (code / "analysis.ipynb").write_text(json.dumps(notebook))
    (tmp_path / "secret.txt").write_text("outside")
    os.symlink(tmp_path / "secret.txt", code / "escape.txt")
    os.symlink("main.py", code / "entry.py")
    return code


def spec_for(code: Path, context="full", masked=None) -> WorkspaceSpec:
    return WorkspaceSpec(
        sample_id="toy_1",
        paper_title="A toy paper",
        paper_text="# A toy paper\n\nWeighted squared error.\n",
        code_dir=code,
        masked=masked
        if masked is not None
        else [MaskedFunctionSpec(func_id=1, file="lib/model.py", name="weighted_loss", description="Weighted MSE.", relevant_paper="The loss is weighted.")],
        experiments=[ExperimentSpec(exp_id=0, description="Report the loss.", command="python3 main.py --seed 0", answer_format={"loss": 0.0})],
        context=context,
    )


def test_workspace_holds_masked_code_task_and_nothing_that_leaks(codebase, tmp_path):
    dest = tmp_path / "ws"
    manifest = build_workspace(spec_for(codebase), dest)

    masked = (dest / "code" / "lib" / "model.py").read_text()
    assert "raise NotImplementedError" in masked and "Weighted MSE." in masked
    assert "np.sum(weighted)" not in masked
    assert "def transform(self, values):\n        centred" in masked  # the rest is untouched
    assert (dest / "code" / "main.py").read_text() == (codebase / "main.py").read_text()
    for absent in [".git", "lib/__pycache__", "lib/model.py.orig", "escape.txt"]:
        assert not (dest / "code" / absent).exists(), absent
    assert os.readlink(dest / "code" / "entry.py") == "main.py"  # symlinks inside the codebase stay
    notebook = json.loads((dest / "code" / "analysis.ipynb").read_text())
    assert notebook["cells"][0]["outputs"] == [] and notebook["cells"][0]["source"] == ["print(1)"]
    assert any("escape.txt" in note and "outside" in note for note in manifest.notes)

    task = json.loads((dest / "task.json").read_text())
    [missing] = task["missing_functions"]
    assert missing["file"] == "code/lib/model.py" and missing["name"] == "weighted_loss"
    assert masked.splitlines()[missing["line"] - 1].startswith("def weighted_loss")
    assert task["answer_format"] == {"Experiment 1": {"loss": 0.0}}
    assert "python3 main.py --seed 0" in (dest / "refsol.sh").read_text()
    assert "weighted_loss" in (dest / "TASK.md").read_text()
    assert (dest / "paper.md").read_text().startswith("# A toy paper")

    audit = audit_workspace(dest, original_bodies=_originals(codebase), gold_results=[GOLD])
    assert audit.leaks == []


@pytest.mark.parametrize(("context", "paper_has"), [("none", None), ("oracle", "The loss is weighted.")])
def test_context_condition_decides_what_paper_the_agent_gets(codebase, tmp_path, context, paper_has):
    dest = tmp_path / "ws"
    build_workspace(spec_for(codebase, context=context), dest)
    if paper_has is None:
        assert not (dest / "paper.md").exists()
    else:
        paper = (dest / "paper.md").read_text()
        assert paper_has in paper and "Weighted squared error" not in paper


def test_several_masks_report_their_lines_in_the_masked_file(codebase, tmp_path):
    masked = [
        MaskedFunctionSpec(func_id=0, file="lib/model.py", name="Scaler.fit", description="Fit.\nOn two lines."),
        MaskedFunctionSpec(func_id=1, file="lib/model.py", name="weighted_loss", description="Loss."),
    ]
    dest = tmp_path / "ws"
    manifest = build_workspace(spec_for(codebase, masked=masked), dest)
    lines = (dest / "code" / "lib" / "model.py").read_text().splitlines()
    assert [lines[f["line"] - 1].strip().split("(")[0] for f in manifest.missing_functions] == [
        "def fit",
        "def weighted_loss",
    ]


@pytest.mark.parametrize("context", CONTEXT_CONDITIONS)
def test_the_task_document_is_what_the_workspace_holds(codebase, tmp_path, context):
    masked = [
        MaskedFunctionSpec(func_id=0, file="lib/model.py", name="Scaler.fit", description="Fit."),
        MaskedFunctionSpec(func_id=1, file="lib/model.py", name="weighted_loss", description="Loss."),  # no excerpt
    ]
    spec = spec_for(codebase, context=context, masked=masked)
    before = sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*"))
    document = task_document(spec)
    assert sorted(path.relative_to(tmp_path) for path in tmp_path.rglob("*")) == before  # nothing written

    dest = tmp_path / "ws"
    manifest = build_workspace(spec, dest)
    assert document.task == json.loads((dest / "task.json").read_text())
    assert document.task["missing_functions"] == manifest.missing_functions
    assert document.markdown == (dest / "TASK.md").read_text()
    paper = dest / "paper.md"
    assert document.context_text == (paper.read_text() if context != "none" else None) and paper.exists() == (context != "none")
    # The lines are the masked file's: the second stub moved up when the first body shrank.
    assert [f["line"] for f in document.task["missing_functions"]] == [5, 14]
    assert "`code/lib/model.py` line 14: `weighted_loss`" in document.markdown
    if context == "oracle":
        assert "## code/lib/model.py: weighted_loss\n\n(no excerpt is available for this function)" in document.context_text


def test_the_task_document_refuses_what_build_workspace_refuses(codebase, tmp_path):
    with pytest.raises(WorkspaceError, match="context 'some' is not one of none, full, oracle"):
        task_document(spec_for(codebase, context="some"))
    with pytest.raises(WorkspaceError, match="gold code directory .*nowhere does not exist"):
        task_document(spec_for(tmp_path / "nowhere"))
    with pytest.raises(WorkspaceError, match="masked function file lib/nope.py does not exist"):
        task_document(spec_for(codebase, masked=[MaskedFunctionSpec(func_id=0, file="lib/nope.py", name="f")]))


def test_refuses_a_non_empty_destination_or_one_inside_the_gold_code(codebase, tmp_path):
    dest = tmp_path / "ws"
    dest.mkdir()
    (dest / "stale.txt").write_text("from an earlier attempt")
    with pytest.raises(WorkspaceError, match="not empty"):
        build_workspace(spec_for(codebase), dest)
    with pytest.raises(WorkspaceError, match="inside the gold code"):
        build_workspace(spec_for(codebase), codebase / "ws")


def test_unknown_masked_file_is_a_clear_error(codebase, tmp_path):
    spec = spec_for(codebase, masked=[MaskedFunctionSpec(func_id=0, file="lib/nope.py", name="f")])
    with pytest.raises(WorkspaceError, match="lib/nope.py"):
        build_workspace(spec, tmp_path / "ws")


def test_gold_code_that_cannot_be_masked_any_more_is_a_workspace_error(codebase, tmp_path):
    # The suite's functions were located at import; the gold code may have changed since. Every
    # caller (the harness, re-execution, the verifier's task_document) handles WorkspaceError.
    renamed = spec_for(codebase, masked=[MaskedFunctionSpec(func_id=1, file="lib/model.py", name="weighted_mse")])
    for build in (task_document, lambda spec: build_workspace(spec, tmp_path / "ws")):
        with pytest.raises(WorkspaceError, match=r"cannot mask the functions of .*code: lib/model.py: no function `weighted_mse`"):
            build(renamed)
    (codebase / "lib" / "model.py").write_bytes(MODEL_PY.encode("utf-8") + b"# caf\xe9\n")  # Latin-1, not UTF-8
    with pytest.raises(WorkspaceError, match=r"masked function file lib/model.py in .* is not valid UTF-8 \(invalid "
                                             r"continuation byte at byte \d+\)"):
        task_document(spec_for(codebase))
    assert not (tmp_path / "ws").exists()


def _originals(code: Path) -> dict[str, str]:
    source = (code / "lib" / "model.py").read_text()
    return {"lib/model.py:weighted_loss": function_body_source(source, "weighted_loss")}


def test_audit_finds_a_copied_body_a_gold_number_and_a_near_copy(codebase, tmp_path):
    dest = tmp_path / "ws"
    build_workspace(spec_for(codebase), dest)
    body = function_body_source(MODEL_PY, "weighted_loss")
    (dest / "code" / "notes.md").write_text("Reference implementation:\n\n" + textwrap.indent(body, "  # ") + "\n")
    (dest / "code" / "results.txt").write_text("final loss 0.7313\n")
    near = "def other_loss(p, t, w):\n" + textwrap.indent(body.replace("residual", "resid"), "    ")
    (dest / "code" / "helpers.py").write_text(near)

    audit = audit_workspace(dest, original_bodies=_originals(codebase), gold_results=[GOLD])

    assert any("notes.md" in leak and "weighted_loss" in leak for leak in audit.leaks)
    assert any("results.txt" in leak and "0.7313" in leak for leak in audit.leaks)
    assert not any("1.5" in leak for leak in audit.leaks)  # too short a number to be evidence
    assert any("helpers.py" in warning and "other_loss" in warning for warning in audit.warnings)


def test_audit_flags_history_and_cache_files(codebase, tmp_path):
    dest = tmp_path / "ws"
    build_workspace(spec_for(codebase), dest)
    (dest / "code" / ".git").mkdir()
    (dest / "code" / ".git" / "packed").write_text("x")
    audit = audit_workspace(dest, original_bodies={}, gold_results=[])
    assert any(".git" in leak for leak in audit.leaks)
