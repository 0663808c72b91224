"""Building submission files from real workspaces of the built-in suite.

The gold patch of a sample is made the way an honest submitter's harness would: build the masked
workspace, write each masked function's original body back in (`replace_function_body` with the
body `function_body_source` reads from the paper's gold code) and diff `code/` with a/ and b/
prefixes, which `patch -p1` applies.
"""
from __future__ import annotations

import difflib
import io
import json
import zipfile
from pathlib import Path

from runs.benchmark.masking import function_body_source, replace_function_body
from runs.benchmark.workspace import CODE_DIR, experiment_label
from runs.models import Sample
from runs.suites.selectors import sample_experiments
from runs.suites.services import workspace_build

HEADER = {
    "type": "header",
    "suite": "builtin",
    "model": "test-model-1",
    "agent": "external-react",
    "context": "full",
    "description": "Uploaded by the tests.",
    "contact": "tests@example.org",
}
# Samples of the built-in suite at n=1 whose experiments run in well under a second.
SAMPLE = "temperature-scaling_4"
OTHER_SAMPLE = "adam-bias-correction_0"


def gold_patch(sample: Sample, scratch: Path, *, bodies: dict[str, str] | None = None) -> str:
    """The unified diff that restores every masked function of `sample` in its masked workspace
    (or writes the body `bodies` gives for a function's name instead)."""
    workspace = scratch / f"workspace-{sample.sample_id}"
    workspace_build(sample=sample, dest=workspace)
    code_dir = Path(sample.paper.code_dir)
    by_file: dict[str, list] = {}
    for function in sample.functions.order_by("func_id"):
        by_file.setdefault(function.file, []).append(function)
    parts = []
    for relative, functions in sorted(by_file.items()):
        masked = (workspace / CODE_DIR / relative).read_text(encoding="utf-8")
        gold_source = (code_dir / relative).read_text(encoding="utf-8")
        restored = masked
        for function in functions:
            body = (bodies or {}).get(function.name) or function_body_source(gold_source, function.name, line_hint=function.line_hint)
            restored = replace_function_body(restored, function.name, body)
        parts.append(
            "".join(
                difflib.unified_diff(
                    masked.splitlines(keepends=True),
                    restored.splitlines(keepends=True),
                    fromfile=f"a/{CODE_DIR}/{relative}",
                    tofile=f"b/{CODE_DIR}/{relative}",
                )
            )
        )
    return "".join(parts)


def gold_answer(sample: Sample) -> dict:
    """The gold numbers keyed "Experiment 1"... in the sample's order."""
    return {
        experiment_label(number): experiment.gold_result
        for number, experiment in enumerate(sample_experiments(sample=sample), start=1)
    }


def record(sample_id: str = SAMPLE, index: int = 0, **fields) -> dict:
    """A well-formed record (no answer, empty patch) with `fields` replacing or adding values."""
    base = {
        "sample_id": sample_id,
        "attempt_index": index,
        "final_answer": None,
        "final_patch": "",
        "input_tokens": 100,
        "output_tokens": 20,
        "cost": 0.01,
        "seconds": 12.5,
    }
    base.update(fields)
    return base


def jsonl(*lines, header: dict | None = HEADER) -> bytes:
    """A JSONL file: the header (unless None), then each line (dicts dumped, strings as given)."""
    out = [json.dumps(header)] if header is not None else []
    out += [line if isinstance(line, str) else json.dumps(line) for line in lines]
    return ("\n".join(out) + "\n").encode("utf-8")


def zip_bytes(members: dict[str, bytes | str], *, symlinks: dict[str, str] | None = None) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, content in members.items():
            info = zipfile.ZipInfo(name)
            info.compress_type = zipfile.ZIP_DEFLATED
            archive.writestr(info, content)
        for name, target in (symlinks or {}).items():
            info = zipfile.ZipInfo(name)
            info.create_system = 3
            info.external_attr = (0o120777 << 16)
            archive.writestr(info, target)
    return buffer.getvalue()


def trajectory(sample_id: str = SAMPLE, **header) -> dict:
    from runs.agents.trajectory import Header, Step, Trajectory

    return Trajectory(
        header=Header(sample_id=sample_id, agent="external-react", model="test-model-1", exit_status="submitted", **header),
        steps=[Step(index=1, started_at="2025-01-01T00:00:00+00:00", thought="look around", tool="list_files", observation="code/")],
    ).model_dump()
