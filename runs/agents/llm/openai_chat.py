"""Chat models behind the OpenAI chat completions API: OpenAI itself, or any OpenAI-compatible
server (vLLM, Ollama, llama.cpp server, LM Studio) given its base URL."""

from __future__ import annotations

import json
import re
from typing import Any

import openai

from runs.benchmark.text import sendable_text

from . import pricing
from ._errors import translate
from .base import (
    INVALID_JSON_KEY,
    OPENAI_API_KEY_ENV,
    OPENAI_BASE_URL_ENV,
    ChatModel,
    Completion,
    Message,
    ModelError,
    ToolCall,
    ToolSpec,
    Usage,
    resolve_endpoint,
    sendable_arguments,
)

# OpenAI's reasoning models reject any temperature but the default.
_REASONING_MODEL = re.compile(r"^(o\d|gpt-5)")


class OpenAIChatModel(ChatModel):
    """A model served through the chat completions API, with native function calling.

    `api_key` defaults to `$OPENAI_API_KEY`. `base_url` (default `$OPENAI_BASE_URL`, else OpenAI)
    points at any OpenAI-compatible server, e.g. `http://localhost:8000/v1` for vLLM or
    `http://localhost:11434/v1` for Ollama; such servers usually need no key, so without one a
    placeholder is sent. Without a base URL a key is required (MissingAPIKey otherwise).

    `max_retries` and `timeout` (seconds per attempt) go to the SDK, which retries rate limits,
    server and connection errors with exponential backoff and honours Retry-After.
    """

    provider = "openai"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 4,
        timeout: float = 120,
    ) -> None:
        self.model = model
        self.base_url, api_key = resolve_endpoint(
            api_key=api_key, base_url=base_url, api_key_env=OPENAI_API_KEY_ENV, base_url_env=OPENAI_BASE_URL_ENV, provider=self.provider
        )
        self.max_retries = max_retries
        self.name = f"openai-compatible:{model}@{self.base_url}" if self.base_url else f"openai:{model}"
        self._client = openai.OpenAI(
            api_key=api_key, base_url=self.base_url, max_retries=max_retries, timeout=timeout
        )

    def complete(
        self,
        messages: list[Message],
        *,
        tools: list[ToolSpec],
        max_tokens: int = 4096,
        temperature: float = 0.0,
    ) -> Completion:
        params = self.request_params(messages, tools=tools, max_tokens=max_tokens, temperature=temperature)
        try:
            response = self._client.chat.completions.create(**params)
        except openai.OpenAIError as exc:
            raise translate(
                exc, sdk=openai, provider=self.name, env_var=OPENAI_API_KEY_ENV, max_retries=self.max_retries
            ) from exc
        return self._completion(response)

    def request_params(
        self, messages: list[Message], *, tools: list[ToolSpec], max_tokens: int, temperature: float
    ) -> dict[str, Any]:
        """The keyword arguments for `chat.completions.create`."""
        params: dict[str, Any] = {"model": self.model, "messages": to_openai_messages(messages)}
        if tools:
            # OpenAI rejects an empty tools list, so it is left out rather than sent empty.
            params["tools"] = to_openai_tools(tools)
        if self.base_url is None:
            # OpenAI deprecated max_tokens and its reasoning models refuse it, but many
            # OpenAI-compatible servers (older Ollama, llama.cpp) only know max_tokens.
            params["max_completion_tokens"] = max_tokens
        else:
            params["max_tokens"] = max_tokens
        if not _REASONING_MODEL.match(self.model):
            params["temperature"] = temperature
        return params

    def _completion(self, response: Any) -> Completion:
        if not response.choices:
            raise ModelError("response has no choices", retryable=False, provider=self.name)
        choice = response.choices[0]
        message = choice.message
        answered_by = response.model or self.model
        if response.usage is None:
            # Some compatible servers omit usage; zero tokens would be a false price of zero.
            usage, cost = Usage(), None
        else:
            usage = Usage(response.usage.prompt_tokens or 0, response.usage.completion_tokens or 0)
            cost = pricing.cost(answered_by, usage)
            if cost is None and answered_by != self.model:
                cost = pricing.cost(self.model, usage)
        return Completion(
            # A refusal comes instead of content; the agent should see it rather than nothing.
            text=sendable_text(message.content or message.refusal or ""),
            tool_calls=from_openai_tool_calls(message.tool_calls or []),
            usage=usage,
            cost=cost,
            model=answered_by,
            raw_stop_reason=choice.finish_reason,
        )

    def close(self) -> None:
        self._client.close()


def to_openai_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [
        {
            "type": "function",
            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
        }
        for t in tools
    ]


def to_openai_messages(messages: list[Message]) -> list[dict[str, Any]]:
    """Our messages as chat completion messages, one for one."""
    converted: list[dict[str, Any]] = []
    for m in messages:
        if m.role == "tool":
            converted.append({"role": "tool", "tool_call_id": m.tool_call_id, "content": m.content})
        elif m.role == "assistant" and m.tool_calls:
            converted.append(
                {
                    # null, not "", is what the API itself returns alongside tool calls.
                    "role": "assistant",
                    "content": m.content or None,
                    "tool_calls": [
                        {
                            "id": c.id,
                            "type": "function",
                            # Always valid JSON, even for a call whose arguments did not parse
                            # (then the {"__invalid_json__": raw} wrapper): a provider may reject
                            # a history holding malformed arguments.
                            "function": {"name": c.name, "arguments": json.dumps(c.arguments)},
                        }
                        for c in m.tool_calls
                    ],
                }
            )
        else:
            converted.append({"role": m.role, "content": m.content})
    return converted


def parse_arguments(raw: str | None) -> dict[str, Any]:
    """The arguments object of a tool call, or the invalid-JSON wrapper around the raw text."""
    if raw is None or not raw.strip():
        # Some servers send "" for a call without arguments.
        return {}
    try:
        parsed = json.loads(raw)
    except (ValueError, RecursionError):  # a model may nest its arguments a thousand levels deep
        return {INVALID_JSON_KEY: raw}
    return parsed if isinstance(parsed, dict) else {INVALID_JSON_KEY: raw}


def from_openai_tool_calls(tool_calls: list[Any]) -> list[ToolCall]:
    calls = []
    for index, call in enumerate(tool_calls):
        function = getattr(call, "function", None)
        if function is None:
            continue  # a "custom" (free-form) tool call: we never offer those
        calls.append(
            ToolCall(
                # Some compatible servers leave the id out; the history still needs one to pair
                # the tool result with.
                id=call.id or f"call_{index}",
                name=sendable_text(function.name),
                arguments=sendable_arguments(parse_arguments(function.arguments)),
            )
        )
    return calls
