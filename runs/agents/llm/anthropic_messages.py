"""Claude models behind the Anthropic messages API, with native tool use."""

from __future__ import annotations

from typing import Any

import anthropic

from runs.benchmark.text import sendable_text

from . import pricing
from ._errors import translate
from .base import (
    INVALID_JSON_KEY,
    ChatModel,
    Completion,
    Message,
    ToolCall,
    ToolSpec,
    Usage,
    resolve_endpoint,
    sendable_arguments,
)

API_KEY_ENV = "ANTHROPIC_API_KEY"
BASE_URL_ENV = "ANTHROPIC_BASE_URL"


class AnthropicModel(ChatModel):
    """A Claude model through the messages API.

    `api_key` defaults to `$ANTHROPIC_API_KEY` (MissingAPIKey when neither is set, unless a custom
    `base_url` is given, default `$ANTHROPIC_BASE_URL`). The key is always passed explicitly, so
    the SDK never falls back to credential profiles on disk.

    `temperature` is not sent unless `send_temperature=True`: the installed SDK has no sampling
    parameters at all, and recent Claude models (Opus 4.7+, Sonnet 5+) answer a non-default
    temperature with a 400. Opt in for older models or gateways that still honour it.
    """

    provider = "anthropic"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        max_retries: int = 4,
        timeout: float = 120,
        send_temperature: bool = False,
    ) -> None:
        self.model = model
        self.base_url, api_key = resolve_endpoint(
            api_key=api_key, base_url=base_url, api_key_env=API_KEY_ENV, base_url_env=BASE_URL_ENV, provider=self.provider
        )
        self.max_retries = max_retries
        self.send_temperature = send_temperature
        self.name = f"anthropic:{model}@{self.base_url}" if self.base_url else f"anthropic:{model}"
        self._client = anthropic.Anthropic(
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
            response = self._client.messages.create(**params)
        except anthropic.AnthropicError as exc:
            raise translate(
                exc, sdk=anthropic, provider=self.name, env_var=API_KEY_ENV, max_retries=self.max_retries
            ) from exc
        return self._completion(response)

    def request_params(
        self, messages: list[Message], *, tools: list[ToolSpec], max_tokens: int, temperature: float
    ) -> dict[str, Any]:
        """The keyword arguments for `messages.create`."""
        system, conversation = to_anthropic_messages(messages)
        params: dict[str, Any] = {"model": self.model, "max_tokens": max_tokens, "messages": conversation}
        if system:
            params["system"] = system
        if tools:
            params["tools"] = to_anthropic_tools(tools)
        if self.send_temperature:
            params["extra_body"] = {"temperature": temperature}
        return params

    def _completion(self, response: Any) -> Completion:
        texts, calls = [], []
        for block in response.content:
            if block.type == "text":
                texts.append(sendable_text(block.text))
            elif block.type == "tool_use":
                arguments = block.input
                if not isinstance(arguments, dict):  # only a misbehaving gateway sends this
                    arguments = {INVALID_JSON_KEY: str(arguments)}
                calls.append(ToolCall(id=block.id, name=sendable_text(block.name), arguments=sendable_arguments(arguments)))
            # Thinking and server-tool blocks carry nothing the agent acts on.
        u = response.usage
        # input_tokens excludes prompt-cache reads and writes; count them so input_tokens is the
        # whole prompt, as on OpenAI.
        usage = Usage(
            (u.input_tokens or 0) + (u.cache_creation_input_tokens or 0) + (u.cache_read_input_tokens or 0),
            u.output_tokens or 0,
        )
        answered_by = response.model or self.model
        cost = pricing.cost(answered_by, usage)
        if cost is None and answered_by != self.model:
            cost = pricing.cost(self.model, usage)
        return Completion(
            text="\n".join(texts),
            tool_calls=calls,
            usage=usage,
            cost=cost,
            model=answered_by,
            raw_stop_reason=response.stop_reason,
        )

    def close(self) -> None:
        self._client.close()


def to_anthropic_tools(tools: list[ToolSpec]) -> list[dict[str, Any]]:
    return [{"name": t.name, "description": t.description, "input_schema": t.parameters} for t in tools]


def _blocks(m: Message) -> list[dict[str, Any]]:
    if m.role == "tool":
        block: dict[str, Any] = {"type": "tool_result", "tool_use_id": m.tool_call_id}
        if m.content:
            block["content"] = m.content
        return [block]
    # The API rejects empty text blocks.
    blocks: list[dict[str, Any]] = [{"type": "text", "text": m.content}] if m.content else []
    for call in m.tool_calls:
        blocks.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
    return blocks


def to_anthropic_messages(messages: list[Message]) -> tuple[str, list[dict[str, Any]]]:
    """The `system` prompt and the `messages` list for our conversation.

    Leading system messages become `system`. Tool results become `tool_result` blocks in a user
    turn; consecutive turns of the same role (several tool results, a tool result then a user note)
    merge into one message, keeping the strict user/assistant alternation. A system message later
    in the conversation stays where it is, as user text: the API has no mid-conversation system
    role. Turns with nothing to say are dropped: the API rejects empty content.
    """
    leading = 0
    while leading < len(messages) and messages[leading].role == "system":
        leading += 1
    system = "\n\n".join(m.content for m in messages[:leading] if m.content)

    conversation: list[dict[str, Any]] = []
    for m in messages[leading:]:
        role = "assistant" if m.role == "assistant" else "user"
        blocks = _blocks(m)
        if not blocks:
            continue
        if conversation and conversation[-1]["role"] == role:
            conversation[-1]["content"].extend(blocks)
        else:
            conversation.append({"role": role, "content": blocks})
    return system, conversation
