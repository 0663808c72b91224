"""The ReAct agent of the paper: a thought, then exactly one tool call, per step, until it submits.

    result = ReActAgent(AgentConfig(history="window", window=5)).run(
        model=model, sandbox=sandbox, workspace=workspace, trajectory_path=path)

The loop (`ReActAgent.run`) is the whole agent: check the budget, build the prompt from the
history, ask the model, run its tool call, record the step. Everything that ends a run raises an
`AgentExit` carrying its exit status, caught in one place.

Prompt: the system prompt gives the role, the tools and the rules; the first user message is the
workspace's TASK.md and, for the "full" and "oracle" context conditions, the paper itself (the
paper's set-up gave the paper in context; it also stays in /workspace/paper.md). Those two
messages are always sent. What follows depends on the history strategy:

- `full`: every step so far.
- `window`: the last `window` steps, after a note saying how many earlier ones are not shown.
- `summary`: a running summary of the steps that left the window, then the last `window` steps.
  Each time a step leaves the window, the model folds it into the summary with a separate call
  (no tools), whose tokens and cost are charged to the step that triggered it.

A step's messages (the assistant turn and the results of all its tool calls) are kept or dropped
together, so tool calls and results always pair up as the provider APIs demand. When the model
calls several tools, the first runs and the others are answered "not executed"; when it calls
none, it is reminded to. Budgets are checked before each model call and again after it: nothing
runs once a limit is passed, and the step that crossed it is recorded with its tool unexecuted.
"""

from __future__ import annotations

import json
import time
import traceback
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Any

from pydantic import Field, field_validator

from runs.benchmark.answers import ParsedAnswer
from runs.benchmark.workspace import CONTEXT_CONDITIONS, Context
from sandbox import Sandbox

from .base import (
    Agent,
    AgentExit,
    AgentResult,
    Budget,
    ExitStatus,
    ModelFailed,
    Submitted,
)
from .llm import ChatModel, Completion, Message, ModelError, ToolSpec
from .recorder import TrajectoryWriter
from .settings import AgentSettings
from .tools import (
    DEFAULT_COMMAND_TIMEOUT,
    DEFAULT_MAX_OBSERVATION_CHARS,
    TOOLS,
    ToolContext,
    run_tool,
    tool_specs,
    truncate,
)
from .trajectory import Header, Step


class History(StrEnum):
    """Which earlier steps the prompt holds (the module's docstring says how)."""

    FULL = "full"
    WINDOW = "window"
    SUMMARY = "summary"


# As a tuple, for membership tests of plain strings (`"full" in History` raises TypeError before
# Python 3.12).
HISTORY_STRATEGIES = tuple(History)
# The paper in the first message is cut (head and tail) beyond this; the whole file stays in the
# workspace for the agent to read.
DEFAULT_MAX_PAPER_CHARS = 120_000
# Below these fractions of the time or money budget, the model is told to wrap up.
_LOW_BUDGET_FRACTION = 0.1


class AgentConfig(AgentSettings):
    """Settings of one ReAct run (recorded in the trajectory header).

    `context` is the context condition; None takes it from the workspace's task.json, and a value
    that contradicts the workspace is an error. `window` is k for the "window" and "summary"
    histories. `max_cost` is USD; calls of unknown price count as 0 (flagged in the trajectory).
    """

    history: str = History.FULL
    window: int = Field(default=5, ge=1)
    max_steps: int = Field(default=50, ge=1)
    max_seconds: float = Field(default=1800.0, gt=0)
    max_cost: float = Field(default=1.0, gt=0)
    context: str | None = None
    max_observation_chars: int = Field(default=DEFAULT_MAX_OBSERVATION_CHARS, ge=1)
    max_paper_chars: int = Field(default=DEFAULT_MAX_PAPER_CHARS, ge=1)
    command_timeout: float = Field(default=DEFAULT_COMMAND_TIMEOUT, gt=0)
    temperature: float = 0.0
    max_tokens: int = Field(default=4096, ge=1)

    @field_validator("history")
    @classmethod
    def _known_history(cls, history: str) -> str:
        if history not in HISTORY_STRATEGIES:
            raise ValueError(f"must be one of {', '.join(HISTORY_STRATEGIES)}; got {history!r}")
        return history

    @field_validator("context")
    @classmethod
    def _known_context(cls, context: str | None) -> str | None:
        if context is not None and context not in CONTEXT_CONDITIONS:
            raise ValueError(f"must be one of {', '.join(CONTEXT_CONDITIONS)}; got {context!r}")
        return context


