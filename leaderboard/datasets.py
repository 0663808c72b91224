"""A suite's tasks and its public attempts as a Hugging Face-style dataset: Parquet files and a card.

A dataset is a zip (or a directory, from `manage.py export_dataset`) holding
- `samples.parquet`: one row per sample with its task as the task export's manifest gives it
  (runs.suites.export): paper, n, the masked functions (file, qualified name, docstring, the paper
  excerpt of the oracle context) and the experiments (label, description, command, answer format);
- `attempts.parquet`: one row per attempt of a public run that has a result (status done or error,
  what the leaderboard reads): its system, sample, both verdicts, the per-experiment verdicts, cost,
  time and outcome;
- `README.md`: the dataset card, with the YAML front matter the Hugging Face hub reads (configs and
  their data files per split, license, task categories) and the counting rule the site applies.

Never gold, whoever asks (the files are the same for everybody): no gold body or stub is read (the
gold code stays on disk), no gold number (experiments' gold results, held-out checks and their
scores), and of a score only whether each experiment passed: a score's numbers carry the gold they
were compared with, and an answer's numbers are the gold's own for the gold-bearing baselines.
Hidden runs are left out (runs.visibility.public_runs_q, through leaderboard.rules.runs_frame).
"""
from __future__ import annotations

import json
import tempfile
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from django.db.models import Q

from leaderboard.rules import runs_frame, system_name
from runs.models import Attempt, Experiment, Sample, Suite

SAMPLES_FILE = "samples.parquet"
ATTEMPTS_FILE = "attempts.parquet"
CARD_FILE = "README.md"
# The hub takes any word as a split name: this one says what the files hold.
SPLIT = "public"
# The statuses the leaderboard reads: done attempts count, errors are shown apart; queued, running
# and cancelled ones have no result yet or never will.
ATTEMPT_STATUSES = (Attempt.DONE, Attempt.ERROR)
# The attempts are read this many at a time, so a large suite is never held as model instances.
CHUNK = 2_000

_FUNCTION_TYPE = pa.struct([
    ("func_id", pa.int64()), ("file", pa.string()), ("name", pa.string()), ("description", pa.string()),
    ("relevant_paper", pa.string()),
])
_EXPERIMENT_TYPE = pa.struct([
    ("label", pa.string()), ("exp_id", pa.int64()), ("description", pa.string()), ("command", pa.string()),
    ("answer_format", pa.string()),  # JSON: its shape differs from one experiment to the next
])
SAMPLES_SCHEMA = pa.schema([
    ("suite", pa.string()), ("suite_version", pa.string()), ("paper_id", pa.string()), ("paper_title", pa.string()),
    ("paper_url", pa.string()), ("sample_id", pa.string()), ("n", pa.int64()), ("masked_function_ids", pa.list_(pa.int64())),
    ("masked_functions", pa.list_(_FUNCTION_TYPE)), ("experiments", pa.list_(_EXPERIMENT_TYPE)),
])
_VERDICT_TYPE = pa.struct([("experiment", pa.string()), ("reported_passed", pa.bool_()), ("reexecution_passed", pa.bool_())])
ATTEMPTS_SCHEMA = pa.schema([
    ("attempt_id", pa.int64()), ("run_id", pa.int64()), ("system", pa.string()), ("system_name", pa.string()),
    ("suite", pa.string()), ("agent", pa.string()), ("model", pa.string()), ("agent_config", pa.string()),
    ("context", pa.string()), ("sample_id", pa.string()), ("paper_id", pa.string()), ("n", pa.int64()),
    ("attempt_index", pa.int64()), ("status", pa.string()), ("verified", pa.bool_()), ("reported_passed", pa.bool_()),
    ("reexecution_passed", pa.bool_()), ("passed", pa.bool_()), ("mismatch", pa.bool_()),
    ("held_out_passed", pa.bool_()), ("experiment_verdicts", pa.list_(_VERDICT_TYPE)), ("outcome", pa.string()),
    ("failure_label", pa.string()), ("exit_status", pa.string()), ("function_diagnosis", pa.string()),
    ("tolerance_ratio", pa.float64()), ("input_tokens", pa.int64()), ("output_tokens", pa.int64()),
    ("cost", pa.float64()), ("agent_seconds", pa.float64()), ("reexecution_seconds", pa.float64()),
    ("created_at", pa.timestamp("us", tz="UTC")),
])


