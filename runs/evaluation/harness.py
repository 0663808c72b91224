"""Executing one attempt: claim it, build its workspace, run the agent in a sandbox, score it twice.

The two verdicts of an attempt:

- *reported*: the agent's final answer scored against gold (`runs.benchmark.scoring.score_sample`);
- *re-execution*: the attempt's final patch applied to a fresh masked workspace, every experiment
  run by the harness itself in a fresh sandbox, and the numbers they print scored the same way.

`passed` (what the leaderboard counts) needs both; reported numbers that the code does not produce
set `mismatch`.

Claiming, the heartbeat, the fence and infrastructure retries are runs.evaluation.claims', shared
with the re-execution of submitted attempts: a job delivered twice works once, a worker whose
attempt was recovered meanwhile writes nothing. Infrastructure failures (sandbox, workspace, harness
bugs, dead workers) are re-queued up to `ATTEMPT_MAX_INFRA_RETRIES` times, then end as status
`error` labelled `infrastructure`; they are never the model's result. A model provider failure
(status `error`, label `model_provider`) is not retried automatically: an outage or a missing key
would only burn the retries; `run_retry_failed` re-queues both kinds. Nor is an attempt of a paper
whose environment or data files this worker lacks (status `error`, label `not_prepared`, the message
naming `manage.py build_environment`): checked before anything is built or any model called.
"""

from __future__ import annotations

import json
import logging
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from runs.agents import AGENTS, agent_from_name, gold_bodies_for
from runs.agents.base import (
    MODEL_ERROR,
)
from runs.agents.llm import ModelError, model_from_name
from runs.agents.recorder import FINAL_PATCH_OVER_LIMITS
from runs.benchmark.scoring import ParsedAnswer, parse_answer
from runs.benchmark.text import json_safe, storable_text
from runs.benchmark.workspace import CODE_DIR, WorkspaceError
from runs.evaluation.claims import ClaimLost, Heartbeat, InfrastructureFailure, ModelProviderFailure, execute
from runs.evaluation.kinds import RUN_ATTEMPT
from runs.evaluation.verdicts import (
    INFRASTRUCTURE_EXITS,
    Reexecution,
    failure_label,
    reexecute,
    reexecution_workspace_build,
    sandbox_image,
    score_answer,
    score_dict,
    with_tolerance_ratio,
)
from runs.evaluation.workdirs import (
    attempt_reexecution_dir,
    attempt_sandbox_name,
    attempt_trajectory_path,
    attempt_workspace_dir,
    remove_tree,
)
from runs.models import Attempt, Run
from runs.suites.environments import NotPrepared, paper_provisions, paper_sandbox
from runs.suites.selectors import SampleTask, sample_task
from runs.suites.services import workspace_build
from sandbox import SandboxError

logger = logging.getLogger(__name__)


@dataclass
class AgentRecord:
    """What the agent's run left, as the attempt stores it (the Attempt fields of the same names)."""

    final_answer_raw: str | None
    parsed_answer: Any  # the answer as JSON, None when nothing readable was submitted
    reported_score: dict | None  # the answer scored against gold, None when there was none to score
    reported_passed: bool
    final_patch: str  # cut to the limits when it was over them (the recorder's doing)
    input_tokens: int
    output_tokens: int
    cost: float | None  # None: a price the price table does not know
    trajectory: dict
    agent_seconds: float


