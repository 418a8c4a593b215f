"""Model prices in US dollars, and what a recorded model call cost under them.

:data:`LIST_PRICES` holds the providers' public list prices (USD per 1M tokens) of common OpenAI
and Anthropic models, transcribed on :data:`PRICES_AS_OF`; they change, and a user's own prices
(a discount, a batch rate, a new model) override them (:func:`load_prices`, :func:`price_table`).
:func:`price_call` prices one :class:`context.calls.ModelCall`: from the provider's usage when
it reported one, else (offline models) from taskctx's counted tokens and the provider's cache
rule (:mod:`nodes.pricing`, the bench's), labelled estimated.
"""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from context import InvalidInputError
from context.calls import CallCost, ModelCall

from .pricing import rule_for_provider

__all__ = ["LIST_PRICES", "PRICES_AS_OF", "ModelPrice", "load_prices", "price_call", "price_for", "price_table"]

#: When :data:`LIST_PRICES` was transcribed from the providers' pricing pages.
PRICES_AS_OF = "2025-11"


@dataclass(frozen=True)
class ModelPrice:
    """One model's prices, in US dollars per 1M tokens.

    Attributes:
        provider: LangChain's ``ls_provider`` of the model (``openai``, ``anthropic``...).
        input: An uncached input token's price.
        output: An output token's price.
        cache_read: A cached input token's price (a cache hit).
        cache_write: An input token's price when it is written to the cache (OpenAI: the input
            price; Anthropic: 1.25x, the 5-minute TTL).
    """

    provider: str
    input: float
    output: float
    cache_read: float
    cache_write: float


def _openai(inp: float, cached: float, out: float) -> ModelPrice:
    return ModelPrice("openai", inp, out, cached, inp)


def _anthropic(inp: float, out: float) -> ModelPrice:
    return ModelPrice("anthropic", inp, out, round(inp * 0.1, 6), round(inp * 1.25, 6))


#: List prices (USD per 1M tokens) as of :data:`PRICES_AS_OF`, by model name; a dated name
#: (``gpt-4o-2024-08-06``, :data:`DATED_SUFFIX`) takes its model's price (:func:`price_for`).
LIST_PRICES: dict[str, ModelPrice] = {
    "gpt-5": _openai(1.25, 0.125, 10.0),
    "gpt-5-mini": _openai(0.25, 0.025, 2.0),
    "gpt-5-nano": _openai(0.05, 0.005, 0.4),
    "gpt-4.1": _openai(2.0, 0.5, 8.0),
    "gpt-4.1-mini": _openai(0.4, 0.1, 1.6),
    "gpt-4.1-nano": _openai(0.1, 0.025, 0.4),
    "gpt-4o": _openai(2.5, 1.25, 10.0),
    "gpt-4o-mini": _openai(0.15, 0.075, 0.6),
    "o3": _openai(2.0, 0.5, 8.0),
    "o3-mini": _openai(1.1, 0.55, 4.4),
    "o4-mini": _openai(1.1, 0.275, 4.4),
    "claude-opus-4-5": _anthropic(5.0, 25.0),
    "claude-opus-4-1": _anthropic(15.0, 75.0),
    "claude-opus-4": _anthropic(15.0, 75.0),
    "claude-sonnet-4-5": _anthropic(3.0, 15.0),
    "claude-sonnet-4": _anthropic(3.0, 15.0),
    "claude-3-7-sonnet": _anthropic(3.0, 15.0),
    "claude-3-5-sonnet": _anthropic(3.0, 15.0),
    "claude-haiku-4-5": _anthropic(1.0, 5.0),
    "claude-3-5-haiku": _anthropic(0.8, 4.0),
    "claude-3-haiku": ModelPrice("anthropic", 0.25, 1.25, 0.03, 0.3),
}

_FIELDS = ("provider", "input", "output", "cache_read", "cache_write")

