"""Agents without a model (gold, noop, mutant) and the fixed-pipeline run they share with agentless.

The baselines bound what a sample can score and check the harness itself:

- `gold` restores every masked function from the reference code, runs the experiments and submits
  what they print. It must pass every sample; when it does not, the suite or the harness is broken.
- `noop` runs the experiments on the masked code untouched. It must pass nothing; when it does, an
  experiment does not depend on the functions it claims to.
- `mutant` is `gold` with one plausible bug (from `runs.benchmark.mutation`) planted in one masked function,
  chosen by `seed`. It should fail almost always; a sample it passes cannot tell a right
  implementation from a nearly right one.

They act only through the agent tools (`write_file`, `change_directory`, `command_line`,
`final_answer`) and record the same trajectory steps as the ReAct agent, so their trajectories
replay, diff and re-execute like real ones. The workspace holds no gold code, so `gold` and
`mutant` are handed the original bodies from outside (`gold_bodies_for`, run by the harness on the
host against the paper's gold code directory).

`PipelineRun` is the scaffolding of any agent that decides its own steps (these three and
agentless): budget, tool context, trajectory, running the experiments, submitting, and the single
place where an `AgentExit` becomes the run's exit status.
"""

from __future__ import annotations

import json
import random
import time
import traceback
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pydantic import Field

from runs.benchmark.answers import ParsedAnswer
from runs.benchmark.execution import printed_result
from runs.benchmark.masking import function_body_source, replace_function_body
from runs.benchmark.mutation import Mutant, function_mutants
from runs.benchmark.text import shorten_at_word
from runs.benchmark.workspace import CODE_DIR
from sandbox import Sandbox, SandboxError

from .base import (
    Agent,
    AgentExit,
    AgentResult,
    Budget,
    ExitStatus,
    SandboxFailed,
    Submitted,
)
from .llm import ChatModel
from .recorder import TrajectoryWriter
from .settings import AgentSettings
from .tools import (
    DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_MAX_OBSERVATION_CHARS,
    ToolContext,
    ToolResult,
    run_tool,
)
from .trajectory import Header, Step

__all__ = [
    "BaselineConfig",
    "GoldAgent",
    "MutantAgent",
    "NoopAgent",
    "PipelineRun",
    "command_result",
    "functions_in_edit_order",
    "gold_bodies_for",
    "load_task",
]

# (workspace file such as "code/optim/adam.py", qualified name) -> the function's original body.
GoldBodies = Mapping[tuple[str, str], str]
# Characters of an experiment's description quoted in the thought of the step that runs it.
THOUGHT_SUMMARY_CHARS = 200

