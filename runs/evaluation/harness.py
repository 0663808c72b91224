"""Executing one attempt: claim it, build its workspace, run the agent in a sandbox, score it twice.

The two verdicts of an attempt:

- *reported*: the agent's final answer scored against gold (`runs.benchmark.scoring.score_sample`);
- *re-execution*: the attempt's final patch applied to a fresh masked workspace, every experiment
  run by the harness itself in a fresh sandbox, and the numbers they print scored the same way.

`passed` (what the leaderboard counts) needs both; reported numbers that the code does not produce
set `mismatch`.

One try is a story in phases (`AttemptTry.result`): check the paper is prepared, prepare the
workspace, configure the agent and its model, open its sandbox, run the agent (the re-execution's
workspace is built meanwhile), score its reported answer, re-execute its final patch, and decide
the verdict. What it produced is an `AttemptResult`, whose `update_fields` names the Attempt
fields it writes.

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
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from django.conf import settings
from django.utils import timezone

from runs.agents import (
    AGENTS,
    Agent,
    AgentResult,
    SettingsInvalid,
    agent_from_name,
    gold_bodies_for,
    stored_settings_current,
)
from runs.agents.base import ExitStatus
from runs.agents.llm import ModelError, model_from_name
from runs.agents.recorder import FINAL_PATCH_OVER_LIMITS
from runs.benchmark.answers import ParsedAnswer, parse_answer
from runs.benchmark.scoring import SampleScore
from runs.benchmark.text import json_safe, storable_text
from runs.benchmark.workspace import CODE_DIR, WorkspaceError
from runs.evaluation.claims import ClaimLost, ClaimOutcome, Heartbeat, InfrastructureFailure, ModelProviderFailure, execute
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

# The run's budgets, handed to its agent as settings where the agent has them (the baselines have
# only a time limit).
BUDGET_SETTINGS = ("max_steps", "max_seconds", "max_cost")


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
        return cls(status=Attempt.ERROR, exit_status=ExitStatus.MODEL_ERROR, exit_message=str(failure),
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


def attempt_execute(*, attempt_id: int, job_id: str = "", requeue: bool = True) -> ClaimOutcome:
    """Execute a queued attempt once: claim it, run the agent, score both verdicts, record
    (runs.evaluation.claims.execute: the claim, heartbeat, fence and infrastructure retries every
    kind of work shares). `requeue=False` leaves an infrastructure failure queued without
    enqueueing a job (for in-process runs, which pick it up again themselves). Returns DONE, ERROR,
    REQUEUED, LOST or SKIPPED."""
    return execute(RUN_ATTEMPT, _attempt_try_fields, attempt_id=attempt_id, job_id=job_id, requeue=requeue,
                   cleanup=_cleanup)


def _attempt_try_fields(attempt: Attempt, heartbeat: Heartbeat) -> dict[str, Any]:
    """What one try of the claimed attempt produced, as the fields to write."""
    try:
        # A thread for work that need not wait for the agent; on the way out, whatever it still does
        # ends before the attempt's directories are removed.
        with ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"attempt-{attempt.pk}") as background:
            result = AttemptTry(attempt, heartbeat, background).result()
    except ModelProviderFailure as failure:
        result = AttemptResult.model_unavailable(failure)
    except NotPrepared as missing:
        result = AttemptResult.not_prepared(missing)
    return result.update_fields(attempt)


def attempt_sandbox_backend(run: Run) -> str:
    """The sandbox an attempt of `run` runs in: the run's, or for a run created with backend `any`
    (stored blank) this worker's SANDBOX_BACKEND, so workers with different sandboxes share it."""
    return run.sandbox_backend or settings.SANDBOX_BACKEND


