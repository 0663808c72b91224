"""Agent settings: the pydantic model each agent's settings are (`AgentSettings`), the messages
that say which setting was wrong, and the versions of the settings a run stores.

A run stores its agent's settings as a JSON object (`Run.agent_config`) beside the version of that
object's shape (`Run.agent_config_version`). The worker reads them back through
`stored_settings_current`, which applies the migrations from the stored version to
`AGENT_CONFIG_VERSION` one step at a time (as Inspect AI does for its logs), so a run stored
before a setting was renamed still builds its agent.

Version 1 is the shape every run has stored so far: a flat object of the agent's settings by name
(`{"history": "window", "window": 5}`), possibly with the run's own budgets, which runs created
before the run form refused them may hold and which win over the run's fields. When a setting is
renamed or its meaning changes, raise `AGENT_CONFIG_VERSION` and add the step from the previous
version to `_MIGRATIONS`, with a stored example of the old shape in tests/agents/fixtures/.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Self

from pydantic import BaseModel, ConfigDict, ValidationError
from pydantic_core import ErrorDetails

__all__ = [
    "AGENT_CONFIG_VERSION",
    "AgentSettings",
    "SettingsInvalid",
    "stored_settings_current",
]

AGENT_CONFIG_VERSION = 1

# version v -> the function that turns a stored object of version v into one of version v + 1.
_MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {}


class SettingsInvalid(ValueError):
    """Settings an agent refuses; the message names each setting and what is wrong with it."""


def stored_settings_current(stored: Mapping[str, Any] | None, *, version: int) -> dict[str, Any]:
    """A run's stored agent settings (`stored`, of shape `version`) in the current shape."""
    if not 1 <= version <= AGENT_CONFIG_VERSION:
        raise SettingsInvalid(
            f"agent settings of version {version}: this code reads versions 1 to {AGENT_CONFIG_VERSION}"
        )
    settings = dict(stored or {})
    for step in range(version, AGENT_CONFIG_VERSION):
        settings = _MIGRATIONS[step](settings)
    return settings


class AgentSettings(BaseModel):
    """The settings of one kind of agent, each a typed field with its default; an agent's class
    names its model in `config_class`. A setting the model does not declare is refused by name, a
    value it refuses by the setting's name and why (`SettingsInvalid`, a ValueError)."""

    model_config = ConfigDict(extra="forbid")

    def __init__(self, **settings: Any) -> None:
        try:
            super().__init__(**settings)
        except ValidationError as error:
            raise SettingsInvalid(settings_problems(error)) from None

    def replaced(self, **changes: Any) -> Self:
        """A copy with `changes` applied, checked as the constructor checks them."""
        return type(self)(**{**self.as_dict(), **changes})

    def as_dict(self) -> dict[str, Any]:
        """Every setting by name (what the trajectory header records)."""
        return self.model_dump()


def settings_problems(error: ValidationError) -> str:
    """One line per refused setting: 'window must be at least 1, got 0'."""
    return "; ".join(_problem(detail) for detail in error.errors())


# pydantic's error types of the bounds the settings declare, as the settings' own words.
_BOUND_WORDS = {"greater_than": "greater than", "greater_than_equal": "at least", "less_than": "less than",
                "less_than_equal": "at most"}


def _problem(detail: ErrorDetails) -> str:
    name = ".".join(str(part) for part in detail["loc"]) or "settings"
    kind = detail["type"]
    context = detail.get("ctx") or {}
    if kind == "extra_forbidden":
        return f"no setting {name!r}"
    if kind == "value_error":
        return f"{name} {context['error']}"
    if kind == "greater_than" and context.get("gt") == 0:
        return f"{name} must be positive, got {detail['input']!r}"
    if kind == "greater_than_equal" and context.get("ge") == 0:
        return f"{name} must not be negative, got {detail['input']!r}"
    if kind in _BOUND_WORDS:
        bound = next(iter(context.values()))
        return f"{name} must be {_BOUND_WORDS[kind]} {bound}, got {detail['input']!r}"
    return f"{name}: {detail['msg'][0].lower()}{detail['msg'][1:]}, got {detail['input']!r}"
