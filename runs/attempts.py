"""Executing one attempt: claim it, build its workspace, run the agent in a sandbox, score it twice.

The two verdicts of an attempt:

- *reported*: the agent's final answer scored against gold (`runs.scoring.score_sample`);
- *re-execution*: the attempt's final patch applied to a fresh masked workspace, every experiment
  run by the harness itself in a fresh sandbox, and the numbers they print scored the same way.

`passed` (what the leaderboard counts) needs both; reported numbers that the code does not produce
set `mismatch`.

Exactly-once execution. A job may be delivered twice, a worker may die mid-attempt, recovery may
run while a slow worker still holds an attempt. So:

- `attempt_execute` starts with a conditional UPDATE (status queued -> running, `tries` + 1) and
  does nothing unless that UPDATE changed one row: a second delivery of the same job is a no-op.
- The claim's `tries` value is a fencing token: the heartbeat and the final write are conditional
  on (status running, tries = ours). A worker whose attempt was recovered and re-queued meanwhile
  finds its claim gone, stops at its next step and writes nothing.
- A heartbeat thread refreshes `heartbeat_at` every few seconds; `attempts_recover` treats a
  running attempt whose heartbeat is stale, or whose RQ job sits in the failed registry (the work
  horse was killed, or abandoned), as an infrastructure failure.

Infrastructure failures (sandbox, workspace, harness bugs, dead workers) are re-queued up to
`ATTEMPT_MAX_INFRA_RETRIES` times, then end as status `error` labelled `infrastructure`; they are
never the model's result. A model provider failure (status `error`, label `model_provider`) is not
retried automatically: an outage or a missing key would only burn the retries; `run_retry_failed`
re-queues both kinds.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import math
import os
import re
import signal
import socket
import threading
import time
import traceback
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Self

from django.conf import settings
from django.db import close_old_connections, connection, transaction
from django.db.models import F
from django.utils import timezone

from runs.agents import AGENTS, agent_from_name, load_trajectory
from runs.agents.base import (
    COST_LIMIT,
    HARNESS_ERROR,
    MODEL_ERROR,
    SANDBOX_ERROR,
    STEP_LIMIT,
    TIME_LIMIT,
)
from runs.agents.llm import ModelError, model_from_name
from runs.agents.llm.base import sendable_text
from runs.execution import ExperimentOutcome, run_experiment
from runs.models import Attempt, Experiment, Run, Sample
from runs.patches import PatchError, apply_file_patch, parse_patch
from runs.scope import OutOfScopeEdit, restrict_to_scope
from runs.scoring import ParsedAnswer, SampleScore, parse_answer, score_sample
from runs.selectors import experiment_spec, sample_experiments
from runs.services import workspace_build
from runs.workspace import CODE_DIR, WorkspaceError, experiment_label
from sandbox import SandboxError, fs, open_sandbox
from sandbox.sweep import sweep_sandboxes

logger = logging.getLogger(__name__)

# Outcomes of attempt_execute, for callers that log or count them.
SKIPPED = "skipped"  # not queued any more (done, running elsewhere, cancelled): nothing was done
DONE = "done"
ERROR = "error"
REQUEUED = "requeued"  # an infrastructure failure, queued again
LOST = "lost"  # the claim was taken away (recovered as dead) while this worker ran: nothing written

LIMIT_EXITS = (STEP_LIMIT, TIME_LIMIT, COST_LIMIT)
INFRASTRUCTURE_EXITS = (SANDBOX_ERROR, HARNESS_ERROR)
# What the re-execution keeps of each experiment's output, and of all of them together.
MAX_OUTPUT_PER_EXPERIMENT = 4_000
MAX_REEXECUTION_OUTPUT = 20_000


def max_infra_retries() -> int:
    return int(getattr(settings, "ATTEMPT_MAX_INFRA_RETRIES", 2))


def retry_delay_seconds(failures: int) -> float:
    """How long an attempt waits before the retry after its `failures`-th infrastructure failure:
    ATTEMPT_RETRY_BACKOFF_SECONDS doubled with each failure, at most
    ATTEMPT_RETRY_BACKOFF_MAX_SECONDS. Back to back, a sandbox or database outage would burn every
    retry in seconds."""
    base = float(getattr(settings, "ATTEMPT_RETRY_BACKOFF_SECONDS", 10))
    cap = float(getattr(settings, "ATTEMPT_RETRY_BACKOFF_MAX_SECONDS", 300))
    return min(cap, base * 2 ** max(0, failures - 1))


def heartbeat_seconds() -> float:
    return float(getattr(settings, "ATTEMPT_HEARTBEAT_SECONDS", 5))


def stale_seconds() -> float:
    """After how long without a heartbeat a running attempt's worker is taken for dead."""
    return float(getattr(settings, "ATTEMPT_STALE_SECONDS", 60))


def worker_identity() -> str:
    """host:pid of this process; the pid is the process doing the work (the RQ work horse)."""
    return f"{socket.gethostname()}:{os.getpid()}"


def attempt_workspace_dir(attempt_id: int, try_number: int) -> Path:
    """One directory per try: a worker presumed dead but still running keeps its own directory,
    and the new try never builds into a half-deleted one."""
    return Path(settings.WORKSPACE_ROOT) / f"attempt-{attempt_id}-try-{try_number}"


def attempt_reexecution_dir(attempt_id: int, try_number: int) -> Path:
    return Path(settings.WORKSPACE_ROOT) / f"attempt-{attempt_id}-try-{try_number}-reexecution"


def attempt_sandbox_name(attempt_id: int, try_number: int, *, submission: bool = False) -> str:
    """The name of a try's sandboxes (the re-execution's adds "-reexecution"). Containers, cgroups
    and mount points carry it, so leftovers_sweep can tell a live try's from a dead one's. It
    starts with this deployment's id: deployments (a demo and a test run, say) may share one Docker
    engine and one machine, and each sweeps only its own."""
    return f"{deployment_id()}-{'submission-' if submission else ''}attempt-{attempt_id}-try-{try_number}"


