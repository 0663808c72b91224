"""What a model call cost, in USD, from the tokens it used.

Prices are list prices in USD per million tokens, standard tier, as published by the providers
(platform.openai.com/docs/pricing; docs.anthropic.com/en/docs/about-claude/pricing and the per-model
pages on platform.claude.com for Claude 4.6 and later); table compiled 2026-11. Discounts (prompt
caching, batch) and long-context surcharges are ignored: every input token is charged at the base
input price.

Users add or override entries with a JSON file named by the environment variable `LLM_PRICES_FILE`,
in the same shape as `BUILTIN_PRICES`::

    {"my-local-model": {"input": 0, "output": 0}, "gpt-4o": {"input": 2.5, "output": 10}}

Lookup: the exact model name first, then a table entry plus a snapshot suffix (`-2024-08-06`,
`-20241022`, `-0613`, `-latest`), taking the longest such entry: `gpt-4o-2024-08-06` is priced as
`gpt-4o`, `gpt-4o-mini-2024-07-18` as `gpt-4o-mini`. Any other suffix is a different model, often
with a different price (`gpt-4-32k`, `claude-opus-4-7`), so it is unknown rather than guessed.
Unknown models cost None, never an error: a missing price must not stop a run.

Newer models are left out where we found no price on the provider's own pages (e.g. OpenAI's
gpt-5.1 and later); add them with `LLM_PRICES_FILE`.
"""

from __future__ import annotations

import functools
import json
import logging
import math
import os
import re
from dataclasses import dataclass

from .base import Usage

log = logging.getLogger(__name__)

PRICES_FILE_ENV = "LLM_PRICES_FILE"
PRICES_AS_OF = "2026-11"

# What a provider appends to a model name for a pinned snapshot of the same model.
_SNAPSHOT = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|\d{4}|latest)")

BUILTIN_PRICES: dict[str, dict[str, float]] = {
    # OpenAI
    "gpt-4o": {"input": 2.50, "output": 10.00},
    "gpt-4o-2024-05-13": {"input": 5.00, "output": 15.00},  # the first snapshot kept its launch price
    "chatgpt-4o-latest": {"input": 5.00, "output": 15.00},
    "gpt-4o-mini": {"input": 0.15, "output": 0.60},
    "gpt-4.1": {"input": 2.00, "output": 8.00},
    "gpt-4.1-mini": {"input": 0.40, "output": 1.60},
    "gpt-4.1-nano": {"input": 0.10, "output": 0.40},
    "gpt-4-turbo": {"input": 10.00, "output": 30.00},
    "gpt-4": {"input": 30.00, "output": 60.00},
    "gpt-3.5-turbo": {"input": 0.50, "output": 1.50},
    "gpt-5": {"input": 1.25, "output": 10.00},
    "gpt-5-mini": {"input": 0.25, "output": 2.00},
    "gpt-5-nano": {"input": 0.05, "output": 0.40},
    "gpt-5-chat-latest": {"input": 1.25, "output": 10.00},
    "o1": {"input": 15.00, "output": 60.00},
    "o1-mini": {"input": 1.10, "output": 4.40},
    "o1-preview": {"input": 15.00, "output": 60.00},
    "o1-pro": {"input": 150.00, "output": 600.00},
    "o3": {"input": 2.00, "output": 8.00},
    "o3-mini": {"input": 1.10, "output": 4.40},
    "o3-pro": {"input": 20.00, "output": 80.00},
    "o4-mini": {"input": 1.10, "output": 4.40},
    # Anthropic
    "claude-3-haiku": {"input": 0.25, "output": 1.25},
    "claude-3-opus": {"input": 15.00, "output": 75.00},
    "claude-3-5-haiku": {"input": 0.80, "output": 4.00},
    "claude-3-5-sonnet": {"input": 3.00, "output": 15.00},
    "claude-3-7-sonnet": {"input": 3.00, "output": 15.00},
    "claude-sonnet-4": {"input": 3.00, "output": 15.00},
    "claude-sonnet-4-0": {"input": 3.00, "output": 15.00},
    "claude-sonnet-4-5": {"input": 3.00, "output": 15.00},
    "claude-sonnet-4-6": {"input": 3.00, "output": 15.00},
    "claude-opus-4": {"input": 15.00, "output": 75.00},
    "claude-opus-4-0": {"input": 15.00, "output": 75.00},
    "claude-opus-4-1": {"input": 15.00, "output": 75.00},
    "claude-opus-4-5": {"input": 5.00, "output": 25.00},
    "claude-opus-4-6": {"input": 5.00, "output": 25.00},
    "claude-opus-4-8": {"input": 5.00, "output": 25.00},
    "claude-haiku-4-5": {"input": 1.00, "output": 5.00},
    "claude-sonnet-5": {"input": 2.00, "output": 10.00},
    "claude-sonnet-5-5": {"input": 2.00, "output": 10.00},
    "claude-opus-5": {"input": 5.00, "output": 25.00},
    "claude-opus-5-5": {"input": 4.00, "output": 20.00},
    "claude-fable-5-1": {"input": 10.00, "output": 50.00},
}


@dataclass(frozen=True)
class Price:
    """USD per million input and output tokens."""

    input: float
    output: float


def _parse(table: object, source: str) -> dict[str, Price]:
    if not isinstance(table, dict):
        raise ValueError(f"{source}: expected a JSON object of model -> {{input, output}}")
    prices = {}
    for model, entry in table.items():
        try:
            price = Price(float(entry["input"]), float(entry["output"]))
        except (TypeError, KeyError, ValueError):
            raise ValueError(
                f"{source}: entry {model!r} must be {{\"input\": <USD/Mtok>, \"output\": <USD/Mtok>}}"
            ) from None
        if not all(math.isfinite(p) and p >= 0 for p in (price.input, price.output)):
            raise ValueError(f"{source}: entry {model!r} has a negative or non-finite price")
        prices[str(model)] = price
    return prices


@functools.cache
def _load(path: str | None) -> dict[str, Price]:
    # Cached per path: the file is read once, not on every model call.
    prices = _parse(BUILTIN_PRICES, "BUILTIN_PRICES")
    if path:
        try:
            with open(path, encoding="utf-8") as handle:
                prices.update(_parse(json.load(handle), path))
        except (OSError, ValueError) as exc:
            # A broken price file must not kill runs that are already going; prices it would have
            # supplied show up as cost None, and this warning says why.
            log.warning("ignoring %s=%s: %s", PRICES_FILE_ENV, path, exc)
    return prices


def price_table() -> dict[str, Price]:
    """Built-in prices merged with the `LLM_PRICES_FILE` ones (which win)."""
    return _load(os.environ.get(PRICES_FILE_ENV) or None)


def reload_prices() -> None:
    """Forget loaded price files, so an edited file is read again."""
    _load.cache_clear()


def price_for(model: str) -> Price | None:
    """The price of `model`: exact name, else the longest entry plus a snapshot suffix; else None."""
    table = price_table()
    if model in table:
        return table[model]
    snapshots = [name for name in table if model.startswith(name) and _SNAPSHOT.fullmatch(model[len(name):])]
    return table[max(snapshots, key=len)] if snapshots else None


def cost(model: str, usage: Usage) -> float | None:
    """USD for `usage` tokens of `model`, or None when the model's price is unknown."""
    price = price_for(model)
    if price is None:
        return None
    return (usage.input_tokens * price.input + usage.output_tokens * price.output) / 1_000_000
