"""Agents that attempt a sample, their tools and their trajectories.

Create an agent by name, then run it on a built workspace in a sandbox::

    agent = agent_from_name("react", history="window", window=5)
    result = agent.run(model=model, sandbox=sandbox, workspace=workspace, trajectory_path=path)
    result.exit_status, result.final_answer, result.trajectory

Every agent is a `base.Agent`: a `name`, the pydantic model of its settings (`settings`), what it needs (a model,
gold bodies, a seed per attempt) and `run(*, model, sandbox, workspace, trajectory_path,
clock=..., on_step=None) -> AgentResult`. Agents added later (agentless, gold, noop, mutant)
register their class with `register_agent`; they reuse `tools.run_tool` /
`TrajectoryWriter.tool_step` for their actions and `base.Budget` for their limits.

- `base`: the Agent base class, exit statuses, budgets and the result; `react`, `agentless`,
  `baselines`: the agents; `settings`: the model their settings share, the messages that name a
  refused setting, and the versions of the settings a run stores;
- `tools`: the tools an agent calls, run through the sandbox against the workspace;
  `tool_arguments`: their arguments as pydantic models, which give the schemas the model is shown;
- `trajectory`: the trajectory document format, its pydantic model and the migrations of its older
  versions (no tools, no sandbox); `recorder`: writing one
  while an agent runs; `foreign`: other tools' trajectories converted to ours (uploads,
  import_trajectory);
- `retrieval`, `verifier`: retrieval for agentless, and choosing one of k candidates;
- `llm`: the provider-neutral chat interface and its SDK adapters.

Under `runs.models` in the layers: it may import `runs.benchmark`, `runs.limits` and `sandbox`,
never the ORM (`runs.models`, `runs.suites`, `runs.evaluation`, psycopg, RQ: contract "runs.agents
imports no ORM"). Callers hand it plain objects: a workspace directory, a sandbox, a model.
"""

from __future__ import annotations

from typing import Any

from .agentless import AgentlessAgent, AgentlessConfig
from .base import Agent, AgentResult, Budget, ExitStatus
from .baselines import (
    BaselineConfig,
    GoldAgent,
    MutantAgent,
    NoopAgent,
    gold_bodies_for,
)
from .react import AgentConfig, ReActAgent
from .recorder import TrajectoryWriter
from .settings import AGENT_CONFIG_VERSION, AgentSettings, SettingsInvalid, stored_settings_current
from .trajectory import FORMAT as TRAJECTORY_FORMAT
from .trajectory import Trajectory, TrajectoryFormatError, load_trajectory, trajectory_from_json

__all__ = [
    "AGENTS",
    "AGENT_CONFIG_VERSION",
    "TRAJECTORY_FORMAT",
    "Agent",
    "AgentConfig",
    "AgentResult",
    "AgentSettings",
    "AgentlessAgent",
    "AgentlessConfig",
    "BaselineConfig",
    "Budget",
    "ExitStatus",
    "GoldAgent",
    "MutantAgent",
    "NoopAgent",
    "ReActAgent",
    "SettingsInvalid",
    "Trajectory",
    "TrajectoryFormatError",
    "TrajectoryWriter",
    "agent_from_name",
    "gold_bodies_for",
    "load_trajectory",
    "trajectory_from_json",
    "register_agent",
    "stored_settings_current",
]


# name -> the agent's class, built with the agent's settings as keyword arguments.
AGENTS: dict[str, type[Agent]] = {"react": ReActAgent}


def register_agent(name: str, factory: type[Agent]) -> None:
    """Make `agent_from_name(name, **config)` return `factory(**config)`. `factory` is an Agent
    subclass: what it declares (its settings, what it needs) is read from it."""
    if not (isinstance(factory, type) and issubclass(factory, Agent)):
        raise TypeError(f"agent {name!r}: {factory!r} is not a subclass of runs.agents.base.Agent")
    AGENTS[name] = factory


# The agentless harness and the model-free baselines: gold and mutant need `gold_bodies=` (from
# `gold_bodies_for`), mutant also a `seed=` (their `needs_gold_bodies`, `seeded_per_attempt`).
register_agent("agentless", AgentlessAgent)
register_agent("gold", GoldAgent)
register_agent("noop", NoopAgent)
register_agent("mutant", MutantAgent)


def agent_from_name(name: str, **config: Any) -> Agent:
    """The agent registered as `name`, configured with `config` (e.g. history="window", window=3).

    Raises ValueError for an unknown name, TypeError for a setting the agent does not declare
    (Agent.setting_names) and whatever its settings' checks raise for a value they refuse.
    """
    try:
        factory = AGENTS[name]
    except KeyError:
        raise ValueError(f"unknown agent {name!r}; known agents: {', '.join(sorted(AGENTS))}") from None
    declared = factory.setting_names()
    unknown = sorted(set(config) - declared)
    if unknown:
        raise TypeError(
            f"no setting {', '.join(map(repr, unknown))}; the settings of {name!r} are {', '.join(sorted(declared))}"
        )
    return factory(**config)
