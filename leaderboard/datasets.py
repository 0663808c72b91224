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

This module writes the files; leaderboard.dataset_cache decides when (once per change of what they
hold) and keeps them. The attempts are written one system at a time (`attempts_write`), a suite's
are those of its systems put together (`attempts_merge`): after a change only the changed system's
attempts are read again. Neither ever holds more than a row group of attempts in memory.
"""
from __future__ import annotations

import json
import shutil
import zipfile
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from django.db.models import Q

from leaderboard.rules import runs_frame, system_name
from runs.models import Attempt, Experiment, Sample, Suite

SAMPLES_FILE = "samples.parquet"
ATTEMPTS_FILE = "attempts.parquet"
CARD_FILE = "README.md"
FILES = [SAMPLES_FILE, ATTEMPTS_FILE, CARD_FILE]
# The hub takes any word as a split name: this one says what the files hold.
SPLIT = "public"
# The statuses the leaderboard reads: done attempts count, errors are shown apart; queued, running
# and cancelled ones have no result yet or never will.
ATTEMPT_STATUSES = (Attempt.DONE, Attempt.ERROR)
# The attempts are read from the database this many at a time, so a large suite is never held as rows...
CHUNK = 2_000
# ... and written in row groups of this many: large enough for readers to scan quickly (a row group
# is what a Parquet reader reads at once), small enough to hold in memory while it is written.
ROW_GROUP = 65_536

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


def suite_get(name: str) -> Suite:
    """The suite named `name`; DatasetError naming the suites there are when there is none."""
    found = Suite.objects.filter(name=name).first()
    if found is None:
        known = ", ".join(Suite.objects.order_by("name").values_list("name", flat=True)[:20]) or "none imported"
        raise DatasetError(f"no suite named {name!r} (suites: {known})")
    return found


# --- samples ---------------------------------------------------------------------------------------


def _samples_rows(suite: Suite) -> list[dict]:
    """Every sample of `suite` with its task, in three queries: the samples, their masked functions
    and the suite's experiments with what they depend on."""
    samples = Sample.objects.filter(paper__suite=suite).select_related("paper").defer("paper__text")
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


def samples_write(dest: Path, suite: Suite) -> int:
    """Every sample of `suite` with its task, as the Parquet file `dest`; returns how many."""
    table = pa.Table.from_pylist(_samples_rows(suite), schema=SAMPLES_SCHEMA)
    pq.write_table(table, dest)
    return table.num_rows


def samples_attempted(samples: BinaryIO, attempts: BinaryIO) -> pa.Table:
    """The rows of the samples file `samples` at which the attempts file `attempts` has an attempt."""
    attempted = pc.unique(pq.read_table(attempts, columns=["sample_id"])["sample_id"])
    table = pq.read_table(samples)
    return table.filter(pc.is_in(table["sample_id"], value_set=attempted))


# --- attempts --------------------------------------------------------------------------------------


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
# Columns copied as they are read, under their own names.
_COPIED = (
    "reported_passed", "reexecution_passed", "passed", "mismatch", "held_out_passed", "status", "outcome", "failure_label",
    "exit_status", "function_diagnosis", "tolerance_ratio", "input_tokens", "output_tokens", "cost", "agent_seconds",
    "reexecution_seconds", "created_at",
)
# Columns of the attempt's run, the same for all its attempts.
_RUN_FIELDS = ("system", "system_name", "suite", "agent", "model", "agent_config", "context")


def _attempt_batch(rows: list[tuple], by_run: dict[int, dict]) -> pa.RecordBatch:
    """`rows` (values of _ATTEMPT_FIELDS) as a batch of ATTEMPTS_SCHEMA, built a column at a time."""
    read = dict(zip(_ATTEMPT_FIELDS, zip(*rows, strict=True), strict=True))
    runs = [by_run[run_id] for run_id in read["run_id"]]
    columns = {
        "attempt_id": read["id"], "run_id": read["run_id"],
        **{name: [run[name] for run in runs] for name in _RUN_FIELDS},
        "sample_id": read["sample__sample_id"], "paper_id": read["sample__paper__paper_id"], "n": read["sample__n"],
        "attempt_index": read["index"], "verified": [verdict is not None for verdict in read["reexecution_passed"]],
        "experiment_verdicts": [_verdicts(reported, reexecuted)
                                for reported, reexecuted in zip(read["reported_score"], read["reexecution_score"], strict=True)],
        **{name: read[name] for name in _COPIED},
    }
    return pa.RecordBatch.from_pydict(columns, schema=ATTEMPTS_SCHEMA)


def _attempt_batches(runs: pd.DataFrame) -> Iterator[pa.RecordBatch]:
    """The attempts with a result of the public runs in `runs` (leaderboard.rules.runs_frame),
    CHUNK at a time, in the order of the unique (run, sample, index) index."""
    if runs.empty:
        return
    by_run = {
        int(run.run_id): {"system": run.slug, "system_name": system_name(model=run.model, agent=run.agent), "suite": run.suite,
                          "agent": run.agent, "model": run.model, "agent_config": run.config_json, "context": run.context}
        for run in runs.itertuples()
    }
    attempts = (
        Attempt.objects.filter(run_id__in=list(by_run), status__in=ATTEMPT_STATUSES)
        .order_by("run_id", "sample_id", "index")
        .values_list(*_ATTEMPT_FIELDS)
    )
    rows = []
    for values in attempts.iterator(chunk_size=CHUNK):
        rows.append(values)
        if len(rows) == CHUNK:
            yield _attempt_batch(rows, by_run)
            rows = []
    if rows:
        yield _attempt_batch(rows, by_run)