def deployment_id() -> str:
    """8 hex digits naming this deployment: its database and its workspace root."""
    database = settings.DATABASES["default"]
    key = f"{database.get('HOST')}:{database.get('PORT')}/{database.get('NAME')}|{settings.WORKSPACE_ROOT}"
    return hashlib.sha256(key.encode()).hexdigest()[:8]


def attempt_trajectory_path(attempt_id: int, try_number: int) -> Path:
    """Outside every workspace, one file per try, so a crashed try's partial trajectory is kept."""
    return Path(settings.WORKSPACE_ROOT) / "trajectories" / f"attempt-{attempt_id}-try-{try_number}.json"


class InfrastructureFailure(Exception):
    """Something that is not the model's doing kept the attempt from a result."""


class ModelProviderFailure(Exception):
    """The model could not be reached or configured (no key, malformed spec, provider down)."""


class ClaimLost(Exception):
    """This worker's claim on the attempt was taken away (it was recovered as dead)."""


# --- labels --------------------------------------------------------------------------------------


def failure_label(*, exit_status: str, final_answer_raw: str | None, answer_parsed: bool, passed: bool) -> str:
    """The failure label of a scored attempt ("" when it passed).

    Provider and infrastructure failures come first: whatever the agent managed before them is not
    its result. A limit reached without an answer is the budget's doing, no answer otherwise is
    the agent's, an answer that cannot be read is unparseable, and anything else that did not
    pass (including reported numbers the re-executed code does not produce) is a wrong answer.
    """
    if passed:
        return ""
    if exit_status == MODEL_ERROR:
        return Attempt.MODEL_PROVIDER
    if exit_status in INFRASTRUCTURE_EXITS:
        return Attempt.INFRASTRUCTURE
    if final_answer_raw is None or not final_answer_raw.strip():
        return Attempt.BUDGET_EXHAUSTED if exit_status in LIMIT_EXITS else Attempt.NO_ANSWER
    if not answer_parsed:
        return Attempt.UNPARSEABLE_ANSWER
    return Attempt.WRONG_ANSWER


# --- JSON for the database -----------------------------------------------------------------------


# Deeper values are replaced by a marker: a model's tool arguments can nest a thousand levels.
JSON_SAFE_DEPTH = 100


def json_safe(value):
    """`value` as JSON Postgres accepts: non-finite floats as strings ("NaN", "Infinity",
    "-Infinity", as scoring's to_dict writes them), NUL characters and lone surrogates dropped
    from strings, values deeper than JSON_SAFE_DEPTH and integers too long to print replaced by a
    marker string, values JSON cannot hold by their repr.

    Iterative, so no value can exhaust the stack however deep it nests."""
    holder: list = [None]
    # (item, where the converted item goes, its key or index there, depth)
    stack: list[tuple] = [(value, holder, 0, 0)]
    while stack:
        item, target, slot, depth = stack.pop()
        if depth > JSON_SAFE_DEPTH:
            target[slot] = f"[nested deeper than {JSON_SAFE_DEPTH} levels: not stored]"
        elif isinstance(item, dict):
            converted: dict = {}
            target[slot] = converted
            children = []
            for key, inner in item.items():
                safe_key = _text(str(key))
                converted[safe_key] = None  # keeps the keys' order
                children.append((inner, converted, safe_key, depth + 1))
            stack.extend(reversed(children))  # in order, so a repeated key keeps its last value
        elif isinstance(item, (list, tuple)):
            converted_list = [None] * len(item)
            target[slot] = converted_list
            stack.extend((inner, converted_list, index, depth + 1) for index, inner in reversed(list(enumerate(item))))
        else:
            target[slot] = _json_scalar(item)
    return holder[0]


# Python refuses to print integers of more than 4,300 digits (sys.get_int_max_str_digits), and
# Postgres' JSON is text: this many bits is about 3,900 digits.
_MAX_INT_BITS = 13_000


def _json_scalar(value):
    if isinstance(value, float):
        if math.isnan(value):
            return "NaN"
        if math.isinf(value):
            return "Infinity" if value > 0 else "-Infinity"
        return value
    if isinstance(value, str):
        return _text(value)
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > _MAX_INT_BITS:
        return f"[an integer of about {int(value.bit_length() * math.log10(2)):,} digits: not stored]"
    if value is None or isinstance(value, (bool, int)):
        return value
    return _text(repr(value))


def _text(value: str | None) -> str | None:
    """Text Postgres stores: no NUL, no lone surrogates (file names with undecodable bytes, or a
    model's "\\udc80", reach strings as surrogates; they become U+FFFD)."""
    if value is None:
        return None
    return sendable_text(value).replace("\x00", "")


# --- scoring -------------------------------------------------------------------------------------


def scoring_specs(experiments: list[Experiment]) -> list[tuple]:
    """What score_sample needs, keyed by the labels the workspace gives the experiments."""
    return [
        (experiment_label(number), experiment.gold_result, experiment.rtol, experiment.atol)
        for number, experiment in enumerate(experiments, start=1)
    ]


def score_dict(score: SampleScore, experiments: list[Experiment]) -> dict:
    """SampleScore.to_dict with each experiment's database id next to its label."""
    data = score.to_dict()
    ids = {experiment_label(number): e.exp_id for number, e in enumerate(experiments, start=1)}
    for item in data["experiments"]:
        item["exp_id"] = ids.get(item["experiment_id"])
    return json_safe(data)


# --- re-execution --------------------------------------------------------------------------------


@dataclass
class Reexecution:
    """The harness's own run of an attempt's final code."""

    score: dict | None
    passed: bool
    error: str = ""
    output: str = ""
    experiment_seconds: float = 0.0
    timings: dict = field(default_factory=dict)
    # What the harness left out of the final patch as outside the task (runs.scope), as JSON.
    out_of_scope_edits: list = field(default_factory=list)


