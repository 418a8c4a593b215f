"""A task's model calls with their cost: the event log's records priced by a price table.

:func:`priced_calls` backs :meth:`graphs.Project.model_calls` and the commands that show or
export the calls (``taskctx inspect --calls``, ``list --json``, the export, the report).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from context import InvalidInputError, UnknownTaskError
from context.calls import ModelCall, model_calls
from context.store import ArtifactStoreProtocol, EventLogProtocol
from context.text import shown
from nodes.prices import ModelPrice, load_prices, price_call, price_for, price_table

__all__ = [
    "CALL_FIELDS",
    "Prices",
    "call_row",
    "check_priced_as",
    "from_row",
    "price_calls",
    "priced_calls",
    "resolve_prices",
    "totals_line",
]

#: What a call's totals read of a ``context.built`` payload (not the manifest's blocks, most of it).
CALL_FIELDS = [
    *("call", "role", "step_id", "budget", "prompt_tokens", "cached_prefix_tokens", "blocks_in", "blocks_out"),
    *("usage", "model", "provider", "latency_ms", "reply_tokens", "prompt_ref", "transcript_reset", "rebuilt"),
]

#: A price table as the API takes it: None (the list prices), a file (TOML or JSON), or model
#: name -> :class:`nodes.prices.ModelPrice` or a mapping of its fields (over the list prices).
Prices = str | Path | Mapping[str, Any] | None


def resolve_prices(prices: Prices) -> dict[str, ModelPrice]:
    """The price table ``prices`` names (:data:`Prices`).

    Args:
        prices: None, a file's path, overrides over the list prices, or a whole table (every value
            a :class:`nodes.prices.ModelPrice`, as this returns it: taken as it is).

    Returns:
        The table.

    Raises:
        InvalidInputError: The file or an entry is not a price table.
    """
    if isinstance(prices, str | Path):
        return load_prices(prices)
    if prices and all(isinstance(v, ModelPrice) for v in prices.values()):
        return dict(prices)
    return price_table(prices)


def check_priced_as(priced_as: str | None, table: Mapping[str, ModelPrice]) -> None:
    """Check that ``priced_as`` (``--priced-as``) has a price in ``table`` (:func:`nodes.prices.price_for`).

    Args:
        priced_as: The model every call is to be priced as, or None (nothing to check).
        table: The price table.

    Raises:
        InvalidInputError: No entry fits the model; the message names it, the known models and
            how to give its price.
    """
    if priced_as is None or price_for(priced_as, table) is not None:
        return
    raise InvalidInputError(
        f"--priced-as {priced_as!r}: no price for this model; the known models are {', '.join(sorted(table))} "
        f"(a dated name such as gpt-4o-2024-08-06 takes its base model's price); pick one, or give its price in "
        f'a price file: --prices FILE with [models."{priced_as}"] input = ..., output = ... (USD per 1M tokens)'
    )


def priced_calls(
    events: EventLogProtocol,
    task_id: str,
    *,
    prices: Prices = None,
    priced_as: str | None = None,
    artifacts: ArtifactStoreProtocol | None = None,
    manifests: bool = True,
) -> list[ModelCall]:
    """The model calls of ``task_id``'s event log, each with its cost.

    Args:
        events: The event log (SQLite or Postgres; a running task's calls so far).
        task_id: The task.
        prices: The price table (:data:`Prices`).
        priced_as: Price every call as this model (:func:`nodes.prices.price_call`).
        artifacts: Given: each call's ``prompt`` is the prompt as sent, read back from this store.
        manifests: Read each call's manifest (``blocks``); off, only :data:`CALL_FIELDS` are
            read (totals of a long log).

    Returns:
        The calls in call order.

    Raises:
        UnknownTaskError: The log has no events of the task.
    """
    if not events.last_seq(task_id):
        raise UnknownTaskError(f"no events for task {task_id!r} in this database; check the task id and --db")
    fields = None if manifests else CALL_FIELDS
    calls = price_calls(model_calls(events.iter(task_id, kinds=["context.built"], fields=fields)), prices, priced_as)
    if artifacts is None:
        return calls
    return [c.model_copy(update={"prompt": shown(artifacts.get(c.prompt_ref))}) if c.prompt_ref else c for c in calls]


def price_calls(calls: list[ModelCall], prices: Prices = None, priced_as: str | None = None) -> list[ModelCall]:
    """``calls``, each with its cost (:func:`nodes.prices.price_call`).

    Args:
        calls: Model calls (:func:`context.calls.model_calls`).
        prices: The price table (:data:`Prices`).
        priced_as: Price every call as this model.

    Returns:
        The calls, ``cost`` set.

    Raises:
        InvalidInputError: ``prices`` is not a price table, or ``priced_as`` has no price in it
            (:func:`check_priced_as`).
    """
    table = resolve_prices(prices)
    check_priced_as(priced_as, table)
    return [c.model_copy(update={"cost": price_call(c, table, priced_as=priced_as)}) for c in calls]


def _usd(usd: float | None) -> str:
    return "n/a" if usd is None else f"${usd:,.6f}"


def totals_line(name: str, t: Any) -> str:
    """One line of totals, as ``taskctx inspect`` prints it.

    Args:
        name: What the totals are of (``task``, a role).
        t: A :class:`context.calls.RoleTotals`.

    Returns:
        ``<name>: N calls, P prompt tokens (C cached), provider in/out/cache read/write, cost``
        (US dollars, ``n/a`` without a price), and the input-token units.
    """
    line = f"{name}: {t.calls} call{'s' if t.calls != 1 else ''}, {t.prompt_tokens:,} prompt tokens counted ({t.cached_prefix_tokens:,} cached prefix)"
    if t.usage_calls:
        line += (
            f"; provider: {t.input_tokens:,} in, {t.output_tokens:,} out, {t.cache_read:,} cache read, "
            f"{t.cache_creation:,} cache write"
        )
    cost = _usd(t.usd)
    if t.usd is not None and t.unpriced:
        cost += f" ({t.unpriced} calls unpriced)"
    if t.estimated:
        cost += f", {t.estimated} estimated"
    return f"{line}; cost {cost}; {t.units:,.1f} input-token units"


def call_row(c: ModelCall) -> dict[str, Any]:
    """One call as a JSON object, as ``calls.jsonl`` of an export and ``inspect --calls --json`` hold it.

    Args:
        c: A priced call (:func:`priced_calls`).

    Returns:
        The call's fields without the manifest's blocks and the prompt (``manifests.jsonl``
        and the ``prompt_ref`` artifact hold them), with ``dropped``: the ids of the blocks
        left out.
    """
    return {**c.model_dump(mode="json", exclude={"blocks", "prompt"}), "dropped": c.dropped}


def from_row(row: dict[str, Any]) -> ModelCall:
    """The call a :func:`call_row` object holds (its ``blocks`` empty).

    Args:
        row: A ``calls.jsonl`` line, parsed.

    Returns:
        The call.
    """
    return ModelCall.model_validate({k: v for k, v in row.items() if k != "dropped"})