class DatasetError(Exception):
    """What the export was asked for does not exist (a suite or a system): the message says which."""


@dataclass(frozen=True)
class DatasetSummary:
    samples: int
    attempts: int
    files: list[str]


def _suite(name: str) -> Suite:
    found = Suite.objects.filter(name=name).first()
    if found is None:
        known = ", ".join(Suite.objects.order_by("name").values_list("name", flat=True)[:20]) or "none imported"
        raise DatasetError(f"no suite named {name!r} (suites: {known})")
    return found


def _samples_rows(suite: Suite, *, only: set[str] | None) -> list[dict]:
    """Every sample of `suite` (those in `only`, when given) with its task, in three queries: the
    samples, their masked functions and the suite's experiments with what they depend on."""
    samples = Sample.objects.filter(paper__suite=suite).select_related("paper").defer("paper__text")
    if only is not None:
        samples = samples.filter(sample_id__in=only)
    samples = list(samples.order_by("paper__paper_id", "n", "sample_id"))
    masked: dict[int, list] = {sample.pk: [] for sample in samples}
    through = Sample.functions.through.objects.filter(sample_id__in=masked).select_related("function")
    for link in through:
        masked[link.sample_id].append(link.function)
    experiments_by_paper: dict[int, list[tuple[Experiment, set[int]]]] = {}
    experiments = Experiment.objects.filter(paper__suite=suite).prefetch_related("dependencies").order_by("exp_id")
    for experiment in experiments:
        needs = {function.pk for function in experiment.dependencies.all()}
        experiments_by_paper.setdefault(experiment.paper_id, []).append((experiment, needs))
    rows = []
    for sample in samples:
        functions = sorted(masked[sample.pk], key=lambda function: function.func_id)
        ids = {function.pk for function in functions}
        # The experiments the task asks for: those needing a masked function (all of them at n=0),
        # numbered as runs.suites.selectors.sample_experiments and the workspace's task.json number them.
        chosen = [e for e, needs in experiments_by_paper.get(sample.paper_id, []) if not sample.n or needs & ids]
        rows.append({
            "suite": suite.name, "suite_version": suite.version, "paper_id": sample.paper.paper_id,
            "paper_title": sample.paper.title, "paper_url": sample.paper.source_url, "sample_id": sample.sample_id,
            "n": sample.n, "masked_function_ids": [function.func_id for function in functions],
            "masked_functions": [
                {"func_id": f.func_id, "file": f.file, "name": f.name, "description": f.description,
                 "relevant_paper": f.relevant_paper}
                for f in functions
            ],
            "experiments": [
                {"label": f"Experiment {number}", "exp_id": e.exp_id, "description": e.description, "command": e.command,
                 "answer_format": json.dumps(e.answer_format, sort_keys=True, ensure_ascii=False)}
                for number, e in enumerate(chosen, start=1)
            ],
        })
    return rows


def _verdicts(reported: dict | None, reexecuted: dict | None) -> list[dict]:
    """Whether each experiment passed, by the reported answer and by the re-execution: the stored
    scores' verdicts alone (their numbers hold the gold they were compared with)."""
    by_experiment: dict[str, dict] = {}
    for key, score in (("reported_passed", reported), ("reexecution_passed", reexecuted)):
        for item in (score or {}).get("experiments") or []:
            if isinstance(item, dict):
                name = str(item.get("experiment_id"))
                entry = by_experiment.setdefault(name, {"experiment": name, "reported_passed": None, "reexecution_passed": None})
                entry[key] = bool(item.get("passed"))
    return list(by_experiment.values())


_ATTEMPT_FIELDS = (
    "id", "run_id", "sample__sample_id", "sample__paper__paper_id", "sample__n", "index", "status", "reported_passed",
    "reexecution_passed", "passed", "mismatch", "held_out_passed", "reported_score", "reexecution_score", "outcome",
    "failure_label", "exit_status", "function_diagnosis", "tolerance_ratio", "input_tokens", "output_tokens", "cost",
    "agent_seconds", "reexecution_seconds", "created_at",
)