def scoped_final_code(*, patch: str, workspace: Path) -> tuple[str | None, list[OutOfScopeEdit]]:
    """Apply a final patch (paths a/code/..., b/code/...) to a fresh masked workspace, keeping
    only what the task allows: the masked functions' new bodies, plus new imports and new
    definitions in the files that hold them (runs.scope). Every other change is left out and
    returned as an out-of-scope edit. Returns (why the patch is refused or does not apply, or
    None; the out-of-scope edits).

    The patch is applied in memory (runs.patches, one parser for agents' and uploaders' patches)
    and only the scoped files are written, through sandbox.fs: nothing of the patch can reach a
    path outside them, a link, or anything but text.
    """
    try:
        file_patches = parse_patch(patch)
    except PatchError as error:
        return f"the final patch is refused: {error}", []
    task = json.loads((workspace / "task.json").read_text(encoding="utf-8"))
    functions: dict[str, list[str]] = {}
    for function in task["missing_functions"]:
        functions.setdefault(function["file"], []).append(function["name"])
    masked = {path: _workspace_text(workspace, path) for path in functions}
    masked = {path: text for path, text in masked.items() if text is not None}
    before: dict[str, str | None] = {}
    patched: dict[str, str | None] = {}
    for file_patch in file_patches:
        original = masked.get(file_patch.path) if file_patch.path in masked else _workspace_text(workspace, file_patch.path)
        before[file_patch.path] = original
        try:
            patched[file_patch.path] = apply_file_patch(original, file_patch)
        except PatchError as error:
            return f"the final patch does not apply to {file_patch.path}: {error}", []
    scoped = restrict_to_scope(masked=masked, functions=functions, patched=patched, before=before)
    for path, text in scoped.files.items():
        fs.write_bytes(workspace, path, text.encode("utf-8", "surrogateescape"))
    return None, scoped.out_of_scope


def _workspace_text(workspace: Path, path: str) -> str | None:
    """A harness-built workspace's file as text, None when it is absent (or not a regular file)."""
    try:
        data, _ = fs.read_bytes(workspace, path, limit=64 * 2**20)
    except OSError:  # absent, a link or special file, a name too long (a patch may name anything)
        return None
    return data.decode("utf-8", "surrogateescape")


def reexecute(*, sample: Sample, patch: str, context: str, backend: str, dest: Path, name: str) -> Reexecution:
    """Apply `patch` to a fresh masked workspace of `sample`, run its experiments in a fresh sandbox
    and score what they print. Raises InfrastructureFailure when the workspace or sandbox breaks;
    what the code does (crash, timeout, wrong numbers, a patch that does not apply) is the verdict."""
    timings: dict[str, float] = {}
    experiments = sample_experiments(sample=sample)
    specs = scoring_specs(experiments)
    started = time.monotonic()
    remove_tree(dest)
    try:
        workspace_build(sample=sample, dest=dest, context=context)
    except (WorkspaceError, OSError) as error:
        raise InfrastructureFailure(f"re-execution workspace could not be built: {error}") from error
    timings["workspace"] = time.monotonic() - started

    started = time.monotonic()
    error, out_of_scope = scoped_final_code(patch=patch, workspace=dest)
    out_of_scope_edits = json_safe([dataclasses.asdict(edit) for edit in out_of_scope])
    timings["patch"] = time.monotonic() - started
    if error:
        score = score_sample(experiments=specs, answer={})
        return Reexecution(score=score_dict(score, experiments), passed=False, error=error, timings=timings)

    outcomes: list[ExperimentOutcome] = []
    started = time.monotonic()
    try:
        sandbox = open_sandbox(backend, dest, name=name, image=_image(backend))
    except SandboxError as error:
        raise InfrastructureFailure(f"re-execution sandbox could not be opened: {error}") from error
    timings["sandbox_open"] = time.monotonic() - started
    try:
        for experiment in experiments:
            outcomes.append(run_experiment(sandbox, experiment_spec(experiment)))
    except SandboxError as error:
        raise InfrastructureFailure(f"re-execution sandbox failed: {error}") from error
    finally:
        closing = time.monotonic()
        sandbox.close()
        timings["sandbox_close"] = time.monotonic() - closing
    experiment_seconds = sum(outcome.duration for outcome in outcomes)
    timings["experiments"] = experiment_seconds

    started = time.monotonic()
    answer = {
        experiment_label(number): outcome.result
        for number, outcome in enumerate(outcomes, start=1)
        if outcome.result is not None
    }
    score = score_sample(experiments=specs, answer=answer)
    timings["scoring"] = time.monotonic() - started
    failures = [
        f"{experiment_label(number)}: {outcome.error}" for number, outcome in enumerate(outcomes, start=1) if outcome.error
    ]
    return Reexecution(
        score=score_dict(score, experiments),
        passed=score.passed,
        error="; ".join(failures),
        output=_bounded_outputs(outcomes),
        experiment_seconds=experiment_seconds,
        timings=timings,
        out_of_scope_edits=out_of_scope_edits,
    )


def _bounded_outputs(outcomes: list[ExperimentOutcome]) -> str:
    parts = []
    for number, outcome in enumerate(outcomes, start=1):
        text = outcome.output
        if len(text) > MAX_OUTPUT_PER_EXPERIMENT:
            half = MAX_OUTPUT_PER_EXPERIMENT // 2
            text = f"{text[:half]}\n[... {len(text) - 2 * half} characters cut ...]\n{text[-half:]}"
        status = outcome.error or "ok"
        parts.append(f"=== {experiment_label(number)} (exit {outcome.exit_code}, {outcome.duration:.2f} s, {status}) ===\n{text}\n")
    output = "".join(parts)
    return output if len(output) <= MAX_REEXECUTION_OUTPUT else output[:MAX_REEXECUTION_OUTPUT] + "\n[... cut ...]\n"


