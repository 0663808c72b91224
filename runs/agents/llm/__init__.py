"""LLM adapters: one provider-neutral chat interface over the official OpenAI and Anthropic SDKs.

Pick a model with a spec string::

    openai:<model>                          openai:gpt-4o            (key: $OPENAI_API_KEY)
    anthropic:<model>                       anthropic:claude-3-5-sonnet-20241022 ($ANTHROPIC_API_KEY)
    openai-compatible:<model>@<base_url>    openai-compatible:llama3.1:8b@http://localhost:11434/v1

The provider is everything before the first ":"; the model may itself contain ":" (Ollama tags).
For any provider, `@<base_url>` (http or https) at the end, or a `base_url=` keyword, sets the
endpoint; `openai-compatible` requires one. A model's `name` is again a spec string, so it
round-trips through `model_from_name`.

Part of `runs.agents` (no ORM): besides the SDKs it imports only `runs.benchmark.text`.
"""

from __future__ import annotations

import re
from typing import Any

from .anthropic_messages import AnthropicModel
from .base import (
    INVALID_JSON_KEY,
    ChatModel,
    Completion,
    Message,
    MissingAPIKey,
    ModelError,
    ToolCall,
    ToolSpec,
    Usage,
)
from .openai_chat import OpenAIChatModel
from .pricing import cost

__all__ = [
    "INVALID_JSON_KEY",
    "PROVIDERS",
    "AnthropicModel",
    "ChatModel",
    "Completion",
    "Message",
    "MissingAPIKey",
    "ModelError",
    "OpenAIChatModel",
    "ToolCall",
    "ToolSpec",
    "Usage",
    "cost",
    "model_from_name",
]

PROVIDERS: dict[str, type[ChatModel]] = {
    "openai": OpenAIChatModel,
    "anthropic": AnthropicModel,
    "openai-compatible": OpenAIChatModel,
}

# The model is everything up to the first "@" that starts an http(s) URL, so model names and URLs
# may both contain "@" (user:password@host) without ambiguity.
_WITH_URL = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")


def model_from_name(spec: str, **kwargs: Any) -> ChatModel:
    """The ChatModel a spec string names (syntax in the module docstring).

    Keyword arguments (api_key, base_url, max_retries, timeout, ...) go to the adapter; a base URL
    in the spec wins over a `base_url` keyword. Raises ValueError for a malformed spec or an unknown
    provider, MissingAPIKey when the provider needs a key that is not configured.
    """
    valid = ", ".join(PROVIDERS)
    provider, sep, model = spec.strip().partition(":")
    if not sep or not provider or not model:
        raise ValueError(
            f"model spec {spec!r} must be <provider>:<model>, provider one of: {valid} "
            "(e.g. openai:gpt-4o, anthropic:claude-3-5-sonnet-20241022, "
            "openai-compatible:<model>@http://localhost:8000/v1)"
        )
    if provider not in PROVIDERS:
        raise ValueError(f"unknown LLM provider {provider!r} in {spec!r}; valid providers: {valid}")
    match = _WITH_URL.match(model)
    if match:
        model, kwargs["base_url"] = match["model"], match["url"]
    if provider == "openai-compatible" and not kwargs.get("base_url"):
        raise ValueError(
            f"{spec!r}: openai-compatible needs a base URL: openai-compatible:<model>@<base_url> "
            "or base_url=..."
        )
    return PROVIDERS[provider](model, **kwargs)