@dataclass
class AttemptResult:
    """What one try of a run's attempt produced, before it is written. `update_fields` turns it into
    the Attempt fields to write, the one place they are named.

    A try that ended before its agent ran (no model, the paper not prepared) has no `agent`, no
    `exit_status` and no verdict (`passed`, `mismatch` None): those fields are then not written,
    and whatever an earlier try left in them stays."""

    status: str
    exit_message: str
    failure_label: str
    failure_detail: str
    exit_status: str | None = None
    agent: AgentRecord | None = None
    reexecution: Reexecution | None = None
    reexecution_seconds: float | None = None
    gpu_seconds: float | None = None  # GPU-seconds of the agent's sandbox and the re-execution's
    passed: bool | None = None
    mismatch: bool | None = None
    timings: dict[str, float] = field(default_factory=dict)  # seconds per phase; "total", "harness", "experiments"

    @classmethod
    def model_unavailable(cls, failure: ModelProviderFailure) -> AttemptResult:
        # Not retried: an outage or a missing key would only burn the retries (run_retry_failed re-queues it).
        return cls(status=Attempt.ERROR, exit_status=MODEL_ERROR, exit_message=str(failure),
                   failure_label=Attempt.MODEL_PROVIDER, failure_detail=str(failure))

    @classmethod
    def not_prepared(cls, missing: NotPrepared) -> AttemptResult:
        # Not retried either: no retry builds an environment; the message names the command that does
        # (run_retry_failed re-queues the attempt once it has run).
        return cls(status=Attempt.ERROR, exit_message=str(missing), failure_label=Attempt.NOT_PREPARED,
                   failure_detail=str(missing))

    def update_fields(self, attempt: Attempt) -> dict[str, Any]:
        """The Attempt fields this result writes, with the tolerance ratio and outcome they imply
        (runs.evaluation.verdicts.with_tolerance_ratio, reading what is not written from `attempt`)."""
        update: dict[str, Any] = {
            "status": self.status,
            "exit_message": self.exit_message,
            "failure_label": self.failure_label,
            "failure_detail": self.failure_detail,
        }
        if self.exit_status is not None:
            update["exit_status"] = self.exit_status
        if self.agent is not None:
            # Field by field, not dataclasses.asdict: that would copy the whole trajectory.
            update.update({item.name: getattr(self.agent, item.name) for item in fields(self.agent)})
        if self.reexecution is not None:
            update.update(self.reexecution.stored_fields(), reexecution_seconds=self.reexecution_seconds)
        optional = {"gpu_seconds": self.gpu_seconds, "passed": self.passed, "mismatch": self.mismatch}
        update.update({name: value for name, value in optional.items() if value is not None})
        update.update(
            finished_at=timezone.now(),
            timings=json_safe(self.timings),
            harness_seconds=self.timings.get("harness"),
            experiment_seconds=self.timings.get("experiments"),
        )
        return with_tolerance_ratio(update, attempt)


def attempt_execute(*, attempt_id: int, job_id: str = "", requeue: bool = True) -> str:
    """Execute a queued attempt once: claim it, run the agent, score both verdicts, record
    (runs.evaluation.claims.execute: the claim, heartbeat, fence and infrastructure retries every
    kind of work shares). `requeue=False` leaves an infrastructure failure queued without
    enqueueing a job (for in-process runs, which pick it up again themselves). Returns DONE, ERROR,
    REQUEUED, LOST or SKIPPED."""
    return execute(RUN_ATTEMPT, _result_fields, attempt_id=attempt_id, job_id=job_id, requeue=requeue, cleanup=_cleanup)


def _result_fields(attempt: Attempt, heartbeat: Heartbeat) -> dict[str, Any]:
    """What executing the claimed attempt produced, as the fields to write."""
    try:
        result = _perform(attempt, heartbeat)
    except ModelProviderFailure as failure:
        result = AttemptResult.model_unavailable(failure)
    except NotPrepared as missing:
        result = AttemptResult.not_prepared(missing)
    return result.update_fields(attempt)


def attempt_sandbox_backend(run: Run) -> str:
    """The sandbox an attempt of `run` runs in: the run's, or for a run created with backend `any`
    (stored blank) this worker's SANDBOX_BACKEND, so workers with different sandboxes share it."""
    return run.sandbox_backend or settings.SANDBOX_BACKEND


def _perform(attempt: Attempt, heartbeat: Heartbeat) -> AttemptResult:
    # A thread for work that need not wait for the agent; on the way out, whatever it still does ends
    # before the attempt's directories are removed.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"attempt-{attempt.pk}") as background:
        return _perform_with(attempt, heartbeat, background)