def _image(backend: str) -> str | None:
    return getattr(settings, "SANDBOX_IMAGE", None) if backend == "docker" else None


# --- the heartbeat -------------------------------------------------------------------------------


class _Heartbeat:
    """Refreshes the claimed attempt's heartbeat_at from a thread; notices a lost claim."""

    def __init__(self, attempt_id: int, tries: int, interval: float) -> None:
        self.attempt_id, self.tries, self.interval = attempt_id, tries, interval
        self.lost = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._beat, name=f"heartbeat-attempt-{attempt_id}", daemon=True)

    def __enter__(self) -> Self:
        self._thread.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._thread.join(timeout=30)

    def _beat(self) -> None:
        try:
            while not self._stop.wait(self.interval):
                try:
                    updated = Attempt.objects.filter(
                        pk=self.attempt_id, status=Attempt.RUNNING, tries=self.tries
                    ).update(heartbeat_at=timezone.now())
                except Exception:
                    logger.exception("heartbeat of attempt %s failed", self.attempt_id)
                    continue
                if not updated:
                    self.lost = True
                    return
        finally:
            connection.close()  # this thread's own connection

    def check(self, _step=None) -> None:
        """The agent's on_step callback: stop working on an attempt that is no longer ours."""
        if self.lost:
            raise ClaimLost(f"attempt {self.attempt_id} try {self.tries} was taken over")


# --- executing -----------------------------------------------------------------------------------


@dataclass
class _Result:
    """What one execution produced, before it is written."""

    fields: dict
    timings: dict


def attempt_claim(*, attempt_id: int, job_id: str = "") -> Attempt | None:
    """Claim a queued attempt for this process: the conditional UPDATE that makes a job delivered
    twice run once. Returns the claimed attempt, or None when it was not queued."""
    now = timezone.now()
    claimed = Attempt.objects.filter(pk=attempt_id, status=Attempt.QUEUED).update(
        status=Attempt.RUNNING,
        tries=F("tries") + 1,
        claimed_by=worker_identity(),
        claimed_at=now,
        heartbeat_at=now,
        finished_at=None,
        job_id=job_id,
    )
    if claimed != 1:
        return None
    return Attempt.objects.select_related("run", "sample__paper").get(pk=attempt_id)


def attempt_execute(*, attempt_id: int, job_id: str = "", requeue: bool = True) -> str:
    """Execute a queued attempt once: claim it, run the agent, score both verdicts, record.

    Does nothing (returns SKIPPED) unless the attempt is queued, so a duplicate delivery, a
    cancelled attempt or one already taken by another worker is left alone. `requeue=False` leaves
    an infrastructure failure queued without enqueueing a job (for in-process runs, which pick it
    up again themselves). Returns DONE, ERROR, REQUEUED, LOST or SKIPPED.
    """
    attempt = attempt_claim(attempt_id=attempt_id, job_id=job_id)
    if attempt is None:
        logger.info("attempt %s is not queued; nothing to do", attempt_id)
        return SKIPPED
    heartbeat = _Heartbeat(attempt.pk, attempt.tries, heartbeat_seconds())
    try:
        with heartbeat:
            result = _perform(attempt, heartbeat)
    except ClaimLost:
        logger.warning("attempt %s try %s: claim lost, result discarded", attempt.pk, attempt.tries)
        return LOST
    except InfrastructureFailure as failure:
        return attempt_infra_failure(
            attempt_id=attempt.pk, tries=attempt.tries, reason=str(failure), requeue=requeue
        )
    except ModelProviderFailure as failure:
        result = _Result(
            fields={
                "status": Attempt.ERROR,
                "exit_status": MODEL_ERROR,
                "exit_message": str(failure),
                "failure_label": Attempt.MODEL_PROVIDER,
                "failure_detail": str(failure),
            },
            timings={},
        )
    except Exception as error:
        logger.exception("attempt %s failed in the harness", attempt.pk)
        reason = f"harness error: {type(error).__name__}: {error}\n{traceback.format_exc()[-4000:]}"
        return attempt_infra_failure(attempt_id=attempt.pk, tries=attempt.tries, reason=reason, requeue=requeue)
    finally:
        _cleanup(attempt.pk, attempt.tries)
    return _record(attempt, result)