#: The suffix of a dated version of a listed model (which takes that model's price): a date
#: (``-2024-08-06``, ``-20250929``, ``-0613``, ``@20250929``) or ``-latest``, optionally with a
#: revision (``-v1``, ``-v1:0``).
DATED_SUFFIX = re.compile(r"(?:[-@](?:\d{4}-\d{2}-\d{2}|\d{8}|\d{4})|-latest)(?:-v\d+(?::\d+)?)?")


def _entry(name: str, raw: Any, base: ModelPrice | None) -> ModelPrice:
    if not isinstance(raw, Mapping):
        raise InvalidInputError(f"price of {name!r}: expected a table of {', '.join(_FIELDS)}, got {raw!r}")
    unknown = sorted(set(raw) - set(_FIELDS))
    if unknown:
        raise InvalidInputError(f"price of {name!r}: unknown field(s) {', '.join(unknown)}; use {', '.join(_FIELDS)}")
    merged: dict[str, Any] = dict(vars(base)) if base is not None else {}
    merged.update(raw)
    merged.setdefault("cache_read", merged.get("input"))
    merged.setdefault("cache_write", merged.get("input"))
    missing = [f for f in ("input", "output") if merged.get(f) is None]
    if missing:
        raise InvalidInputError(f"price of {name!r}: {' and '.join(missing)} missing (USD per 1M tokens)")
    for f in _FIELDS[1:]:
        v = merged[f]
        if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v < 0:
            raise InvalidInputError(
                f"price of {name!r}: {f} must be a finite number >= 0 (USD per 1M tokens), got {v!r}"
            )
    return ModelPrice(str(merged.get("provider") or ""), *(float(merged[f]) for f in _FIELDS[1:]))


def price_table(overrides: Mapping[str, Any] | None = None) -> dict[str, ModelPrice]:
    """:data:`LIST_PRICES` with ``overrides`` over it.

    Args:
        overrides: Model name -> :class:`ModelPrice`, or a mapping of its fields (USD per 1M
            tokens; a known model's missing fields keep the list price, a new one's cache prices
            default to its input price); or a price file's shape, ``{"models": {name: price}}``.

    Returns:
        The table.

    Raises:
        InvalidInputError: An entry is not a price (the message names the model and the field).
    """
    table = dict(LIST_PRICES)
    overrides = overrides or {}
    if "models" in overrides and "models" not in table:
        # a price file's shape ({"models": {name: price}}) given as a mapping
        models = overrides["models"]
        if len(overrides) > 1 or not isinstance(models, Mapping):
            raise InvalidInputError(
                f"prices: `models` is {models!r}, not a table of models; give model name -> price, "
                'e.g. {"gpt-4o": {"input": 2.5, "output": 10.0}} or {"models": {"gpt-4o": ...}} (USD per 1M tokens)'
            )
        overrides = models
    for name, raw in overrides.items():
        table[name] = raw if isinstance(raw, ModelPrice) else _entry(name, raw, table.get(name))
    return table


