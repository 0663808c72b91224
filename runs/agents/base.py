"""What every agent shares: the `Agent` base class (what an agent declares of itself), exit
statuses, the exceptions that end a run, budgets, the result.

An agent run ends by an exception that carries its exit status (mini-swe-agent's pattern): a limit
check raises `StepLimitReached`, the final answer raises `Submitted`, and so on. The loop catches
`AgentExit` in one place, writes the trajectory and returns an `AgentResult`. Baselines that never
loop (agentless, gold, noop) reuse the same pieces.
"""

from __future__ import annotations

import inspect
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from runs.benchmark.answers import ParsedAnswer

from .settings import AgentSettings
from .trajectory import Step, Trajectory

if TYPE_CHECKING:
    from sandbox import Sandbox

    from .llm import ChatModel


class ExitStatus(StrEnum):
    """How one of our agents' runs ended: its result's, its trajectory header's and its attempt's
    `exit_status` (trajectories converted from other tools keep their own words)."""

    SUBMITTED = "submitted"
    STEP_LIMIT = "step_limit"
    TIME_LIMIT = "time_limit"
    COST_LIMIT = "cost_limit"
    MODEL_ERROR = "model_error"
    SANDBOX_ERROR = "sandbox_error"
    # A bug in the harness itself: the trajectory is still written, then the exception propagates.
    HARNESS_ERROR = "harness_error"


class AgentExit(Exception):
    """Ends an agent run; `exit_status` says how. The message says why, for the trajectory."""

    exit_status: ClassVar[ExitStatus]


class Submitted(AgentExit):
    exit_status = ExitStatus.SUBMITTED


class StepLimitReached(AgentExit):
    exit_status = ExitStatus.STEP_LIMIT


class TimeLimitReached(AgentExit):
    exit_status = ExitStatus.TIME_LIMIT


class CostLimitReached(AgentExit):
    exit_status = ExitStatus.COST_LIMIT


class ModelFailed(AgentExit):
    exit_status = ExitStatus.MODEL_ERROR


class SandboxFailed(AgentExit):
    """The sandbox itself broke (backend gone, closed): nothing the agent did or can fix."""

    exit_status = ExitStatus.SANDBOX_ERROR


@dataclass
class Budget:
    """Steps, wall time (model latency included) and USD an agent may spend.

    A cost the price table does not know counts as 0 here but sets `cost_unknown`, which the
    trajectory records, so a run on an unpriced model is never mistaken for a free one.
    """

    max_steps: int = 50
    max_seconds: float = 1800.0
    max_cost: float = 1.0
    clock: Callable[[], float] = time.monotonic

    def __post_init__(self) -> None:
        self.started = self.clock()
        self.steps = 0
        self.cost = 0.0
        self.cost_unknown = False
        self.input_tokens = 0
        self.output_tokens = 0

    def elapsed(self) -> float:
        return self.clock() - self.started

    def time_left(self) -> float:
        return self.max_seconds - self.elapsed()

    def charge(self, *, input_tokens: int = 0, output_tokens: int = 0, cost: float | None = 0.0) -> None:
        """Count one model call's tokens and cost (None: price unknown)."""
        self.input_tokens += input_tokens
        self.output_tokens += output_tokens
        if cost is None:
            self.cost_unknown = True
        else:
            self.cost += cost

    def check_time_and_cost(self) -> None:
        """Raises TimeLimitReached or CostLimitReached when either is spent."""
        elapsed = self.elapsed()
        if elapsed >= self.max_seconds:
            raise TimeLimitReached(f"time limit of {self.max_seconds:g} s reached after {elapsed:.1f} s")
        if self.cost >= self.max_cost:
            raise CostLimitReached(f"cost limit of ${self.max_cost:g} reached (spent ${self.cost:.4f})")

    def check(self) -> None:
        """Before a step: raises when no step, time or money is left."""
        if self.steps >= self.max_steps:
            raise StepLimitReached(f"step limit of {self.max_steps} reached without a final answer")
        self.check_time_and_cost()


@dataclass
class AgentResult:
    """How a run ended and what it submitted. `final_answer` is None when nothing was submitted."""

    exit_status: ExitStatus
    final_answer_raw: str | None
    final_answer: ParsedAnswer | None
    trajectory: Trajectory
    exit_message: str = ""

    @property
    def submitted(self) -> bool:
        return self.exit_status == ExitStatus.SUBMITTED


class Agent(ABC):
    """What every agent is and declares of itself. Create one by name (runs.agents.agent_from_name,
    which checks its settings against `setting_names`), then `run` it once on a freshly built
    workspace.

    The harness and the run form read the declarations rather than the agent's name: `needs_model`
    (a run of it needs a model spec), `needs_gold_bodies` (it is built with `gold_bodies=`, from
    runs.agents.baselines.gold_bodies_for) and `seeded_per_attempt` (it is built with a `seed=`,
    which the harness varies with the attempt so that each attempt of a run differs, reproducibly).
    """

    name: ClassVar[str]
    config_class: ClassVar[type[AgentSettings]]  # the model of its settings (recorded in the trajectory header)
    needs_model: ClassVar[bool] = True
    needs_gold_bodies: ClassVar[bool] = False
    seeded_per_attempt: ClassVar[bool] = False

    @classmethod
    def setting_names(cls) -> frozenset[str]:
        """The settings it may be built with: the fields of its `config_class` and the named
        parameters of its constructors (a subclass's, and those it hands the rest of its settings
        to: `gold_bodies`, `seed`, `config`, ...)."""
        names = set(cls.config_class.model_fields)
        for klass in cls.__mro__:
            constructor = vars(klass).get("__init__")
            if constructor is None or klass is object:
                continue
            names.update(
                parameter.name
                for parameter in inspect.signature(constructor).parameters.values()
                if parameter.kind in (parameter.POSITIONAL_OR_KEYWORD, parameter.KEYWORD_ONLY) and parameter.name != "self"
            )
        return frozenset(names)

    def required_model(self, model: ChatModel | None) -> ChatModel:
        """`model`, which an agent that `needs_model` cannot run without (the harness always gives one)."""
        if model is None:
            raise ValueError(f"agent {self.name!r} needs a model")
        return model

    @abstractmethod
    def run(self, *, model: ChatModel | None, sandbox: Sandbox, workspace: Path, trajectory_path: Path,
            clock: Callable[[], float] = time.monotonic, on_step: Callable[[Step], None] | None = None) -> AgentResult:
        """Run on `workspace` (the host directory `sandbox` mounts) until the agent submits or a
        limit ends it, saving the trajectory to `trajectory_path` after every step; `on_step` is
        called after each step is saved."""