def load_task(workspace: Path) -> dict:
    """The workspace's task.json. Raises ValueError when `workspace` is not a built workspace."""
    try:
        return json.loads((Path(workspace) / "task.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:
        raise ValueError(f"{workspace} is not a built workspace (task.json): {error}") from None


def functions_in_edit_order(missing_functions: list[dict]) -> list[dict]:
    """The missing functions grouped by file (first appearance) and, within a file, last first.

    Editing a file from the bottom up leaves the line numbers of the functions above unchanged, so
    each function's `line` stays an exact hint while the file is being rewritten.
    """
    files: dict[str, list[dict]] = {}
    for function in missing_functions:
        files.setdefault(function["file"], []).append(function)
    return [f for group in files.values() for f in sorted(group, key=lambda f: -(f.get("line") or 0))]


def gold_bodies_for(
    *, code_dir: Path, missing_functions: list[dict], line_hints: Mapping[tuple[str, str], int | None] | None = None
) -> dict[tuple[str, str], str]:
    """The original bodies of a workspace's missing functions, read from the gold code on the host.

    `missing_functions` are task.json's entries ({file: "code/...", name, line}); `code_dir` is the
    paper's gold code directory (never part of a workspace). Each function is found by its
    qualified name; `line_hints` maps (file, name) to its line in the gold code when known, else
    the line in the masked file is the hint (earlier stubs may shift it a little, which only
    matters for a name defined twice). Raises MaskingError when a function is not in the gold code.
    """
    bodies = {}
    for function in missing_functions:
        key = (function["file"], function["name"])
        relative = Path(function["file"]).relative_to(CODE_DIR)
        source = (Path(code_dir) / relative).read_text(encoding="utf-8")
        hint = (line_hints or {}).get(key) or function.get("line")
        bodies[key] = function_body_source(source, function["name"], line_hint=hint)
    return bodies


def command_result(result: ToolResult) -> dict | None:
    """The JSON object an experiment printed, if its command ran to completion with exit code 0.

    A command that crashed or timed out gives None even if it printed a JSON line before dying:
    the harness's re-execution would not count that output either (runs.benchmark.execution.run_experiment).
    The exit status is the result's field: the program's own output may print anything, a status
    line included. The status line the tool appends is not a JSON object, so it is never read as one.
    """
    if result.exit_code != 0 or result.timed_out:
        return None
    return printed_result(result.observation)


class BaselineConfig(AgentSettings):
    """Settings of a model-free baseline (recorded in the trajectory header)."""

    max_seconds: float = Field(default=1800.0, gt=0)
    command_timeout: float = Field(default=DEFAULT_COMMAND_TIMEOUT, gt=0)
    max_observation_chars: int = Field(default=DEFAULT_MAX_OBSERVATION_CHARS, gt=0)


class PipelineRun:
    """One run of an agent that decides its own steps: the budget, the tools, the trajectory.

    The agent's pipeline is a function of this object; it calls `call` for each tool step (or
    `new_step` / `record` for a step it fills itself), `run_experiments`, then `submit`. `execute`
    runs the pipeline and turns how it ended into an AgentResult: an `AgentExit` (a limit, a
    broken sandbox or model, the submission) is an exit status; any other exception is a harness
    error, written to the trajectory and then propagated.
    """

    def __init__(
        self,
        *,
        agent: str,
        model: ChatModel | None,
        config: dict[str, Any],
        sandbox: Sandbox,
        workspace: Path,
        trajectory_path: Path,
        clock: Callable[[], float],
        on_step: Callable[[Step], None] | None,
        max_seconds: float,
        max_cost: float = 1.0,
        command_timeout: float = DEFAULT_COMMAND_TIMEOUT,
        max_observation_chars: int = DEFAULT_MAX_OBSERVATION_CHARS,
    ) -> None:
        self.workspace = Path(workspace)
        self.task = load_task(self.workspace)
        self.clock = clock
        self.on_step = on_step
        # Pipelines take a fixed number of steps by construction, so only time and money bound them.
        self.budget = Budget(max_steps=10**9, max_seconds=max_seconds, max_cost=max_cost, clock=clock)
        self.tools = ToolContext(
            sandbox=sandbox,
            workspace=self.workspace,
            model=model,
            max_observation_chars=max_observation_chars,
            command_timeout=command_timeout,
            time_left=self.budget.time_left,
        )
        header = Header(
            sample_id=str(self.task.get("sample_id", "")),
            agent=agent,
            model=model.name if model is not None else "none",
            config={**config, "context": self.task.get("context", "none")},
        )
        self.writer = TrajectoryWriter(trajectory_path, header, workspace=self.workspace)
        self.answer_raw: str | None = None
        self.answer: ParsedAnswer | None = None

    @property
    def header(self) -> Header:
        return self.writer.trajectory.header

    # --- steps -----------------------------------------------------------------------------------

    def new_step(self, *, thought: str = "") -> Step:
        """A fresh step, after checking that time and money are left."""
        self.budget.check_time_and_cost()
        return self.writer.new_step(thought=thought)

    def record(self, step: Step, *, started: float) -> None:
        """Save a finished step (its duration measured from `started`) and report it."""
        step.duration = self.clock() - started
        self.budget.steps += 1
        self.writer.add_step(step)
        if self.on_step is not None:
            self.on_step(step)

    def run_in_step(self, step: Step, tool: str, arguments: dict[str, Any], *, started: float) -> ToolResult:
        """Run one tool call as `step`'s action and copy its outcome into the step (not saved yet).

        When the sandbox or a helper model breaks under the tool, the step records that, is saved
        here (the caller's `record` is never reached) and the run ends.
        """
        try:
            result = run_tool(self.tools, (tool, arguments))
        except AgentExit as exit:
            step.tool, step.arguments = tool, arguments
            step.error, step.observation = True, f"Run ended: {exit}"
            step.files_changed = self.writer.changes_since_last()
            self.record(step, started=started)
            raise
        self.writer.fill_step(step, tool, arguments, result)
        self.budget.charge(input_tokens=result.usage.input_tokens, output_tokens=result.usage.output_tokens, cost=result.cost)
        return result

    def call(self, tool: str, arguments: dict[str, Any], *, thought: str = "") -> ToolResult:
        """One complete tool step: check the budget, run the tool, record the step."""
        step = self.new_step(thought=thought)
        started = self.clock()
        result = self.run_in_step(step, tool, arguments, started=started)
        self.record(step, started=started)
        return result

    def read(self, path: str) -> str:
        """A workspace file's current text, read as the tools read it (not recorded as a step)."""
        if self.tools.sandbox.closed:
            raise SandboxFailed("the sandbox is closed")
        try:
            return self.tools.sandbox.read_file(path)
        except SandboxError as error:
            raise SandboxFailed(f"cannot read {path}: {error}") from error

    # --- the common end of every pipeline --------------------------------------------------------

    def run_experiments(self) -> dict[str, dict]:
        """Run each experiment's command from code/ and collect what it printed, by label.

        An experiment that crashed, timed out or printed no JSON object is left out.
        """
        directory = self.task.get("working_directory", CODE_DIR)
        self.call("change_directory", {"path": directory}, thought=f"The experiments run from {directory}/.")
        results: dict[str, dict] = {}
        for experiment in self.task.get("experiments", []):
            label = experiment["label"]
            summary = shorten_at_word(experiment.get("description", ""), THOUGHT_SUMMARY_CHARS)
            value = command_result(self.call("command_line", {"command": experiment["command"]}, thought=f"Run {label}: {summary}"))
            if value is not None:
                results[label] = value
        return results

    def submit(self, answer: dict[str, Any], *, thought: str) -> None:
        """Submit `answer` with final_answer; raises Submitted (ending the run)."""
        result = self.call("final_answer", {"answer": answer}, thought=thought)
        if not result.submitted:
            raise RuntimeError(f"final_answer refused the pipeline's answer: {result.observation}")
        self.answer_raw, self.answer = result.answer_raw, result.answer
        raise Submitted("the agent submitted a final answer")

    def run_and_submit_experiments(self) -> None:
        """Run the experiments and submit what they printed (missing experiments left out)."""
        results = self.run_experiments()
        total = len(self.task.get("experiments", []))
        self.submit(results, thought=f"Submit the numbers the experiments printed ({len(results)} of {total} printed a result).")

    def execute(self, pipeline: Callable[[PipelineRun], None]) -> AgentResult:
        """Run `pipeline(self)` and return how it ended (see the class docstring)."""
        try:
            pipeline(self)
            raise RuntimeError("the pipeline ended without submitting an answer")
        except AgentExit as exit:
            return self._finish(exit.exit_status, str(exit))
        except BaseException as error:
            # Write what we have before the bug propagates: the trajectory is the best evidence.
            self._finish(ExitStatus.HARNESS_ERROR, f"{type(error).__name__}: {error}\n{traceback.format_exc()}")
            raise

    def _finish(self, exit_status: ExitStatus, message: str) -> AgentResult:
        trajectory = self.writer.finish(
            exit_status=exit_status, exit_message=message, final_answer_raw=self.answer_raw, final_answer=self.answer
        )
        return AgentResult(exit_status, self.answer_raw, self.answer, trajectory, exit_message=message)


# --- the baselines -------------------------------------------------------------------------------


class NoopAgent(Agent):
    """Runs the experiments on the masked code as it is and submits whatever they print.

    Masked functions raise NotImplementedError, so experiments crash and their entries are left out
    of the answer (an empty object when nothing printed a result). Uses no model.
    """

    name = "noop"
    config_class = BaselineConfig
    needs_model = False

    def __init__(self, config: BaselineConfig | None = None, **settings: Any) -> None:
        self.config = (config or BaselineConfig()).replaced(**settings)

    def header_config(self) -> dict[str, Any]:
        return self.config.as_dict()

    def run(
        self,
        *,
        model: ChatModel | None = None,
        sandbox: Sandbox,
        workspace: Path,
        trajectory_path: Path,
        clock: Callable[[], float] = time.monotonic,
        on_step: Callable[[Step], None] | None = None,
    ) -> AgentResult:
        """Run the baseline on a freshly built workspace. `model` is ignored (None is expected)."""
        run = PipelineRun(
            agent=self.name,
            model=None,
            config=self.header_config(),
            sandbox=sandbox,
            workspace=Path(workspace),
            trajectory_path=Path(trajectory_path),
            clock=clock,
            on_step=on_step,
            max_seconds=self.config.max_seconds,
            command_timeout=self.config.command_timeout,
            max_observation_chars=self.config.max_observation_chars,
        )
        return run.execute(self.pipeline)

    def pipeline(self, run: PipelineRun) -> None:
        run.run_and_submit_experiments()


class GoldAgent(NoopAgent):
    """Restores every masked function from the reference implementation, then runs and submits.

    `gold_bodies` maps (workspace file, qualified name) to the original body, as `gold_bodies_for`
    returns it. Each function is written back with `write_file`, one step per function.
    """

    name = "gold"
    needs_gold_bodies = True

    def __init__(self, *, gold_bodies: GoldBodies, config: BaselineConfig | None = None, **settings: Any) -> None:
        super().__init__(config, **settings)
        self.gold_bodies = dict(gold_bodies)

    def pipeline(self, run: PipelineRun) -> None:
        functions = functions_in_edit_order(run.task.get("missing_functions", []))
        missing = [f"{f['file']}:{f['name']}" for f in functions if (f["file"], f["name"]) not in self.gold_bodies]
        if missing:
            raise ValueError(f"no gold body was given for {', '.join(missing)}")
        planted = self.plant(run, functions)
        for function in functions:
            key = (function["file"], function["name"])
            body, thought = self.gold_bodies[key], f"Restore {function['name']} from the reference implementation."
            if planted is not None and planted[0] == key:
                mutant = planted[1]
                body = mutant.body
                thought = f"Restore {function['name']} from the reference implementation, with a planted bug ({mutant.description})."
            source = run.read(function["file"])
            restored = replace_function_body(source, function["name"], body, line_hint=function.get("line"))
            run.call("write_file", {"path": function["file"], "content": restored}, thought=thought)
        run.run_and_submit_experiments()

    def plant(self, run: PipelineRun, functions: list[dict]) -> tuple[tuple[str, str], Mutant] | None:
        """The function to write wrongly and how (None: write every function as the original)."""
        return None


class MutantAgent(GoldAgent):
    """`gold` with one seeded plausible bug in one masked function.

    The function is drawn with `random.Random(seed)` among the missing ones, then one of its
    mutants (`runs.benchmark.mutation.function_mutants`, all of them, shuffled by the same seed) is drawn with
    the same generator. Functions without any mutant are passed over for the next draw; the choice
    is recorded in the trajectory header (`mutation`) and in the step that plants it.
    """

    name = "mutant"
    seeded_per_attempt = True  # each attempt of a run plants a different bug, reproducibly

    def __init__(self, *, gold_bodies: GoldBodies, seed: int = 0, config: BaselineConfig | None = None, **settings: Any) -> None:
        super().__init__(gold_bodies=gold_bodies, config=config, **settings)
        self.seed = seed

    def header_config(self) -> dict[str, Any]:
        return {**super().header_config(), "seed": self.seed}

    def plant(self, run: PipelineRun, functions: list[dict]) -> tuple[tuple[str, str], Mutant] | None:
        rng = random.Random(self.seed)
        # Drawn from the task's order, not the edit order, so a seed's choice reads off task.json.
        candidates = list(run.task.get("missing_functions", []))
        rng.shuffle(candidates)
        for function in candidates:
            key = (function["file"], function["name"])
            restored = replace_function_body(run.read(function["file"]), function["name"], self.gold_bodies[key], line_hint=function.get("line"))
            mutants = function_mutants(restored, function["name"], line_hint=function.get("line"), seed=self.seed, limit=None)
            if mutants:
                mutant = mutants[rng.randrange(len(mutants))]
                run.header.extra["mutation"] = {"file": key[0], "function": key[1], "description": mutant.description, "seed": self.seed}
                run.writer.save()
                return key, mutant
        run.header.extra["mutation"] = None
        return None