def _perform(attempt: Attempt, heartbeat: _Heartbeat) -> _Result:
    run: Run = attempt.run
    sample = attempt.sample
    timings: dict[str, float] = {}
    total_started = time.monotonic()

    workspace = attempt_workspace_dir(attempt.pk, attempt.tries)
    trajectory_path = attempt_trajectory_path(attempt.pk, attempt.tries)
    started = time.monotonic()
    # Crashed earlier tries leave their directories behind (and so may this try, run before).
    for leftover in Path(settings.WORKSPACE_ROOT).glob(f"attempt-{attempt.pk}-try-*"):
        if leftover.is_dir() and not leftover.is_symlink():
            remove_tree(leftover)
    try:
        workspace_build(sample=sample, dest=workspace, context=run.context)
        task = json.loads((workspace / "task.json").read_text(encoding="utf-8"))
    except (WorkspaceError, OSError, ValueError) as error:
        raise InfrastructureFailure(f"workspace could not be built: {error}") from error
    timings["workspace"] = time.monotonic() - started

    agent = _agent(attempt, task)
    model = _model(run)

    started = time.monotonic()
    try:
        sandbox = open_sandbox(
            run.sandbox_backend, workspace, name=attempt_sandbox_name(attempt.pk, attempt.tries), image=_image(run.sandbox_backend)
        )
    except SandboxError as error:
        raise InfrastructureFailure(f"sandbox could not be opened: {error}") from error
    timings["sandbox_open"] = time.monotonic() - started

    started = time.monotonic()
    try:
        result = agent.run(
            model=model, sandbox=sandbox, workspace=workspace, trajectory_path=trajectory_path, on_step=heartbeat.check
        )
    except Exception:
        if heartbeat.lost:  # e.g. the new try removed our sandbox: not a failure worth recording
            raise ClaimLost(f"attempt {attempt.pk} try {attempt.tries} was taken over") from None
        raise
    finally:
        timings["agent"] = time.monotonic() - started
        closing = time.monotonic()
        sandbox.close()
        timings["sandbox_close"] = time.monotonic() - closing
    heartbeat.check()

    trajectory = result.trajectory
    if result.exit_status in INFRASTRUCTURE_EXITS:
        raise InfrastructureFailure(f"agent ended with {result.exit_status}: {result.exit_message}")

    experiments = sample_experiments(sample=sample)
    specs = scoring_specs(experiments)
    raw = result.final_answer_raw
    parsed = result.final_answer if result.final_answer is not None else (parse_answer(raw) if raw is not None else None)
    started = time.monotonic()
    try:
        reported = score_sample(experiments=specs, answer=parsed) if parsed is not None else None
    except Exception as error:  # noqa: BLE001 - an answer the scorer cannot take is the agent's unreadable answer
        logger.exception("attempt %s: the reported answer could not be scored", attempt.pk)
        parsed = ParsedAnswer(None, f"the answer could not be scored ({type(error).__name__}: {error})"[:2000], "none")
        reported = None
    timings["scoring"] = time.monotonic() - started

    patch = trajectory.final_patch or ""
    header = trajectory.header
    fields = {
        "exit_status": result.exit_status,
        "exit_message": _text(result.exit_message) or "",
        "final_answer_raw": _text(raw),
        "parsed_answer": json_safe(parsed.value) if parsed is not None and parsed.ok else None,
        "reported_score": score_dict(reported, experiments) if reported is not None else None,
        "reported_passed": bool(reported and reported.passed),
        "final_patch": _text(patch),
        "input_tokens": header.input_tokens,
        "output_tokens": header.output_tokens,
        "cost": None if header.cost_unknown else header.cost,
        "trajectory": json_safe(trajectory.to_dict()),
        "agent_seconds": timings["agent"],
    }

    if result.exit_status == MODEL_ERROR:
        # Not the model's result: nothing is re-executed or scored as its verdict.
        fields.update(
            status=Attempt.ERROR, failure_label=Attempt.MODEL_PROVIDER, failure_detail=fields["exit_message"],
            passed=False, mismatch=False,
        )
        return _Result(fields=fields, timings=_finish_timings(timings, total_started, 0.0))

    started = time.monotonic()
    reexecution = reexecute(
        sample=sample,
        patch=patch,
        context=run.context,
        backend=run.sandbox_backend,
        dest=attempt_reexecution_dir(attempt.pk, attempt.tries),
        name=attempt_sandbox_name(attempt.pk, attempt.tries) + "-reexecution",
    )
    heartbeat.check()
    fields["reexecution_seconds"] = time.monotonic() - started
    timings.update({f"reexecution_{key}": value for key, value in reexecution.timings.items()})

    reported_passed = fields["reported_passed"]
    passed = reported_passed and reexecution.passed
    fields.update(
        status=Attempt.DONE,
        reexecution_score=reexecution.score,
        reexecution_passed=reexecution.passed,
        reexecution_error=_text(reexecution.error),
        reexecution_output=_text(reexecution.output),
        out_of_scope_edits=reexecution.out_of_scope_edits,
        passed=passed,
        mismatch=reported_passed and not reexecution.passed,
        failure_label=failure_label(
            exit_status=result.exit_status,
            final_answer_raw=raw,
            answer_parsed=bool(parsed is not None and parsed.ok),
            passed=passed,
        ),
        failure_detail="reported numbers pass but the re-executed code does not produce them"
        if reported_passed and not reexecution.passed
        else "",
    )
    return _Result(fields=fields, timings=_finish_timings(timings, total_started, reexecution.experiment_seconds))


def _finish_timings(timings: dict, total_started: float, experiment_seconds: float) -> dict:
    total = time.monotonic() - total_started
    timings["total"] = total
    timings["experiments"] = experiment_seconds
    # Everything but the agent itself and the experiments the harness ran: workspaces, sandboxes,
    # patching, scoring, database writes in between.
    timings["harness"] = max(0.0, total - timings.get("agent", 0.0) - experiment_seconds)
    return timings


def _agent(attempt: Attempt, task: dict):
    """The run's agent, configured: budgets it has settings for, gold bodies for gold and mutant."""
    run = attempt.run
    factory = AGENTS.get(run.agent)
    if factory is None:
        raise InfrastructureFailure(f"agent {run.agent!r} is not registered in this worker (known: {', '.join(sorted(AGENTS))})")
    settings_ = {"max_steps": run.max_steps, "max_seconds": run.max_seconds, "max_cost": run.max_cost}
    settings_.update(run.agent_config or {})
    if getattr(factory, "needs_gold_bodies", False):
        from runs.agents.baselines import gold_bodies_for

        hints = {
            (f"{CODE_DIR}/{function.file}", function.name): function.line_hint
            for function in attempt.sample.functions.all()
        }
        try:
            settings_["gold_bodies"] = gold_bodies_for(
                code_dir=Path(attempt.sample.paper.code_dir), missing_functions=task["missing_functions"], line_hints=hints
            )
        except Exception as error:
            raise InfrastructureFailure(f"gold bodies could not be read: {error}") from error
    if run.agent == "mutant":
        # Each attempt of a run plants a different bug, reproducibly.
        settings_.setdefault("seed", run.sample_seed * 1000 + attempt.index)
    return construct_agent(run.agent, settings_, optional=("max_steps", "max_seconds", "max_cost"))