def _attempt_batches(runs: pd.DataFrame) -> Iterator[list[dict]]:
    """The attempts with a result of the public runs in `runs` (leaderboard.rules.runs_frame),
    CHUNK rows at a time: a suite's attempts are written as they are read, never all held at once."""
    if runs.empty:
        return
    by_run = {int(run.run_id): run for run in runs.itertuples()}
    attempts = (
        Attempt.objects.filter(run_id__in=list(by_run), status__in=ATTEMPT_STATUSES)
        .order_by("run_id", "sample__sample_id", "index", "id")
        .values_list(*_ATTEMPT_FIELDS)
    )
    rows = []
    for values in attempts.iterator(chunk_size=CHUNK):
        item = dict(zip(_ATTEMPT_FIELDS, values, strict=True))
        run = by_run[item["run_id"]]
        rows.append({
            "attempt_id": item["id"], "run_id": item["run_id"], "system": run.slug,
            "system_name": system_name(model=run.model, agent=run.agent), "suite": run.suite, "agent": run.agent,
            "model": run.model, "agent_config": run.config_json, "context": run.context,
            "sample_id": item["sample__sample_id"], "paper_id": item["sample__paper__paper_id"], "n": item["sample__n"],
            "attempt_index": item["index"], "status": item["status"], "verified": item["reexecution_passed"] is not None,
            "reported_passed": item["reported_passed"], "reexecution_passed": item["reexecution_passed"],
            "passed": item["passed"], "mismatch": item["mismatch"], "held_out_passed": item["held_out_passed"],
            "experiment_verdicts": _verdicts(item["reported_score"], item["reexecution_score"]),
            **{key: item[key] for key in (
                "outcome", "failure_label", "exit_status", "function_diagnosis", "tolerance_ratio", "input_tokens",
                "output_tokens", "cost", "agent_seconds", "reexecution_seconds", "created_at",
            )},
        })
        if len(rows) == CHUNK:
            yield rows
            rows = []
    if rows:
        yield rows


def _card(*, title: str, suite: Suite, samples: int, attempts: int, scope: str) -> str:
    version = f" version {suite.version}" if suite.version else ""
    return "\n".join([
        "---",
        f"pretty_name: {json.dumps(title)}",
        "license: other",
        "task_categories:",
        "- text-generation",
        "tags:",
        "- code",
        "- benchmark",
        "- reproducibility",
        "configs:",
        "- config_name: samples",
        "  data_files:",
        f"  - split: {SPLIT}",
        f"    path: {SAMPLES_FILE}",
        "- config_name: attempts",
        "  data_files:",
        f"  - split: {SPLIT}",
        f"    path: {ATTEMPTS_FILE}",
        "---",
        "",
        f"# {title}",
        "",
        f"Suite `{suite.name}`{version} of the AutoExperiment benchmark: {scope}.",
        "Each sample is one paper's code with n functions removed; an agent implements them from the paper,",
        "runs the sample's experiments and reports the numbers they print.",
        "",
        f"- `{SAMPLES_FILE}` ({samples} rows): one row per sample, its task as the task downloads' manifest",
        "  gives it: the masked functions (file, qualified name, docstring, the paper excerpt of the oracle",
        "  context) and the experiments (label, description, command, answer format as JSON).",
        f"- `{ATTEMPTS_FILE}` ({attempts} rows): one row per attempt of a public run that has a result",
        "  (status `done`, or `error`: a sandbox, worker or model provider failure), with its system",
        "  (`system` is the id in the site's system page URL), both verdicts, each experiment's verdicts,",
        "  cost (USD, null when unknown), time and outcome.",
        "",
        "No gold: neither the reference implementation nor any gold number is in these files (a score's",
        "numbers are left out with them), and hidden runs are not.",
        "",
        "## Counting as the leaderboard does",
        "",
        "- A system is (suite, agent, model, agent configuration, context); its runs are pooled.",
        "- Only attempts with status `done` count; errors never count for or against a model.",
        "- By default only re-executed attempts count (`verified`); such an attempt passes when `passed`",
        "  (the reported answer and the re-execution both pass). The view with unverified uploads counts",
        "  every done attempt and judges one not re-executed by `reported_passed`.",
        "- Per sample, c of m counted attempts pass; Pass@1 at n is the mean over samples of c / m.",
        "",
        "```python",
        "import pandas as pd",
        f'attempts = pd.read_parquet("{ATTEMPTS_FILE}")',
        'counted = attempts[(attempts.status == "done") & attempts.verified]',
        'per_sample = counted.groupby(["system", "n", "sample_id"]).passed.mean()',
        'pass1 = per_sample.groupby(["system", "n"]).mean()',
        "```",
        "",
    ])