class _RowGroups:
    """A Parquet writer of ATTEMPTS_SCHEMA (a context manager) taking batches of any size and
    writing row groups of ROW_GROUP rows: it holds at most one row group's rows. `finish` writes the
    last, smaller one."""

    def __init__(self, dest: Path):
        self.writer = pq.ParquetWriter(dest, ATTEMPTS_SCHEMA)
        self.pending: list[pa.RecordBatch] = []
        self.rows = 0
        self.written = 0

    def __enter__(self) -> _RowGroups:
        return self

    def __exit__(self, *exc_info) -> None:
        self.writer.close()

    def add(self, batch: pa.RecordBatch) -> None:
        self.pending.append(batch)
        self.rows += batch.num_rows
        if self.rows >= ROW_GROUP:
            table = pa.Table.from_batches(self.pending, schema=ATTEMPTS_SCHEMA)
            whole = self.rows - self.rows % ROW_GROUP
            self._write(table.slice(0, whole))
            rest = table.slice(whole)
            self.pending, self.rows = rest.to_batches(), rest.num_rows

    def finish(self) -> int:
        """Write what is left; returns how many rows were written in all."""
        self._write(pa.Table.from_batches(self.pending, schema=ATTEMPTS_SCHEMA))
        self.pending, self.rows = [], 0
        return self.written

    def _write(self, table: pa.Table) -> None:
        if table.num_rows:
            self.writer.write_table(table, row_group_size=ROW_GROUP)
            self.written += table.num_rows


def attempts_write(dest: Path, runs: pd.DataFrame) -> int:
    """The attempts with a result of the public runs in `runs` (leaderboard.rules.runs_frame) as
    the Parquet file `dest`, one system after another in the order of their slugs (as a suite's
    download puts its systems' files together); returns how many."""
    with _RowGroups(dest) as groups:
        for _, own in runs.groupby("slug", sort=True):
            for batch in _attempt_batches(own):
                groups.add(batch)
        return groups.finish()


def attempts_merge(dest: Path, parts: Iterable[BinaryIO]) -> int:
    """The attempts files `parts` (attempts_write's), one after the other, as the Parquet file
    `dest`; returns how many attempts. Each part is read a row group at a time, in Arrow's own
    columns: no attempt becomes a Python object."""
    with _RowGroups(dest) as groups:
        for part in parts:
            for batch in pq.ParquetFile(part).iter_batches(batch_size=ROW_GROUP):
                groups.add(batch)
        return groups.finish()


# --- the card and the zip ----------------------------------------------------------------------------


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


def suite_card(suite: Suite, *, samples: int, attempts: int) -> str:
    return _card(title=f"AutoExperiment: suite {suite.name}", suite=suite, samples=samples, attempts=attempts,
                 scope="every sample and every attempt of its public runs")


def system_card(suite: Suite, *, slug: str, name: str, samples: int, attempts: int) -> str:
    return _card(title=f"AutoExperiment: {name} on suite {suite.name}", suite=suite, samples=samples, attempts=attempts,
                 scope=f"the attempts of system {slug} ({name}) and the samples they were at")


def dataset_zip_write(dest: Path, *, top: str, samples: pa.Table | BinaryIO, attempts: BinaryIO, card: str) -> None:
    """The dataset's three files under the folder `top` of the zip `dest`. Parquet files are
    compressed already (snappy): stored, not deflated again."""
    with zipfile.ZipFile(dest, "w", compression=zipfile.ZIP_STORED) as bundle:
        with bundle.open(f"{top}/{SAMPLES_FILE}", "w") as entry:
            if isinstance(samples, pa.Table):
                pq.write_table(samples, entry)
            else:
                shutil.copyfileobj(samples, entry)
        with bundle.open(f"{top}/{ATTEMPTS_FILE}", "w", force_zip64=True) as entry:
            shutil.copyfileobj(attempts, entry)
        bundle.writestr(f"{top}/{CARD_FILE}", card)


# --- the command's export ----------------------------------------------------------------------------


def dataset_export(*, suite: str, dest: Path) -> DatasetSummary:
    """Write the dataset of suite `suite` (every sample, every public attempt) into `dest`, a
    directory that does not exist yet or is empty."""
    found = suite_get(suite)
    dest = Path(dest)
    if dest.exists() and (not dest.is_dir() or any(dest.iterdir())):
        raise DatasetError(f"{dest} exists and is not an empty directory")
    dest.mkdir(parents=True, exist_ok=True)
    attempts = attempts_write(dest / ATTEMPTS_FILE, runs_frame(Q(suite=found)))
    samples = samples_write(dest / SAMPLES_FILE, found)
    (dest / CARD_FILE).write_text(suite_card(found, samples=samples, attempts=attempts), encoding="utf-8")
    return DatasetSummary(samples=samples, attempts=attempts, files=FILES)