def construct_agent(name: str, settings_: dict, *, optional: tuple[str, ...] = ()):
    """agent_from_name, leaving out the budgets an agent has no setting for (the baselines only
    have a time limit). A setting of the run's agent_config that the agent rejects is an error."""
    settings_ = dict(settings_)
    while True:
        try:
            return agent_from_name(name, **settings_)
        except TypeError as error:
            unknown = [key for key in optional if key in settings_ and f"'{key}'" in str(error)]
            if not unknown:
                raise InfrastructureFailure(f"agent {name!r} could not be configured: {error}") from error
            for key in unknown:
                settings_.pop(key)
        except ValueError as error:
            raise InfrastructureFailure(f"agent {name!r} could not be configured: {error}") from error


def _model(run: Run):
    if not run.model:
        return None
    try:
        return model_from_name(run.model)
    except (ModelError, ValueError) as error:
        raise ModelProviderFailure(f"model {run.model!r} is not available: {error}") from error


def _record(attempt: Attempt, result: _Result) -> str:
    timings = result.timings
    fields = dict(result.fields)
    fields.update(
        finished_at=timezone.now(),
        timings=json_safe(timings),
        harness_seconds=timings.get("harness"),
        experiment_seconds=timings.get("experiments"),
    )
    written = Attempt.objects.filter(pk=attempt.pk, status=Attempt.RUNNING, tries=attempt.tries).update(**fields)
    if not written:
        logger.warning("attempt %s try %s: claim lost before the result was written", attempt.pk, attempt.tries)
        return LOST
    run_mark_finished(run_id=attempt.run_id)
    return DONE if fields["status"] == Attempt.DONE else ERROR


def _cleanup(attempt_id: int, try_number: int) -> None:
    for directory in (attempt_workspace_dir(attempt_id, try_number), attempt_reexecution_dir(attempt_id, try_number)):
        remove_tree(directory)


def remove_tree(path: Path) -> None:
    """Removes a workspace the agent controlled, whatever it left in it (links, FIFOs, any names,
    any depth). A failure is logged, never raised: it must not change the attempt's result, and
    the sweep (leftovers_sweep) tries again later."""
    try:
        fs.remove_tree(path)
    except OSError:
        logger.exception("could not remove %s; the sweep will try again", path)


def run_mark_finished(*, run_id: int) -> None:
    """Stamp the run's finished_at once no attempt of it is queued or running."""
    active = Attempt.objects.filter(run_id=run_id, status__in=[Attempt.QUEUED, Attempt.RUNNING]).exists()
    if not active:
        Run.objects.filter(pk=run_id, finished_at__isnull=True).update(finished_at=timezone.now())


# --- infrastructure failures and crash recovery --------------------------------------------------


def attempt_infra_failure(*, attempt_id: int, tries: int, reason: str, requeue: bool = True) -> str:
    """Record an infrastructure failure of try `tries`: queue the attempt again while retries are
    left (enqueueing its job on commit, after retry_delay_seconds, unless `requeue` is False),
    else end it as error / infrastructure. The try's partial trajectory is attached. Returns
    REQUEUED, ERROR or LOST."""
    trajectory = _partial_trajectory(attempt_id, tries)
    with transaction.atomic():
        attempt = Attempt.objects.select_for_update().filter(pk=attempt_id).first()
        if attempt is None or attempt.status != Attempt.RUNNING or attempt.tries != tries:
            return LOST
        attempt.infra_failures += 1
        entry = {
            "try": tries,
            "worker": attempt.claimed_by,
            "job_id": attempt.job_id,
            "at": timezone.now().isoformat(),
            "reason": _text(reason)[:8000],
        }
        delay = retry_delay_seconds(attempt.infra_failures)
        if attempt.infra_failures <= max_infra_retries():
            attempt.status = Attempt.QUEUED
            outcome = REQUEUED
            if requeue:  # the run page shows when (in-process runs and resumes retry at once)
                entry["retry_at"] = (timezone.now() + timedelta(seconds=delay)).isoformat()
        else:
            attempt.status = Attempt.ERROR
            attempt.failure_label = Attempt.INFRASTRUCTURE
            attempt.failure_detail = _text(reason)[:8000]
            attempt.finished_at = timezone.now()
            attempt.passed = False
            attempt.mismatch = False
            outcome = ERROR
        attempt.infra_history = [*attempt.infra_history, entry]
        if trajectory is not None:
            attempt.trajectory = trajectory
        attempt.heartbeat_at = None
        attempt.save()
        if outcome == REQUEUED and requeue:
            from runs.evaluation import attempts_enqueue

            attempts_enqueue(attempts=[attempt], delay=delay)
    if outcome == ERROR:
        run_mark_finished(run_id=attempt.run_id)
    logger.warning("attempt %s try %s: infrastructure failure (%s): %s", attempt_id, tries, outcome, reason.splitlines()[0] if reason else "")
    return outcome


def _partial_trajectory(attempt_id: int, tries: int) -> dict | None:
    path = attempt_trajectory_path(attempt_id, tries)
    if not path.is_file():
        return None
    try:
        return json_safe(load_trajectory(path).to_dict())
    except Exception:
        logger.exception("partial trajectory %s could not be read", path)
        return None


@dataclass
class Recovered:
    attempt_id: int
    reason: str
    outcome: str


def overrun_grace_seconds() -> float:
    """How long past its own budget (agent time plus the re-execution's experiment timeouts) a
    running attempt may go on before the recovery kills it, heartbeat or not."""
    return float(getattr(settings, "ATTEMPT_OVERRUN_GRACE_SECONDS", 300))


def attempt_deadline(attempt: Attempt):
    """When a running attempt is overdue: claimed, plus the run's time budget, plus every
    experiment's timeout (re-execution), plus the grace."""
    timeouts = sum(experiment.timeout_seconds for experiment in sample_experiments(sample=attempt.sample))
    return attempt.claimed_at + timedelta(seconds=attempt.run.max_seconds + timeouts + overrun_grace_seconds())