def load_prices(path: str | Path) -> dict[str, ModelPrice]:
    """The price table with a file's prices over :data:`LIST_PRICES`.

    The file is TOML (``.toml``) or JSON: one table per model, e.g. ``[models."gpt-4o"]`` with
    ``input = 2.5``, ``output = 10.0``, ``cache_read = 1.25`` (USD per 1M tokens); a top-level
    ``models`` table is optional.

    Args:
        path: The file.

    Returns:
        The table.

    Raises:
        InvalidInputError: The file cannot be read or parsed, or an entry is not a price.
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
        data = tomllib.loads(text) if p.suffix == ".toml" else json.loads(text)
    except (OSError, ValueError) as exc:
        raise InvalidInputError(f"price file {str(p)!r}: {exc}; give a TOML or JSON table per model") from None
    if not isinstance(data, dict):
        raise InvalidInputError(f"price file {str(p)!r}: expected a table of models")
    models = data.get("models", data)
    if not isinstance(models, dict):
        raise InvalidInputError(
            f"price file {str(p)!r}: `models` is {models!r}, not a table of models; give one table per model, "
            'e.g. [models."gpt-4o"] with input = 2.5 and output = 10.0 (USD per 1M tokens)'
        )
    return price_table(models)


def price_for(model: str | None, table: Mapping[str, ModelPrice]) -> tuple[str, ModelPrice] | None:
    """The price of ``model``: its own entry, else the entry its dated name is a version of.

    Only a date or alias suffix inherits (``gpt-4o-2024-08-06``, ``claude-sonnet-4-5-20250929``,
    ``claude-3-5-sonnet-latest``, ``claude-sonnet-4-5@20250929``, :data:`DATED_SUFFIX`): another
    model whose name starts with a listed one (``o3-pro``, ``gpt-5-pro``) has a price of its own
    and is not priced as that one.

    Args:
        model: A model name (``gpt-4o-2024-08-06``, ``openai/gpt-4o``), or None.
        table: The price table.

    Returns:
        ``(the entry's name, its price)``, or None when no entry fits.
    """
    if not model:
        return None
    name = model.rpartition("/")[2]  # "openai/gpt-4o" and "gpt-4o" alike
    if name in table:
        return name, table[name]
    fits = [k for k in table if name.startswith(k) and DATED_SUFFIX.fullmatch(name[len(k) :])]
    if not fits:
        return None
    best = max(fits, key=len)
    return best, table[best]


def price_call(
    call: ModelCall, table: Mapping[str, ModelPrice] | None = None, *, priced_as: str | None = None
) -> CallCost:
    """What ``call`` cost.

    With the provider's usage: uncached input (``input_tokens - cache_read - cache_creation``) at
    the input price, ``cache_read`` at the cache-read price, ``cache_creation`` at the
    cache-write price, output at the output price. Without (offline models): the counted prompt,
    its cached part as the provider's cache rule bills the counted shared prefix
    (:meth:`nodes.pricing.PricingRule.cached`), the rest written to the cache where the rule
    charges writes (Anthropic's) and the counted reply as output; labelled estimated.

    Args:
        call: A recorded model call.
        table: The price table (default :data:`LIST_PRICES`).
        priced_as: Price the call as this model (e.g. an offline model's calls as the model it
            stands for); default the call's own model.

    Returns:
        The cost: ``usd`` None when the table has no price for the model.
    """
    table = LIST_PRICES if table is None else table
    found = price_for(priced_as or call.model, table)
    provider = found[1].provider if found is not None and found[1].provider else (call.provider or "")
    rule = rule_for_provider(provider)
    u = call.usage
    if u is not None:
        read, write = u.cache_read, u.cache_creation
        uncached, output = max(0, u.input_tokens - read - write), u.output_tokens
        units = uncached + rule.read * read + rule.write * write
    else:
        read = rule.cached(min(call.cached_prefix_tokens, call.prompt_tokens))
        rest = call.prompt_tokens - read
        write, uncached = (rest, 0) if rule.write != 1.0 else (0, rest)
        output = call.reply_tokens or 0
        units = rule.cost(call.prompt_tokens, call.cached_prefix_tokens)
    usd: dict[str, float | None] = {"usd": None, "usd_uncached": None, "usd_cached": None, "usd_output": None}
    if found is not None:
        p = found[1]
        parts = ((uncached * p.input + write * p.cache_write) / 1e6, read * p.cache_read / 1e6, output * p.output / 1e6)
        usd.update(usd=round(sum(parts), 12), usd_uncached=round(parts[0], 12), usd_cached=round(parts[1], 12))
        usd["usd_output"] = round(parts[2], 12)
    return CallCost(
        **usd,
        units=units,
        units_cached=rule.read * read,
        estimated=u is None,
        rule=rule.name,
        price=found[0] if found is not None else None,
        uncached_tokens=uncached,
        cache_read=read,
        cache_write=write,
        output_tokens=output,
    )