def _perform_with(attempt: Attempt, heartbeat: Heartbeat, background: ThreadPoolExecutor) -> AttemptResult:
    run: Run = attempt.run
    sample = attempt.sample
    backend = attempt_sandbox_backend(run)
    timings: dict[str, float] = {}
    total_started = time.monotonic()
    # Before anything is built or any model called: a worker without the paper's environment or data
    # says so at once (NotPrepared), rather than failing in its sandbox and burning the retries.
    paper_provisions(sample.paper, backend=backend)

    workspace = attempt_workspace_dir(attempt.pk, attempt.tries)
    trajectory_path = attempt_trajectory_path(attempt.pk, attempt.tries)
    started = time.monotonic()
    # Crashed earlier tries leave their directories behind (and so may this try, run before).
    for leftover in Path(settings.WORKSPACE_ROOT).glob(f"attempt-{attempt.pk}-try-*"):
        if leftover.is_dir() and not leftover.is_symlink():
            remove_tree(leftover)
    prepared = sample_task(sample=sample, context=run.context)  # read once: both workspaces and both verdicts use it
    try:
        workspace_build(sample=sample, dest=workspace, context=run.context, task=prepared)
        task = json.loads((workspace / "task.json").read_text(encoding="utf-8"))
    except (WorkspaceError, OSError, ValueError) as error:
        raise InfrastructureFailure(f"workspace could not be built: {error}") from error
    timings["workspace"] = time.monotonic() - started

    agent = _agent(attempt, task, prepared)
    model = _model(run)

    started = time.monotonic()
    try:
        sandbox = paper_sandbox(
            sample.paper, backend=backend, workspace=workspace, name=attempt_sandbox_name(attempt.pk, attempt.tries),
            image=sandbox_image(backend),
        )
    except (SandboxError, NotPrepared) as error:  # NotPrepared: unprepared since the check above
        raise InfrastructureFailure(f"sandbox could not be opened: {error}") from error
    timings["sandbox_open"] = time.monotonic() - started

    reexecution_dir = attempt_reexecution_dir(attempt.pk, attempt.tries)
    # The re-execution's fresh masked workspace does not depend on what the agent does: it is built
    # while the agent works (mostly waiting on its model and its sandbox), outside the agent's
    # sandbox, which holds the agent's workspace alone.
    reexecution_built = background.submit(
        reexecution_workspace_build, sample=sample, dest=reexecution_dir, context=run.context, task=prepared
    )
    # The replay shows the steps as they are recorded (runs.evaluation.live): the heartbeat's thread
    # stores the trajectory file as it grows.
    heartbeat.stream_trajectory(trajectory_path)
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
        # The whole agent trajectory, visible while the re-execution runs (minutes, for some papers).
        stream = heartbeat.stream
        heartbeat.stream_end()
        if stream is not None:
            timings["live_stream"], timings["live_writes"] = stream.seconds, float(stream.writes)
    heartbeat.check()

    trajectory = result.trajectory
    trajectory.header.extra["sandbox_backend"] = backend  # which sandbox held this try (a run may leave it to workers)
    # How its memory limit was held (a cgroup, or which rlimit where none could be made) and the GPUs it had.
    trajectory.header.extra["sandbox_memory_limit"] = sandbox.memory_enforcement
    if sandbox.gpu_ids:
        trajectory.header.extra["gpus"] = sandbox.gpu_ids
    if result.exit_status in INFRASTRUCTURE_EXITS:
        raise InfrastructureFailure(f"agent ended with {result.exit_status}: {result.exit_message}")

    experiments = prepared.experiments
    raw = result.final_answer_raw
    parsed = result.final_answer if result.final_answer is not None else (parse_answer(raw) if raw is not None else None)
    started = time.monotonic()
    try:
        reported = score_answer(experiments=experiments, answer=parsed) if parsed is not None else None
    except Exception as error:  # noqa: BLE001 - an answer the scorer cannot take is the agent's unreadable answer
        logger.exception("attempt %s: the reported answer could not be scored", attempt.pk)
        parsed = ParsedAnswer(None, f"the answer could not be scored ({type(error).__name__}: {error})"[:2000], "none")
        reported = None
    timings["scoring"] = time.monotonic() - started

    patch = trajectory.final_patch or ""
    # Set by the recorder when the agent's patch was over the limits: `patch` is then the cut one.
    over_limits = trajectory.extra.get(FINAL_PATCH_OVER_LIMITS) or None
    header = trajectory.header
    exit_message = storable_text(result.exit_message) or ""
    record = AgentRecord(
        final_answer_raw=storable_text(raw),
        parsed_answer=json_safe(parsed.value) if parsed is not None and parsed.ok else None,
        reported_score=score_dict(reported, experiments) if reported is not None else None,
        reported_passed=bool(reported and reported.passed),
        final_patch=storable_text(patch),
        input_tokens=header.input_tokens,
        output_tokens=header.output_tokens,
        cost=None if header.cost_unknown else header.cost,
        trajectory=json_safe(trajectory.to_dict()),
        agent_seconds=timings["agent"],
    )

    if result.exit_status == MODEL_ERROR:
        # Not the model's result: nothing is re-executed or scored as its verdict.
        return AttemptResult(
            status=Attempt.ERROR, exit_status=result.exit_status, exit_message=exit_message, agent=record,
            failure_label=Attempt.MODEL_PROVIDER, failure_detail=exit_message, passed=False, mismatch=False,
            gpu_seconds=sandbox.gpu_seconds, timings=_finish_timings(timings, total_started, 0.0),
        )

    started = time.monotonic()
    reexecution = reexecute(
        sample=sample,
        patch=patch,
        context=run.context,
        backend=backend,
        dest=reexecution_dir,
        name=attempt_sandbox_name(attempt.pk, attempt.tries) + "-reexecution",
        task=prepared,
        built=reexecution_built,
        over_limits=over_limits,
    )
    heartbeat.check()
    reexecution_seconds = time.monotonic() - started
    timings.update({f"reexecution_{key}": value for key, value in reexecution.timings.items()})

    reported_passed = record.reported_passed
    passed = reported_passed and reexecution.passed
    return AttemptResult(
        status=Attempt.DONE,
        exit_status=result.exit_status,
        exit_message=exit_message,
        agent=record,
        reexecution=reexecution,
        reexecution_seconds=reexecution_seconds,
        gpu_seconds=sandbox.gpu_seconds + reexecution.gpu_seconds,
        passed=passed,
        # Code never run (a patch over the limits) says nothing of whether it produces the numbers.
        mismatch=reported_passed and not reexecution.passed and not reexecution.too_large,
        failure_label=failure_label(
            exit_status=result.exit_status,
            final_answer_raw=raw,
            answer_parsed=bool(parsed is not None and parsed.ok),
            passed=passed,
        ),
        failure_detail=reexecution.failure_detail(reported_passed=reported_passed),
        timings=_finish_timings(timings, total_started, reexecution.experiment_seconds),
    )