def attempts_recover(*, stale_after: float | None = None, run: Run | None = None, requeue: bool = True) -> list[Recovered]:
    """Find running attempts whose worker died, or that overran their budget, and settle them.

    Dead means: its RQ job is in the failed registry (the work horse was killed, or RQ found the
    job abandoned), its process is gone (checked on the same host only), or its heartbeat is
    older than `stale_after` seconds (default ATTEMPT_STALE_SECONDS; a machine lost). Each is re-queued while infra
    retries are left, else ends as error / infrastructure.

    Overrun means still running past `attempt_deadline`, with a fresh heartbeat or not (a worker
    stuck in something the agent set up keeps beating): its work horse is killed and the attempt
    ends done and failed, labelled budget_exhausted: what the agent caused is its result.

    Fenced by the try number, so running it concurrently with a live worker or another recovery
    never double-counts. Then sweeps the leftovers (containers, cgroups, directories) of tries
    that are no longer running.
    """
    stale_after = stale_seconds() if stale_after is None else stale_after
    running = Attempt.objects.filter(status=Attempt.RUNNING)
    if run is not None:
        running = running.filter(run=run)
    running = list(running.select_related("run", "sample__paper"))
    recovered = []
    if running:
        failed = failed_jobs_get(job_ids=[attempt.job_id for attempt in running if attempt.job_id])
        failed_jobs = {job_id: job.reason for job_id, job in failed.items()}
        cutoff = timezone.now() - timedelta(seconds=stale_after)
        for attempt in running:
            if attempt.claimed_at is not None and timezone.now() > attempt_deadline(attempt):
                outcome = attempt_overrun(attempt=attempt)
                if outcome != LOST:
                    recovered.append(Recovered(attempt.pk, "overran its time budget", outcome))
                continue
            if attempt.job_id and attempt.job_id in failed_jobs:
                reason = f"worker died: its job {attempt.job_id} is in RQ's failed registry ({failed_jobs[attempt.job_id]})"
            elif _process_gone(attempt.claimed_by):
                reason = f"worker died: its process {attempt.claimed_by} no longer exists"
            elif attempt.heartbeat_at is None or attempt.heartbeat_at < cutoff:
                age = (timezone.now() - attempt.heartbeat_at).total_seconds() if attempt.heartbeat_at else math.inf
                reason = f"worker presumed dead: no heartbeat for {age:.0f} s (stale after {stale_after:g} s)"
            else:
                continue
            outcome = attempt_infra_failure(attempt_id=attempt.pk, tries=attempt.tries, reason=reason, requeue=requeue)
            if outcome != LOST:
                recovered.append(Recovered(attempt.pk, reason, outcome))
    leftovers_sweep()
    return recovered


OVERRAN = "overran"


def attempt_overrun(*, attempt: Attempt) -> str:
    """End a running attempt that overran its budget: kill its worker's work horse, record it as
    done and failed (budget_exhausted, exit status time_limit) with its partial trajectory.
    Returns OVERRAN, or LOST when the try had already ended."""
    deadline = attempt_deadline(attempt)
    overdue = (timezone.now() - deadline).total_seconds()
    detail = (
        f"killed by the harness: still running {overdue:.0f} s past its deadline (time budget "
        f"{attempt.run.max_seconds:g} s, the experiments' timeouts and {overrun_grace_seconds():g} s of grace)"
    )
    fields = {
        "status": Attempt.DONE, "exit_status": TIME_LIMIT, "exit_message": detail, "failure_label": Attempt.BUDGET_EXHAUSTED,
        "failure_detail": detail, "passed": False, "mismatch": False, "finished_at": timezone.now(), "heartbeat_at": None,
    }
    trajectory = _partial_trajectory(attempt.pk, attempt.tries)
    if trajectory is not None:
        fields["trajectory"] = trajectory
    written = Attempt.objects.filter(pk=attempt.pk, status=Attempt.RUNNING, tries=attempt.tries).update(**fields)
    if not written:
        return LOST
    _kill_work_horse(attempt)
    run_mark_finished(run_id=attempt.run_id)
    logger.warning("attempt %s try %s: %s", attempt.pk, attempt.tries, detail)
    return OVERRAN


def _kill_work_horse(attempt: Attempt) -> None:
    """Stop the process executing an attempt whose try has been settled without it: SIGKILL on this
    host, RQ's kill-horse command elsewhere. An in-process run (run_eval --sync) is left alone: it
    is the user's own command, and it finds its claim gone at its next step."""
    if attempt.job_id == "in-process":
        return
    pid = _local_pid(attempt.claimed_by)
    if pid is not None and pid != os.getpid():
        try:
            os.kill(pid, signal.SIGKILL)
        except (ProcessLookupError, PermissionError):
            pass
        return
    try:
        from rq.command import send_kill_horse_command

        from runs.evaluation import evaluation_queue

        queue = evaluation_queue()
        job = queue.fetch_job(attempt.job_id) if attempt.job_id else None
        if job is not None and job.worker_name:
            send_kill_horse_command(queue.connection, job.worker_name)
    except Exception:  # noqa: BLE001 - the try is settled either way; its worker stops at its next step
        logger.warning("could not stop the worker of attempt %s", attempt.pk, exc_info=True)


# A try's workspace directories, and (after the deployment id) its sandboxes.
_TRY_NAME = re.compile(r"^(submission-)?attempt-(\d+)-try-(\d+)(?:-reexecution)?$")
# Timestamps of files and containers may lag the clock a little.
_SWEEP_CLOCK_MARGIN = 1.0
_DEPLOYMENT_PREFIX = re.compile(r"^([0-9a-f]{8})-(?=(?:submission-)?attempt-)")