SYSTEM_PROMPT = """\
You are an expert research engineer replicating the experiments of a machine learning paper.

The paper's code is in /workspace/code, but some of its functions were removed: their bodies now
only raise NotImplementedError. Your job: implement every missing function faithfully to the paper
and the docstrings, run the task's experiments with their exact commands (from /workspace/code),
and submit the numbers they print.

The workspace (/workspace) holds TASK.md and task.json (the task: missing functions, experiments,
answer format), code/, refsol.sh (runs every experiment){paper_note}. There is no network access.

Tools:
{tool_list}

Rules:
- Every turn, first write your reasoning (what you know, what you will do next and why), then call
  exactly one tool. Only the first tool call of a turn is executed.
- Paths are relative to your current directory (initially /workspace) or absolute under /workspace.
- Do not change code other than the missing functions unless an experiment cannot run otherwise.
- Report only numbers the experiments actually printed; never estimate or invent them.
- Submit with final_answer: one JSON object with one entry per experiment, in the task's answer
  format. This ends the task; you cannot change the answer afterwards.
- Budget: at most {max_steps} steps, {minutes:g} minutes and ${max_cost:g} of model usage. Submit
  your best answer before the budget runs out; a run without a final answer scores nothing.
"""

_NUDGE = (
    "You did not call a tool. Every turn must end with exactly one tool call. Continue with the "
    "task, or call final_answer if you are done."
)
_EXTRA_CALL = "Not executed: only one tool call per turn is allowed, and only the first one ran."

SUMMARY_PROMPT = """\
You maintain a running summary of an agent's work on a coding task, for the agent itself: older
steps are removed from its context and only your summary remains. Merge the previous summary and
the new steps into one updated summary. Keep every fact needed to continue: files inspected and
what they contain, code written or changed (exact function names and paths), commands run with
their results and error messages, numbers obtained, and what is still to do. Be concise; no
preamble."""


class ReActAgent(Agent):
    """The ReAct loop. Create through `agent_from_name("react", **config)` or directly with an
    AgentConfig; `run` may be called once per instance."""

    name = "react"
    config_class = AgentConfig

    def __init__(self, config: AgentConfig | None = None, **settings: Any) -> None:
        self.config = (config or AgentConfig()).replaced(**settings)

    def run(
        self,
        *,
        model: ChatModel | None,
        sandbox: Sandbox,
        workspace: Path,
        trajectory_path: Path,
        clock: Callable[[], float] = time.monotonic,
        on_step: Callable[[Step], None] | None = None,
    ) -> AgentResult:
        """Run the agent on the workspace until it submits or a limit ends it.

        `workspace` is the host directory the sandbox mounts, freshly built (its `code/` is the
        baseline of the final patch). `on_step` is called after each step is saved (progress
        reports); an exception it raises ends the run as a harness error.
        """
        model = self.required_model(model)
        return _Run(self, model, sandbox, Path(workspace), Path(trajectory_path), clock, on_step).run()