def _finish_timings(timings: dict, total_started: float, experiment_seconds: float) -> dict:
    total = time.monotonic() - total_started
    timings["total"] = total
    timings["experiments"] = experiment_seconds
    # Everything but the agent itself and the experiments the harness ran: workspaces, sandboxes,
    # patching, scoring, database writes in between.
    timings["harness"] = max(0.0, total - timings.get("agent", 0.0) - experiment_seconds)
    return timings


def _agent(attempt: Attempt, task: dict, prepared: SampleTask):
    """The run's agent, configured: budgets it has settings for, gold bodies for gold and mutant
    (their line hints from the sample as `prepared` read it already)."""
    run = attempt.run
    factory = AGENTS.get(run.agent)
    if factory is None:
        raise InfrastructureFailure(f"agent {run.agent!r} is not registered in this worker (known: {', '.join(sorted(AGENTS))})")
    settings_ = {"max_steps": run.max_steps, "max_seconds": run.max_seconds, "max_cost": run.max_cost}
    settings_.update(run.agent_config or {})
    if getattr(factory, "needs_gold_bodies", False):
        hints = {(f"{CODE_DIR}/{function.file}", function.name): function.line_hint for function in prepared.spec.masked}
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


def _cleanup(attempt: Attempt) -> None:
    for directory in (attempt_workspace_dir(attempt.pk, attempt.tries), attempt_reexecution_dir(attempt.pk, attempt.tries)):
        remove_tree(directory)