def leftovers_sweep(*, unnamed_after: float | None = None) -> list[str]:
    """Remove what tries that are no longer running left behind: their containers, cgroups and
    mount points (sandbox.sweep), and their workspace directories (whatever the agent put in
    them). Sandboxes that belong to no attempt (suite checks, probes) are removed once older than
    `unnamed_after` seconds (default ATTEMPT_SWEEP_UNNAMED_SECONDS, a day). Runs at worker start
    and with every recovery. Returns a line per removed thing."""
    unnamed_after = float(getattr(settings, "ATTEMPT_SWEEP_UNNAMED_SECONDS", 86400)) if unnamed_after is None else unnamed_after
    # A try claimed after this moment may already have made its sandbox when the sweep lists it:
    # anything younger than the live set below is left for the next sweep.
    checked_at = time.time()
    live = set(Attempt.objects.filter(status=Attempt.RUNNING).values_list("pk", "tries"))
    live_submissions = set(
        Attempt.objects.filter(
            run__submission__isnull=False, status=Attempt.DONE, reexecution_passed__isnull=True, heartbeat_at__isnull=False
        ).values_list("pk", "tries")
    )
    ours = deployment_id()

    def is_live_try(name: str, age: float) -> bool:
        if age < time.time() - checked_at + _SWEEP_CLOCK_MARGIN:
            return True
        match = _TRY_NAME.match(name)
        return match is not None and (int(match.group(2)), int(match.group(3))) in (live_submissions if match.group(1) else live)

    def is_live(name: str, age: float) -> bool:
        prefix = _DEPLOYMENT_PREFIX.match(name)
        if prefix is None:
            return age < unnamed_after
        if prefix.group(1) != ours:
            return True  # another deployment's: it sweeps its own
        return is_live_try(name[prefix.end():], age)

    removed = sweep_sandboxes(is_live)
    root = Path(settings.WORKSPACE_ROOT)
    if root.is_dir():
        for directory in root.iterdir():
            if directory.is_dir() and not directory.is_symlink() and _TRY_NAME.match(directory.name):
                # The directory's mtime is no earlier than its creation: older than the live set means made before it.
                if not is_live_try(directory.name, time.time() - directory.lstat().st_mtime):
                    remove_tree(directory)
                    removed.append(f"directory {directory}")
    if removed:
        logger.info("swept leftovers of dead tries: %s", ", ".join(removed))
    return removed


def _local_pid(claimed_by: str) -> int | None:
    """The pid in a claim (host:pid, see worker_identity) when it was made on this host."""
    host, _, pid = claimed_by.rpartition(":")
    return int(pid) if host == socket.gethostname() and pid.isdigit() else None


def _process_gone(claimed_by: str) -> bool:
    """Whether the process that claimed an attempt is known to be dead: only decidable on its own
    host (a killed `run_eval --sync`, a worker on this machine). Elsewhere the heartbeat decides."""
    pid = _local_pid(claimed_by)
    if pid is None:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    try:  # a killed process nobody has reaped yet still answers signal 0
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return False
    return state in ("Z", "X")


@dataclass
class FailedJob:
    """An evaluation job in RQ's failed registry."""

    job_id: str
    reason: str  # the last line of what it raised ("failed" when RQ kept nothing)
    worker: str  # the RQ worker that ran it, "" when unknown
    failed_at: str  # ISO time, "" when unknown


def failure_recorded(history: list, failure: FailedJob) -> bool:
    """Whether an attempt's infra_history ends with `failure` (runs.evaluation.
    attempts_record_unstarted writes each failure of a job that never claimed its attempt once)."""
    last = history[-1] if history else {}
    return last.get("job_id") == failure.job_id and (not failure.failed_at or last.get("at") == failure.failed_at)


def retry_in_seconds(entry: dict) -> float | None:
    """Seconds until the retry an infra_history entry scheduled is due (0 once due); None when it
    scheduled none."""
    retry_at = entry.get("retry_at")
    if not retry_at:
        return None
    return max(0.0, (datetime.fromisoformat(retry_at) - timezone.now()).total_seconds())


# Fetching each failed job costs two round trips: past this many the rest get a generic reason.
FAILED_JOB_DETAILS_LIMIT = 200


def failed_jobs_get(*, job_ids: Iterable[str] | None = None, cleanup: bool = True) -> dict[str, FailedJob]:
    """The evaluation queue's failed jobs among `job_ids` (all of them when None), by id. With
    `cleanup`, RQ first moves abandoned jobs (those of dead workers) from the started to the failed
    registry. Empty when Redis is unreachable: the heartbeat still finds dead workers."""
    from runs.evaluation import evaluation_queue

    try:
        queue = evaluation_queue()
        if cleanup:
            queue.started_job_registry.cleanup()
        registry = queue.failed_job_registry
        if job_ids is None:
            ids = registry.get_job_ids()
        else:
            wanted = sorted(set(job_ids))
            with queue.connection.pipeline(transaction=False) as pipeline:
                for job_id in wanted:
                    pipeline.zscore(registry.key, job_id)
                scores = pipeline.execute() if wanted else []
            ids = [job_id for job_id, score in zip(wanted, scores) if score is not None]
        failed = {}
        for number, job_id in enumerate(ids):
            if number >= FAILED_JOB_DETAILS_LIMIT:
                failed[job_id] = FailedJob(job_id, "failed (see RQ's failed registry)", "", "")
                continue
            job = queue.fetch_job(job_id)
            result = job.latest_result() if job is not None else None
            text = ((result.exc_string if result is not None else "") or "").strip().splitlines()
            when = result.created_at if result is not None else (job.ended_at if job is not None else None)
            failed[job_id] = FailedJob(
                job_id=job_id,
                reason=_text(text[-1].strip()[:2000]) if text else "failed",
                worker=_text(job.worker_name or "") if job is not None else "",
                failed_at=when.isoformat() if when is not None else "",
            )
        return failed
    except Exception:
        logger.warning("RQ's failed registry could not be read (recovery goes by heartbeats only)", exc_info=True)
        return {}


def reset_connections() -> None:
    """Before a job: drop database connections a forked work horse inherited or that went stale."""
    close_old_connections()
