"""One typed record per model call, folded from a task's ``context.built`` events, and their totals.

:func:`model_calls` reads the calls of an event log (any store, a running task's included);
:func:`call_totals` sums them per role and for the task. A call's :class:`CallCost` is priced
outside this pure layer (``nodes.prices``) and set with ``model_copy``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict, Field

from .blocks import ManifestEntry
from .events import Event
from .usage import USAGE_FIELDS, ProviderUsage

__all__ = ["CallCost", "CallTotals", "CallUsage", "ModelCall", "RoleTotals", "call_totals", "model_call", "model_calls"]


class _Record(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class CallUsage(_Record):
    """What the provider reported for one call, in tokens as it counted them.

    ``input_tokens`` includes the cached ones (``cache_read``) and those written to the cache
    (``cache_creation``), as LangChain's ``usage_metadata`` reports both OpenAI and Anthropic.
    """

    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_creation: int = 0


class CallCost(_Record):
    """What one model call cost, and the token split it was priced on.

    Attributes:
        usd: US dollars, or None when the price table has no price for the model.
        units: The prompt's cost in units of one uncached input token under ``rule`` (the
            bench's measure; output not included).
        estimated: Priced from taskctx's own counts and ``rule`` (the provider reported no usage:
            offline models), not from the provider's usage.
        rule: The cache pricing rule (``nodes.pricing``) the split or ``units`` follow.
        price: The price table's entry used (a model name), or None.
        uncached_tokens: Input tokens priced at the input price.
        cache_read: Input tokens priced at the cache-read price.
        cache_write: Input tokens priced at the cache-write price.
        output_tokens: Output tokens priced at the output price.
        usd_uncached: Of ``usd``: the uncached input and the cache writes.
        usd_cached: Of ``usd``: the cache reads.
        usd_output: Of ``usd``: the output.
        units_cached: Of ``units``: the cached input's.
    """

    usd: float | None
    units: float
    estimated: bool
    rule: str
    price: str | None = None
    uncached_tokens: int = 0
    cache_read: int = 0
    cache_write: int = 0
    output_tokens: int = 0
    usd_uncached: float | None = None
    usd_cached: float | None = None
    usd_output: float | None = None
    units_cached: float = 0.0


class ModelCall(_Record):
    """One model call of a task, as its ``context.built`` event records it.

    Tokens are counted by the graph's counter (``prompt_tokens``, ``cached_prefix_tokens``,
    ``reply_tokens``) unless in ``usage`` (the provider's). Fields a log written before they
    were recorded lacks are None (``model``, ``provider``, ``latency_ms``, ``reply_tokens``).
    """

    call: int
    role: str
    node: str
    role_call: int
    step_id: str | None = None
    seq: int
    timestamp: str
    model: str | None = None
    provider: str | None = None
    budget: int
    prompt_tokens: int
    cached_prefix_tokens: int = 0
    reply_tokens: int | None = None
    usage: CallUsage | None = None
    latency_ms: int | None = None
    blocks_in: int = 0
    blocks_out: int = 0
    #: The manifest: every candidate block, in or out, with why and its tokens.
    blocks: list[ManifestEntry] = Field(default_factory=list)
    #: ``artifact://`` ref of the prompt as sent (rendered as text).
    prompt_ref: str | None = None
    #: The prompt as sent, when it was read from the artifact store (else None).
    prompt: str | None = None
    transcript_reset: bool = False
    rebuilt: str | None = None
    cost: CallCost | None = None

    @property
    def dropped(self) -> list[str]:
        """The ids of the blocks the manifest left out."""
        return [b.id for b in self.blocks if not b.included]


class RoleTotals(_Record):
    """Sums over some model calls (one role's, or the task's).

    Attributes:
        calls: Model calls.
        prompt_tokens: Counted prompt tokens.
        cached_prefix_tokens: Counted tokens shared with the previous call's prompt.
        reply_tokens: Counted reply tokens (calls that recorded them).
        usage_calls: Calls the provider reported usage for.
        input_tokens: The provider's input tokens (cached ones included).
        output_tokens: The provider's output tokens.
        cache_read: The provider's cache-read tokens.
        cache_creation: The provider's cache-write tokens.
        latency_ms: Milliseconds of the calls that recorded it.
        usd: US dollars of the priced calls (None: none was priced).
        unpriced: Calls without a price in US dollars.
        estimated: Calls priced from taskctx's counts (no provider usage).
        units: The prompts' cost in uncached-input-token units (:attr:`CallCost.units`).
    """

    calls: int = 0
    prompt_tokens: int = 0
    cached_prefix_tokens: int = 0
    reply_tokens: int = 0
    usage_calls: int = 0
    input_tokens: int = 0
    output_tokens: int = 0
    cache_read: int = 0
    cache_creation: int = 0
    latency_ms: int = 0
    usd: float | None = None
    unpriced: int = 0
    estimated: int = 0
    units: float = 0.0


class CallTotals(_Record):
    """A task's model-call totals: for the task and per role (in order of each role's first call)."""

    task: RoleTotals
    roles: dict[str, RoleTotals] = Field(default_factory=dict)


def model_calls(events: Iterable[Event]) -> list[ModelCall]:
    """The model calls of a task's events, in call order (``cost`` unset).

    Args:
        events: The task's events (any kinds; only ``context.built`` ones are read).

    Returns:
        One :class:`ModelCall` per ``context.built`` event.
    """
    out: list[ModelCall] = []
    per_role: dict[str, int] = {}
    for e in events:
        if e.kind == "context.built":
            role = e.payload["role"]
            per_role[role] = per_role.get(role, 0) + 1
            out.append(model_call(e, per_role[role]))
    return out


def model_call(e: Event, role_call: int) -> ModelCall:
    """The record of one ``context.built`` event (``cost`` unset).

    Args:
        e: A ``context.built`` event.
        role_call: Its role's call number (1: the role's first call).

    Returns:
        The record.
    """
    p = e.payload
    role = p["role"]
    usage = p.get("usage")
    return ModelCall(
        call=p["call"],
        role=role,
        node=(e.causation_id or "").rpartition(":")[2] or role,
        role_call=role_call,
        step_id=p.get("step_id"),
        seq=e.seq,
        timestamp=e.timestamp,
        model=p.get("model"),
        provider=p.get("provider"),
        budget=p["budget"],
        prompt_tokens=p["prompt_tokens"],
        cached_prefix_tokens=p.get("cached_prefix_tokens", 0),
        reply_tokens=p.get("reply_tokens"),
        usage=CallUsage(**usage) if usage else None,
        latency_ms=p.get("latency_ms"),
        blocks_in=p.get("blocks_in", 0),
        blocks_out=p.get("blocks_out", 0),
        blocks=[ManifestEntry.model_validate(b) for b in p.get("blocks", [])],
        prompt_ref=p.get("prompt_ref"),
        transcript_reset=bool(p.get("transcript_reset")),
        rebuilt=p.get("rebuilt"),
    )


def _sum(calls: Sequence[ModelCall]) -> RoleTotals:
    priced = [c.cost.usd for c in calls if c.cost is not None and c.cost.usd is not None]
    used = ProviderUsage.total(c.usage for c in calls if c.usage is not None)
    return RoleTotals(
        calls=len(calls),
        prompt_tokens=sum(c.prompt_tokens for c in calls),
        cached_prefix_tokens=sum(c.cached_prefix_tokens for c in calls),
        reply_tokens=sum(c.reply_tokens or 0 for c in calls),
        usage_calls=used.calls,
        **{f: getattr(used, f) for f in USAGE_FIELDS},
        latency_ms=sum(c.latency_ms or 0 for c in calls),
        usd=round(sum(priced), 12) if priced else None,
        unpriced=len(calls) - len(priced),
        estimated=sum(1 for c in calls if c.cost is not None and c.cost.estimated),
        units=round(sum(c.cost.units for c in calls if c.cost is not None), 6),
    )


def call_totals(calls: Sequence[ModelCall]) -> CallTotals:
    """Sum ``calls`` for the task and per role.

    Args:
        calls: A task's model calls (:func:`model_calls`, priced or not).

    Returns:
        The totals (:class:`CallTotals`).
    """
    by_role: dict[str, list[ModelCall]] = {}
    for c in calls:
        by_role.setdefault(c.role, []).append(c)
    return CallTotals(task=_sum(calls), roles={r: _sum(cs) for r, cs in by_role.items()})