class _Run:
    """The state of one run. Kept apart from ReActAgent so an agent object holds only settings."""

    def __init__(
        self, agent: ReActAgent, model: ChatModel, sandbox: Sandbox, workspace: Path, trajectory_path: Path,
        clock: Callable[[], float], on_step: Callable[[Step], None] | None,
    ) -> None:
        self.config: AgentConfig = agent.config
        self.model = model
        self.clock = clock
        self.on_step = on_step
        task = _read_task(workspace)
        context = task.get("context", "none")
        if self.config.context is not None and self.config.context != context:
            raise ValueError(f"the workspace was built for context {context!r}, the agent configured for {self.config.context!r}")
        self.context = context
        self.budget = Budget(self.config.max_steps, self.config.max_seconds, self.config.max_cost, clock)
        self.tools = ToolContext(
            sandbox=sandbox,
            workspace=workspace,
            model=model,
            max_observation_chars=self.config.max_observation_chars,
            command_timeout=self.config.command_timeout,
            time_left=self.budget.time_left,
            temperature=self.config.temperature,
        )
        header = Header(
            sample_id=str(task.get("sample_id", "")),
            agent=agent.name,
            model=model.name,
            config={**self.config.as_dict(), "context": context},
        )
        self.writer = TrajectoryWriter(trajectory_path, header, workspace=workspace)
        self.prefix = [Message.system(self._system_prompt()), Message.user(self._task_prompt(workspace))]
        self.history: list[list[Message]] = []  # one entry per step: its messages
        self.summary = ""
        self.summarised = 0  # how many of the first steps the summary covers
        self.answer_raw: str | None = None
        self.answer: ParsedAnswer | None = None
        self.calls_this_step = 0

    # --- the loop --------------------------------------------------------------------------------

    def run(self) -> AgentResult:
        try:
            while True:
                self.step()
        except AgentExit as exit:
            return self._finish(exit.exit_status, str(exit))
        except BaseException as error:
            # Write what we have before the bug propagates: the trajectory is the best evidence.
            self._finish(ExitStatus.HARNESS_ERROR, f"{type(error).__name__}: {error}\n{traceback.format_exc()}")
            raise

    def step(self) -> None:
        self.budget.check()
        step = self.writer.new_step()
        started = self.clock()
        self.budget.steps += 1
        self.calls_this_step = 0
        try:
            self._update_summary(step)
            messages = self.prefix + self._history_messages() + self._warnings()
            completion = self._complete(step, messages, tools=tool_specs())
            step.thought = completion.text
            try:
                self.budget.check_time_and_cost()
            except AgentExit as exit:
                # Nothing runs once a limit is passed; what the model asked for is still recorded.
                if completion.tool_calls:
                    call = completion.tool_calls[0]
                    step.tool, step.arguments, step.tool_call_id = call.name, call.arguments, call.id
                step.observation = f"Not executed: {exit}"
                raise
            self._act(step, completion)
        finally:
            step.duration = self.clock() - started
            # A step whose only model call failed holds nothing worth a record; the failure itself
            # goes to the header's exit message.
            if self.calls_this_step:
                self.writer.add_step(step)
                if self.on_step is not None:
                    self.on_step(step)

    def _act(self, step: Step, completion: Completion) -> None:
        assistant = completion.as_message()
        if not assistant.content and not assistant.tool_calls:
            assistant.content = "(no response)"  # providers reject empty assistant turns
        if not completion.tool_calls:
            nudge = _NUDGE
            if completion.raw_stop_reason in ("length", "max_tokens"):
                nudge = f"Your reply was cut off at the {self.config.max_tokens}-token limit. {nudge}"
            step.error, step.observation = True, nudge
            self.history.append([assistant, Message.user(nudge)])
            return
        call, *extra = completion.tool_calls
        step.tool, step.arguments, step.tool_call_id = call.name, call.arguments, call.id
        try:
            result = run_tool(self.tools, call)
        except AgentExit as exit:  # the sandbox or the helper model broke under the tool
            step.error, step.observation = True, f"Run ended: {exit}"
            step.files_changed = self.writer.changes_since_last()
            raise
        self.writer.fill_step(step, call.name, call.arguments, result)
        messages = [assistant, Message.tool(call.id, result.observation)]
        messages += [Message.tool(other.id, _EXTRA_CALL) for other in extra]
        if extra:
            step.notes.append(f"{len(extra)} extra tool call(s) not executed: {', '.join(c.name for c in extra)}")
        self.budget.charge(input_tokens=result.usage.input_tokens, output_tokens=result.usage.output_tokens, cost=result.cost)
        self.history.append(messages)
        if result.submitted:
            self.answer_raw, self.answer = result.answer_raw, result.answer
            raise Submitted("the agent submitted a final answer")

    def _complete(self, step: Step, messages: list[Message], *, tools: list[ToolSpec], max_tokens: int | None = None) -> Completion:
        """One model call, timed and charged to the step and the budget."""
        started = self.clock()
        try:
            completion = self.model.complete(
                messages, tools=tools, max_tokens=max_tokens or self.config.max_tokens, temperature=self.config.temperature
            )
        except ModelError as error:
            step.notes.append(f"model call failed: {error}")
            raise ModelFailed(str(error)) from error
        finally:
            step.model_seconds += self.clock() - started
        self.calls_this_step += 1
        step.charge(completion.usage, completion.cost)
        self.budget.charge(
            input_tokens=completion.usage.input_tokens, output_tokens=completion.usage.output_tokens, cost=completion.cost
        )
        return completion

    def _finish(self, exit_status: ExitStatus, message: str) -> AgentResult:
        trajectory = self.writer.finish(
            exit_status=exit_status, exit_message=message, final_answer_raw=self.answer_raw, final_answer=self.answer
        )
        return AgentResult(
            exit_status=exit_status,
            final_answer_raw=self.answer_raw,
            final_answer=self.answer,
            trajectory=trajectory,
            exit_message=message,
        )

    # --- history ---------------------------------------------------------------------------------

    def _dropped(self) -> int:
        """How many of the first steps are left out of the prompt."""
        if self.config.history == History.FULL:
            return 0
        return max(0, len(self.history) - self.config.window)

    def _history_messages(self) -> list[Message]:
        dropped = self._dropped()
        messages: list[Message] = []
        if dropped and self.config.history == History.SUMMARY:
            messages.append(Message.user(f"Summary of steps 1-{dropped} (no longer shown):\n\n{self.summary}"))
        elif dropped:
            messages.append(Message.user(f"[Steps 1-{dropped} are not shown; the last {self.config.window} follow.]"))
        for step_messages in self.history[dropped:]:
            messages.extend(step_messages)
        return messages

    def _update_summary(self, step: Step) -> None:
        """Fold the steps that left the window into the running summary (summary history only)."""
        dropped = self._dropped()
        if self.config.history != History.SUMMARY or dropped <= self.summarised:
            return
        new_steps = "\n\n".join(
            f"## Step {number}\n{_transcript(messages)}"
            for number, messages in enumerate(self.history[self.summarised : dropped], start=self.summarised + 1)
        )
        previous = self.summary or "(none yet)"
        prompt = f"Task:\n{self.prefix[1].content[:4000]}\n\nPrevious summary:\n{previous}\n\nNew steps:\n{new_steps}"
        completion = self._complete(step, [Message.system(SUMMARY_PROMPT), Message.user(prompt)], tools=[], max_tokens=1500)
        self.summary = completion.text.strip() or self.summary
        self.summarised = dropped
        step.summary = self.summary
        step.notes.append(f"summary updated to cover steps 1-{dropped}")

    def _warnings(self) -> list[Message]:
        """A reminder to submit when this is the last step or time or money is nearly spent."""
        notes = []
        if self.budget.steps >= self.config.max_steps:
            notes.append("This is your last step")
        if self.budget.time_left() < _LOW_BUDGET_FRACTION * self.config.max_seconds:
            notes.append(f"less than {self.budget.time_left() / 60:.1f} minutes are left")
        if self.config.max_cost - self.budget.cost < _LOW_BUDGET_FRACTION * self.config.max_cost:
            notes.append(f"only ${max(0.0, self.config.max_cost - self.budget.cost):.3f} of the budget is left")
        if not notes:
            return []
        return [Message.user(f"Warning: {'; '.join(notes)}. Submit your answer now with final_answer.")]

    # --- prompts ---------------------------------------------------------------------------------

    def _system_prompt(self) -> str:
        tool_list = "\n".join(f"- {tool.name}: {tool.spec.description}" for tool in TOOLS.values())
        paper_note = {
            Context.FULL: ", paper.md (the paper, also given below)",
            Context.ORACLE: ", paper.md (the paper's passages about each missing function, also given below)",
        }.get(self.context, "")
        return SYSTEM_PROMPT.format(
            paper_note=paper_note,
            tool_list=tool_list,
            max_steps=self.config.max_steps,
            minutes=self.config.max_seconds / 60,
            max_cost=self.config.max_cost,
        )

    def _task_prompt(self, workspace: Path) -> str:
        task = (workspace / "TASK.md").read_text(encoding="utf-8")
        parts = [task.rstrip()]
        paper = workspace / "paper.md"
        if self.context in (Context.FULL, Context.ORACLE) and paper.is_file():
            text, cut = truncate(paper.read_text(encoding="utf-8"), self.config.max_paper_chars)
            note = " (cut in the middle; the whole paper is in /workspace/paper.md)" if cut else ""
            parts.append(f"# The paper{note}\n\n{text.strip()}")
        parts.append("Your current directory is /workspace.")
        return "\n\n".join(parts)


def _read_task(workspace: Path) -> dict:
    try:
        task = json.loads((workspace / "task.json").read_text(encoding="utf-8"))
        (workspace / "TASK.md").stat()
    except (OSError, ValueError) as error:
        raise ValueError(f"{workspace} is not a built workspace (task.json / TASK.md): {error}") from None
    return task


def _transcript(messages: list[Message]) -> str:
    """A step's messages as text for the summariser."""
    lines = []
    for message in messages:
        if message.role == "assistant":
            if message.content:
                lines.append(f"Thought: {message.content}")
            for call in message.tool_calls:
                lines.append(f"Action: {call.name} {json.dumps(call.arguments)[:2000]}")
        else:
            lines.append(f"Observation: {truncate(message.content, 3000)[0]}")
    return "\n".join(lines)