@dataclass(frozen=True)
class _Scope:
    """What one dataset holds: the suite, its public runs (runs_frame) to take attempts from, whether
    its samples are all of the suite's or only those attempted, and how its card names it."""

    suite: Suite
    runs: pd.DataFrame
    all_samples: bool
    title: str
    description: str


def _write(dest: Path, scope: _Scope) -> DatasetSummary:
    """The three files of `scope` in the directory `dest`."""
    attempts, attempted = 0, set()
    with pq.ParquetWriter(dest / ATTEMPTS_FILE, ATTEMPTS_SCHEMA) as writer:
        for batch in _attempt_batches(scope.runs):
            writer.write_table(pa.Table.from_pylist(batch, schema=ATTEMPTS_SCHEMA))
            attempts += len(batch)
            attempted.update(row["sample_id"] for row in batch)
    samples = _samples_rows(scope.suite, only=None if scope.all_samples else attempted)
    pq.write_table(pa.Table.from_pylist(samples, schema=SAMPLES_SCHEMA), dest / SAMPLES_FILE)
    card = _card(title=scope.title, suite=scope.suite, samples=len(samples), attempts=attempts, scope=scope.description)
    (dest / CARD_FILE).write_text(card, encoding="utf-8")
    return DatasetSummary(samples=len(samples), attempts=attempts, files=[SAMPLES_FILE, ATTEMPTS_FILE, CARD_FILE])


def _suite_scope(name: str) -> _Scope:
    suite = _suite(name)
    return _Scope(suite=suite, runs=runs_frame(Q(suite=suite)), all_samples=True,
                  title=f"AutoExperiment: suite {suite.name}", description="every sample and every attempt of its public runs")


def _system_scope(slug: str) -> _Scope:
    runs = runs_frame(Q())
    runs = runs[runs["slug"] == slug] if not runs.empty else runs
    if runs.empty:
        raise DatasetError(f"no system {slug!r} with a public run")
    first = runs.iloc[0]
    name = system_name(model=first["model"], agent=first["agent"])
    suite = Suite.objects.get(name=first["suite"])
    return _Scope(suite=suite, runs=runs, all_samples=False, title=f"AutoExperiment: {name} on suite {suite.name}",
                  description=f"the attempts of system {slug} ({name}) and the samples they were at")


def dataset_export(*, suite: str, dest: Path) -> DatasetSummary:
    """Write the dataset of suite `suite` (every sample, every public attempt) into `dest`, a
    directory that does not exist yet or is empty."""
    scope = _suite_scope(suite)
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise DatasetError(f"{dest} exists and is not an empty directory")
    dest.mkdir(parents=True, exist_ok=True)
    return _write(dest, scope)


def _zipped(scope: _Scope, *, top: str):
    """The dataset as a zip in a temporary file (removed when closed), rewound, and its file name:
    the response streams it from disk rather than holding it in memory."""
    archive = tempfile.TemporaryFile()
    try:
        with tempfile.TemporaryDirectory() as scratch:
            summary = _write(Path(scratch), scope)
            # Parquet files are compressed already (snappy): stored, not deflated again.
            with zipfile.ZipFile(archive, "w", compression=zipfile.ZIP_STORED) as bundle:
                for name in summary.files:
                    bundle.write(Path(scratch) / name, arcname=f"{top}/{name}")
    except BaseException:
        archive.close()
        raise
    archive.seek(0)
    return archive, f"{top}.zip"


def suite_dataset_zip(*, suite: str):
    """The suite's dataset (`dataset_export`) as a zip in a temporary file, and its file name."""
    scope = _suite_scope(suite)
    return _zipped(scope, top=f"autoexperiment-{scope.suite.name}")


def system_dataset_zip(*, slug: str):
    """One system's public attempts and the samples they were at, as a zip in a temporary file, and its file name."""
    return _zipped(_system_scope(slug), top=f"autoexperiment-system-{slug}")
