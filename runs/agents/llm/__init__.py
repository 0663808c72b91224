"""LLM adapters: one provider-neutral chat interface over the official OpenAI and Anthropic SDKs.

Pick a model with a spec string::

    openai:<model>                          openai:gpt-4o            (key: $OPENAI_API_KEY)
    anthropic:<model>                       anthropic:claude-3-5-sonnet-20241022 ($ANTHROPIC_API_KEY)
    openai-compatible:<model>@<base_url>    openai-compatible:llama3.1:8b@http://localhost:11434/v1

The provider is everything before the first ":"; the model may itself contain ":" (Ollama tags).
For any provider, `@<base_url>` (http or https) at the end, or a `base_url=` keyword, sets the
endpoint; `openai-compatible` requires one. A model's `name` is again a spec string, so it
round-trips through `model_from_name`.

Part of `runs.agents` (no ORM): it imports only `runs.benchmark.text`, and a provider's adapter and
SDK only when a model of that provider is built (`model_from_name`, or first access to
`AnthropicModel` / `OpenAIChatModel` here): `import anthropic` alone is slow, and every
web worker, management command and RQ worker would pay for it otherwise. `provider_module` names the
adapter module a spec needs, for a process that wants it imported ahead (before forking).
"""

from __future__ import annotations

import importlib
import re
from typing import TYPE_CHECKING, Any

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
from .pricing import cost

if TYPE_CHECKING:
    from .anthropic_messages import AnthropicModel
    from .openai_chat import OpenAIChatModel

__all__ = [
    "ADAPTER_MODULES",
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
    "provider_module",
]

# Provider name -> (adapter module, ChatModel class in it). Modules, not classes, so that importing
# this package does not import the SDKs; `model_from_name` imports the one it needs.
PROVIDERS: dict[str, tuple[str, str]] = {
    "openai": (f"{__name__}.openai_chat", "OpenAIChatModel"),
    "anthropic": (f"{__name__}.anthropic_messages", "AnthropicModel"),
    "openai-compatible": (f"{__name__}.openai_chat", "OpenAIChatModel"),
}
ADAPTER_MODULES = frozenset(module for module, _ in PROVIDERS.values())
# The adapter classes this package exports, imported on first access (module __getattr__ below).
_LAZY_CLASSES = {cls: (module, cls) for module, cls in PROVIDERS.values()}

# The model is everything up to the first "@" that starts an http(s) URL, so model names and URLs
# may both contain "@" (user:password@host) without ambiguity.
_WITH_URL = re.compile(r"^(?P<model>.+?)@(?P<url>https?://\S+)$")


def _parse_spec(spec: str) -> tuple[str, str, str | None]:
    """(provider, model, base URL or None) of a spec string; ValueError if malformed or unknown provider."""
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
        return provider, match["model"], match["url"]
    return provider, model, None


def provider_module(spec: str) -> str | None:
    """The dotted name of the adapter module (and so the SDK) a model spec needs, e.g.
    "runs.agents.llm.anthropic_messages" for "anthropic:claude-3-5-sonnet-20241022"; None for an
    empty or malformed spec or an unknown provider. For importing it ahead of time (before forking).
    """
    try:
        provider, _, _ = _parse_spec(spec)
    except ValueError:
        return None
    return PROVIDERS[provider][0]


def model_from_name(spec: str, **kwargs: Any) -> ChatModel:
    """The ChatModel a spec string names (syntax in the module docstring).

    Keyword arguments (api_key, base_url, max_retries, timeout, ...) go to the adapter; a base URL
    in the spec wins over a `base_url` keyword. Raises ValueError for a malformed spec or an unknown
    provider, MissingAPIKey when the provider needs a key that is not configured. Imports the
    provider's adapter, and with it its SDK, on first use.
    """
    provider, model, base_url = _parse_spec(spec)
    if base_url is not None:
        kwargs["base_url"] = base_url
    if provider == "openai-compatible" and not kwargs.get("base_url"):
        raise ValueError(
            f"{spec!r}: openai-compatible needs a base URL: openai-compatible:<model>@<base_url> "
            "or base_url=..."
        )
    module, cls = PROVIDERS[provider]
    return getattr(importlib.import_module(module), cls)(model, **kwargs)


def __getattr__(name: str) -> Any:
    # PEP 562: `from runs.agents.llm import AnthropicModel` imports the adapter (and SDK) only then.
    if name not in _LAZY_CLASSES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, cls = _LAZY_CLASSES[name]
    value = getattr(importlib.import_module(module), cls)
    globals()[name] = value  # later lookups skip this function
    return value
