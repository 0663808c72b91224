"""The provider-neutral chat interface every agent talks to.

Agents build a list of `Message`s, hand it to a `ChatModel` with the tools they offer, and get back a
`Completion`: text, native tool calls, token usage and cost. Provider adapters (OpenAI chat
completions, Anthropic messages) translate both ways; nothing outside them imports a provider SDK.
"""

from __future__ import annotations

import json
import os
from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, Literal

from runs.benchmark.text import sendable_text

Role = Literal["system", "user", "assistant", "tool"]
ROLES: tuple[str, ...] = ("system", "user", "assistant", "tool")

# Key of the single entry in `ToolCall.arguments` when the model's arguments were not a JSON object.
INVALID_JSON_KEY = "__invalid_json__"





def sendable_arguments(arguments: dict[str, Any]) -> dict[str, Any]:
    """A tool call's arguments as a request can carry them back (see sendable_text): unchanged in
    the usual case, where they encode as they are."""
    try:
        json.dumps(arguments, ensure_ascii=False).encode("utf-8")
        return arguments
    except UnicodeEncodeError:
        pass
    except (ValueError, TypeError, RecursionError):
        return arguments  # nothing a request would have to encode differently than now

    def rebuilt(value: Any) -> Any:
        if isinstance(value, str):
            return sendable_text(value)
        if isinstance(value, dict):
            return {sendable_text(str(key)): rebuilt(item) for key, item in value.items()}
        if isinstance(value, list):
            return [rebuilt(item) for item in value]
        return value

    try:
        return rebuilt(arguments)
    except RecursionError:
        return {INVALID_JSON_KEY: "(arguments nested too deeply to read)"}


@dataclass(frozen=True)
class ToolCall:
    """One native tool call requested by the model.

    `arguments` is the parsed JSON object. When the model produced something that is not a JSON
    object, it is `{"__invalid_json__": <raw text>}` so the agent can tell the model what went wrong
    instead of crashing.
    """

    id: str
    name: str
    arguments: dict[str, Any]

    @property
    def invalid_arguments(self) -> str | None:
        """The raw argument text when it could not be parsed, else None."""
        if set(self.arguments) == {INVALID_JSON_KEY}:
            return self.arguments[INVALID_JSON_KEY]
        return None


@dataclass(frozen=True)
class ToolSpec:
    """A tool offered to the model: name, description and a JSON schema for its arguments."""

    name: str
    description: str
    parameters: dict[str, Any]


@dataclass
class Message:
    """One conversation turn.

    - system / user: `content` only.
    - assistant: `content` (may be empty) and the `tool_calls` it made.
    - tool: the observation for one tool call, `content`, answering `tool_call_id`.
    """

    role: Role
    content: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    tool_call_id: str | None = None

    def __post_init__(self) -> None:
        # Fail where a bad message is built, not three steps later inside a provider's 400.
        if self.role not in ROLES:
            raise ValueError(f"Message role must be one of {', '.join(ROLES)}; got {self.role!r}")
        if self.tool_calls and self.role != "assistant":
            raise ValueError("only assistant messages carry tool_calls")
        if self.role == "tool" and not self.tool_call_id:
            raise ValueError("a tool message needs the tool_call_id it answers")
        if self.role != "tool" and self.tool_call_id is not None:
            raise ValueError("only tool messages carry a tool_call_id")

    @classmethod
    def system(cls, content: str) -> Message:
        return cls("system", content)

    @classmethod
    def user(cls, content: str) -> Message:
        return cls("user", content)

    @classmethod
    def assistant(cls, content: str = "", tool_calls: list[ToolCall] | None = None) -> Message:
        return cls("assistant", content, list(tool_calls or []))

    @classmethod
    def tool(cls, tool_call_id: str, content: str) -> Message:
        return cls("tool", content, tool_call_id=tool_call_id)


@dataclass(frozen=True)
class Usage:
    """Tokens billed for one call. `input_tokens` counts the whole prompt, cached or not."""

    input_tokens: int = 0
    output_tokens: int = 0


@dataclass(frozen=True)
class Completion:
    """What one model call returned.

    `cost` is in USD; None means the price is unknown (model missing from the price table, or the
    server reported no usage) — never a guess of zero. `model` is the model the server says
    answered (often a dated snapshot of the one requested). `raw_stop_reason` is the provider's own
    value (`stop`, `tool_calls`, `length`, `end_turn`, `tool_use`, `max_tokens`, ...).
    """

    text: str
    tool_calls: list[ToolCall]
    usage: Usage
    cost: float | None
    model: str
    raw_stop_reason: str | None = None

    def as_message(self) -> Message:
        """The assistant message to append to the history."""
        return Message.assistant(self.text, self.tool_calls)


class ModelError(Exception):
    """The provider call failed for good (the SDK's own retries, if any applied, are spent).

    `retryable` says whether the cause is transient (rate limit, server error, connection
    problem), so a caller may try again later; False for authentication, bad requests and the like.
    `message` is the provider's own message, `status` the HTTP status when there was one.
    """

    def __init__(
        self, message: str, *, retryable: bool, status: int | None = None, provider: str = ""
    ) -> None:
        self.message = message
        self.retryable = retryable
        self.status = status
        self.provider = provider
        where = f"{provider}: " if provider else ""
        http = f"HTTP {status}: " if status is not None else ""
        super().__init__(f"{where}{http}{message}")


class MissingAPIKey(ModelError):
    """No API key was given and the provider's environment variable is not set."""

    def __init__(self, env_var: str, *, provider: str) -> None:
        self.env_var = env_var
        super().__init__(
            f"no API key: set the {env_var} environment variable (or pass api_key=...)",
            retryable=False,
            provider=provider,
        )


class ChatModel(ABC):
    """A chat model with native tool calling.

    `name` identifies the model and endpoint in the spec syntax `model_from_name` accepts, so a
    trajectory header records exactly what answered.
    """

    name: str

    @abstractmethod
    def complete(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec],
        max_tokens: int = 4096,
        temperature: float = 0.0,
    ) -> Completion:
        """Send the conversation; return the model's next turn. Raises ModelError on failure."""

    def close(self) -> None:
        """Release the HTTP connection pool. Optional: it is also released on garbage collection."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.name}>"


# The environment variables OpenAI's endpoint is configured by: here, not in the adapter, so that
# retrieval's embedder can share them without importing the SDK.
OPENAI_API_KEY_ENV = "OPENAI_API_KEY"
OPENAI_BASE_URL_ENV = "OPENAI_BASE_URL"

# Sent to a custom base URL when no key is configured: local servers (vLLM, Ollama) and gateways
# accept any bearer token, and the SDKs refuse to build a client without one.
PLACEHOLDER_API_KEY = "no-key-needed"


def resolve_endpoint(
    *, api_key: str | None, base_url: str | None, api_key_env: str, base_url_env: str, provider: str
) -> tuple[str | None, str]:
    """The base URL (None: the provider's own) and key to use; a missing key is an error only for the provider's own endpoint."""
    base_url = base_url or os.environ.get(base_url_env) or None
    api_key = api_key or os.environ.get(api_key_env)
    if not api_key:
        if base_url is None:
            raise MissingAPIKey(api_key_env, provider=provider)
        api_key = PLACEHOLDER_API_KEY
    return base_url, api_key