class AttemptTry:
    """One try of a run's attempt, phase by phase (`result` tells them in order). Each phase that
    takes time records it in `timings`; a failure that is not the agent's raises
    InfrastructureFailure, a lost claim ClaimLost."""

    def __init__(self, attempt: Attempt, heartbeat: Heartbeat, background: ThreadPoolExecutor) -> None:
        self.attempt, self.heartbeat, self.background = attempt, heartbeat, background
        self.run: Run = attempt.run
        self.sample = attempt.sample
        self.backend = attempt_sandbox_backend(self.run)
        self.sandbox_name = attempt_sandbox_name(attempt.pk, attempt.tries)
        self.timings: dict[str, float] = {}
        self.started = time.monotonic()

    def result(self) -> AttemptResult:
        # Before anything is built or any model called: a worker without the paper's environment or data
        # says so at once (NotPrepared), rather than failing in its sandbox and burning the retries.
        paper_provisions(self.sample.paper, backend=self.backend)
        with self.timed("workspace"):
            # The sample read once: both workspaces and both verdicts use it.
            task = sample_task(sample=self.sample, context=self.run.context)
            workspace, task_json = self.prepare_workspace(task)
        agent = attempt_agent(self.attempt, task, task_json)
        model = run_model(self.run)
        sandbox = self.open_sandbox(workspace)
        reexecution_workspace = self.build_reexecution_workspace_meanwhile(task)
        agent_result = self.run_agent(agent, model, sandbox, workspace)
        parsed, reported = self.score_reported(agent_result, task)
        record = self.agent_record(agent_result, parsed, reported, task)
        if agent_result.exit_status == ExitStatus.MODEL_ERROR:
            # Not the model's result: nothing is re-executed or scored as its verdict.
            return self.model_failed(agent_result, record, gpu_seconds=sandbox.gpu_seconds)
        reexecution, reexecution_seconds = self.reexecute(agent_result, task, reexecution_workspace)
        return self.verdict(
            agent_result, record, reexecution, reexecution_seconds=reexecution_seconds,
            answer_parsed=parsed is not None and parsed.ok, gpu_seconds=sandbox.gpu_seconds + reexecution.gpu_seconds,
        )

    @contextmanager
    def timed(self, phase: str) -> Iterator[None]:
        started = time.monotonic()
        try:
            yield
        finally:
            self.timings[phase] = time.monotonic() - started

    def prepare_workspace(self, task: SampleTask) -> tuple[Path, dict]:
        """The agent's masked workspace, and its task.json as read back."""
        workspace = attempt_workspace_dir(self.attempt.pk, self.attempt.tries)
        # Crashed earlier tries leave their directories behind (and so may this try, run before).
        for leftover in Path(settings.WORKSPACE_ROOT).glob(f"attempt-{self.attempt.pk}-try-*"):
            if leftover.is_dir() and not leftover.is_symlink():
                remove_tree(leftover)
        try:
            workspace_build(sample=self.sample, dest=workspace, context=self.run.context, task=task)
            task_json = json.loads((workspace / "task.json").read_text(encoding="utf-8"))
        except (WorkspaceError, OSError, ValueError) as error:
            raise InfrastructureFailure(f"workspace could not be built: {error}") from error
        return workspace, task_json

    def open_sandbox(self, workspace: Path):
        with self.timed("sandbox_open"):
            try:
                return paper_sandbox(self.sample.paper, backend=self.backend, workspace=workspace, name=self.sandbox_name,
                                     image=sandbox_image(self.backend))
            except (SandboxError, NotPrepared) as error:  # NotPrepared: unprepared since the check in `result`
                raise InfrastructureFailure(f"sandbox could not be opened: {error}") from error

    def build_reexecution_workspace_meanwhile(self, task: SampleTask) -> tuple[Path, Future]:
        """The re-execution's fresh masked workspace does not depend on what the agent does: it is
        built while the agent works (mostly waiting on its model and its sandbox), outside the
        agent's sandbox, which holds the agent's workspace alone. Returns where, and the build."""
        directory = attempt_reexecution_dir(self.attempt.pk, self.attempt.tries)
        built = self.background.submit(
            reexecution_workspace_build, sample=self.sample, dest=directory, context=self.run.context, task=task
        )
        return directory, built

    def run_agent(self, agent: Agent, model, sandbox, workspace: Path) -> AgentResult:
        """The agent's run in its sandbox, which is closed after it. The replay shows the steps as
        they are recorded (runs.evaluation.live): the heartbeat's thread stores the trajectory file
        as it grows. An agent that ends in a broken sandbox or a harness bug is an infrastructure
        failure."""
        trajectory_path = attempt_trajectory_path(self.attempt.pk, self.attempt.tries)
        self.heartbeat.stream_trajectory(trajectory_path)
        try:
            with self.timed("agent"):
                agent_result = agent.run(model=model, sandbox=sandbox, workspace=workspace, trajectory_path=trajectory_path,
                                on_step=self.heartbeat.check)
        except Exception:
            if self.heartbeat.lost:  # e.g. the new try removed our sandbox: not a failure worth recording
                raise ClaimLost(f"attempt {self.attempt.pk} try {self.attempt.tries} was taken over") from None
            raise
        finally:
            self.close_sandbox(sandbox)
        self.heartbeat.check()
        extra = agent_result.trajectory.header.extra
        extra["sandbox_backend"] = self.backend  # which sandbox held this try (a run may leave it to workers)
        # How its memory limit was held (a cgroup, or which rlimit where none could be made) and the GPUs it had.
        extra["sandbox_memory_limit"] = sandbox.memory_enforcement
        if sandbox.gpu_ids:
            extra["gpus"] = sandbox.gpu_ids
        if agent_result.exit_status in INFRASTRUCTURE_EXITS:
            raise InfrastructureFailure(f"agent ended with {agent_result.exit_status}: {agent_result.exit_message}")
        return agent_result

    def close_sandbox(self, sandbox) -> None:
        """Close the agent's sandbox, and end the trajectory's stream: the whole agent trajectory is
        visible while the re-execution runs (minutes, for some papers)."""
        with self.timed("sandbox_close"):
            sandbox.close()
        stream = self.heartbeat.stream
        self.heartbeat.stream_end()
        if stream is not None:
            self.timings["live_stream"], self.timings["live_writes"] = stream.seconds, float(stream.writes)

    def agent_record(self, agent_result: AgentResult, parsed: ParsedAnswer | None, reported: SampleScore | None,
                     task: SampleTask) -> AgentRecord:
        """What the agent's run left, with its reported answer as parsed and scored."""
        header = agent_result.trajectory.header
        return AgentRecord(
            final_answer_raw=storable_text(agent_result.final_answer_raw),
            parsed_answer=json_safe(parsed.value) if parsed is not None and parsed.ok else None,
            reported_score=score_dict(reported, task.experiments) if reported is not None else None,
            reported_passed=bool(reported and reported.passed),
            final_patch=storable_text(agent_result.trajectory.final_patch or ""),
            input_tokens=header.input_tokens,
            output_tokens=header.output_tokens,
            cost=None if header.cost_unknown else header.cost,
            trajectory=json_safe(agent_result.trajectory.model_dump()),
            agent_seconds=self.timings["agent"],
        )

    def score_reported(self, agent_result: AgentResult, task: SampleTask) -> tuple[ParsedAnswer | None, SampleScore | None]:
        """The agent's final answer as parsed, and scored against gold (None: nothing submitted)."""
        raw = agent_result.final_answer_raw
        parsed = agent_result.final_answer if agent_result.final_answer is not None else (parse_answer(raw) if raw is not None else None)
        with self.timed("scoring"):
            try:
                return parsed, score_answer(experiments=task.experiments, answer=parsed) if parsed is not None else None
            except Exception as error:  # noqa: BLE001 - an answer the scorer cannot take is the agent's unreadable answer
                logger.exception("attempt %s: the reported answer could not be scored", self.attempt.pk)
                return ParsedAnswer(None, f"the answer could not be scored ({type(error).__name__}: {error})"[:2000], "none"), None

    def model_failed(self, agent_result: AgentResult, record: AgentRecord, *, gpu_seconds: float) -> AttemptResult:
        """An agent ended by its model provider: an error, not the model's result, with what it left."""
        exit_message = storable_text(agent_result.exit_message) or ""
        return AttemptResult(
            status=Attempt.ERROR, exit_status=agent_result.exit_status, exit_message=exit_message, agent=record,
            failure_label=Attempt.MODEL_PROVIDER, failure_detail=exit_message, passed=False, mismatch=False,
            gpu_seconds=gpu_seconds, timings=self.finished_timings(experiment_seconds=0.0),
        )

    def reexecute(self, agent_result: AgentResult, task: SampleTask, reexecution_workspace: tuple[Path, Future]) -> tuple[Reexecution, float]:
        """The harness's own run of the agent's final patch (runs.evaluation.verdicts.reexecute), in
        the workspace built meanwhile, and the seconds it took."""
        directory, built = reexecution_workspace
        trajectory = agent_result.trajectory
        started = time.monotonic()
        reexecution = reexecute(
            sample=self.sample, patch=trajectory.final_patch or "", context=self.run.context, backend=self.backend,
            dest=directory, name=self.sandbox_name + "-reexecution", task=task, built=built,
            # Set by the recorder when the agent's patch was over the limits: the patch is then the cut one.
            over_limits=trajectory.extra.get(FINAL_PATCH_OVER_LIMITS) or None,
        )
        self.heartbeat.check()
        self.timings.update({f"reexecution_{key}": value for key, value in reexecution.timings.items()})
        return reexecution, time.monotonic() - started

    def verdict(self, agent_result: AgentResult, record: AgentRecord, reexecution: Reexecution, *, reexecution_seconds: float,
                answer_parsed: bool, gpu_seconds: float) -> AttemptResult:
        """Both verdicts together: a pass needs both; a reported pass the code does not reproduce is a mismatch."""
        reported_passed = record.reported_passed
        passed = reported_passed and reexecution.passed
        return AttemptResult(
            status=Attempt.DONE,
            exit_status=agent_result.exit_status,
            exit_message=storable_text(agent_result.exit_message) or "",
            agent=record,
            reexecution=reexecution,
            reexecution_seconds=reexecution_seconds,
            gpu_seconds=gpu_seconds,
            passed=passed,
            # Code never run (a patch over the limits) says nothing of whether it produces the numbers.
            mismatch=reported_passed and not reexecution.passed and not reexecution.too_large,
            failure_label=failure_label(
                exit_status=agent_result.exit_status,
                final_answer_raw=agent_result.final_answer_raw,
                answer_parsed=answer_parsed,
                passed=passed,
            ),
            failure_detail=reexecution.failure_detail(reported_passed=reported_passed),
            timings=self.finished_timings(experiment_seconds=reexecution.experiment_seconds),
        )

    def finished_timings(self, *, experiment_seconds: float) -> dict[str, float]:
        total = time.monotonic() - self.started
        # Everything but the agent itself and the experiments the harness ran: workspaces, sandboxes,
        # patching, scoring, database writes in between.
        harness = max(0.0, total - self.timings.get("agent", 0.0) - experiment_seconds)
        return {**self.timings, "total": total, "experiments": experiment_seconds, "harness": harness}


def attempt_agent(attempt: Attempt, task: SampleTask, task_json: dict) -> Agent:
    """The run's agent, configured for `attempt`: the run's budgets it has settings for, the run's
    agent_config (migrated from the version it was stored in), and what the agent declares it needs (runs.agents.base.Agent): gold bodies (their
    line hints from the sample as `task` read it already), a seed of the attempt's own."""
    run = attempt.run
    factory = AGENTS.get(run.agent)
    if factory is None:
        raise InfrastructureFailure(f"agent {run.agent!r} is not registered in this worker (known: {', '.join(sorted(AGENTS))})")
    agent_settings = {"max_steps": run.max_steps, "max_seconds": run.max_seconds, "max_cost": run.max_cost}
    try:
        agent_settings.update(stored_settings_current(run.agent_config, version=run.agent_config_version))
    except SettingsInvalid as error:
        raise InfrastructureFailure(f"agent {run.agent!r} could not be configured: {error}") from error
    if factory.needs_gold_bodies:
        hints = {(f"{CODE_DIR}/{function.file}", function.name): function.line_hint for function in task.spec.masked}
        try:
            agent_settings["gold_bodies"] = gold_bodies_for(
                code_dir=Path(attempt.sample.paper.code_dir), missing_functions=task_json["missing_functions"], line_hints=hints
            )
        except Exception as error:
            raise InfrastructureFailure(f"gold bodies could not be read: {error}") from error
    if factory.seeded_per_attempt:
        # Each attempt of a run differs (mutant: plants another bug), reproducibly; a seed in agent_config wins.
        agent_settings.setdefault("seed", run.sample_seed * 1000 + attempt.index)
    return construct_agent(run.agent, agent_settings, optional=BUDGET_SETTINGS)


def construct_agent(name: str, agent_settings: dict, *, optional: tuple[str, ...] = ()) -> Agent:
    """agent_from_name, leaving out the `optional` settings (the run's budgets) that the agent does
    not declare (the baselines only have a time limit). Any other setting it does not declare, or
    a value its settings refuse, is an InfrastructureFailure saying which."""
    factory = AGENTS.get(name)
    if factory is not None:
        declared = factory.setting_names()
        agent_settings = {key: value for key, value in agent_settings.items() if key in declared or key not in optional}
    try:
        return agent_from_name(name, **agent_settings)
    except (TypeError, ValueError) as error:
        raise InfrastructureFailure(f"agent {name!r} could not be configured: {error}") from error


def run_model(run: Run):
    """The run's model (None for an agent that needs none); one that cannot be reached or configured
    is a ModelProviderFailure."""
    if not run.model:
        return None
    try:
        return model_from_name(run.model)
    except (ModelError, ValueError) as error:
        raise ModelProviderFailure(f"model {run.model!r} is not available: {error}") from error


def _cleanup(attempt: Attempt) -> None:
    for directory in (attempt_workspace_dir(attempt.pk, attempt.tries), attempt_reexecution_dir(attempt.pk, attempt.tries)):
        remove_tree(directory)
