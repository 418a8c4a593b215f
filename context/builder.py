"""Context blocks, the token budget, the builder and its manifest.

A :class:`ContextBlock` is one candidate piece of a prompt with ``id, kind, layer, source,
observed_at, priority, trust, token_estimate`` (docs/design.md "Context blocks, trust and budget").
:func:`build_context` loads every ``required`` block, ranks the others, fits them into
``budget - reserve_for_output - overhead_tokens`` and returns the chosen blocks (in their input
order, so a renderer's layout is kept) and a :class:`Manifest` that says, for every block, whether
it went in, why, its tokens and whether it was compressed. A block a context policy added
(``added_by="policy:<name>"``) has a reason that starts with ``policy:<name>; ``.

Ranking, highest first: priority (high > normal > low), then trust (trusted_app > user_claim >
agent_claim > external_content), then relevance (0..1, given by the renderer), then recency (``observed_at``).
Dropping follows the same order reversed, strictly: once a block does not fit, every block ranked
below it is dropped too (no smaller, lower-ranked block slips in after it), so when the budget is
tight raw history (``low``) goes first, then older evidence (``normal``, oldest first), and a
transcript never has a gap. Required blocks (the core layer, pending
approvals, unconsumed tool results) are never dropped; if they alone do not fit,
``BudgetError`` is raised, naming the budget and the tokens they need.

Conflicts: a block may name, in ``supersedes``, blocks it overrides (a newer fact replacing an
older summary, or a trusted block that governs what a user claim says). When the overriding
block is at least as trusted, the manifest entry of each overridden block records
``superseded_by`` and the reason; an overridden block that is not ``required`` leaves the
prompt (unless its overrider is itself dropped), a ``required`` one stays, marked. A less trusted
block cannot override a more trusted one (its reason says so).

Token counts are whatever ``count_tokens`` returns (default :func:`approx_tokens`, 4 chars a
token, rounded up: the same rule as langchain-core's ``count_tokens_approximately``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Literal, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, Field

from .errors import BudgetError

__all__ = [
    "BlockKind",
    "BlockOptions",
    "BuildResult",
    "ContextBlock",
    "Layer",
    "Manifest",
    "ManifestEntry",
    "Priority",
    "Trust",
    "TokenCounter",
    "approx_tokens",
    "build_context",
    "make_block",
]

BlockKind = Literal["instruction", "user", "state", "tool_result", "memory", "knowledge"]
Layer = Literal["core", "step", "recent", "referenced", "audit", "recovery"]
Priority = Literal["required", "high", "normal", "low"]
#: Who a block's text comes from (the least trusted part of it): the app's own word
#: (``trusted_app``: the app's text, the caller's permissions, confirmed memory), the caller's
#: request and constraints (``user_claim``), text a model wrote after reading tool output
#: (``agent_claim``: findings, step summaries, reviews, recovery diagnoses; quoted like tool
#: output), tool output (``external_content``).
Trust = Literal["trusted_app", "user_claim", "agent_claim", "external_content"]
TokenCounter = Callable[[str], int]

_PRIORITY_RANK = {"required": 3, "high": 2, "normal": 1, "low": 0}
_TRUST_RANK = {"trusted_app": 3, "user_claim": 2, "agent_claim": 1, "external_content": 0}


def approx_tokens(text: str) -> int:
    """``ceil(len(text) / 4)``: langchain-core's approximate rule, without its message overhead."""
    return math.ceil(len(text) / 4)


class ContextBlock(BaseModel):
    """One candidate block of a prompt. ``token_estimate`` is in tokens; ``text`` is what renders."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    id: str
    kind: BlockKind
    layer: Layer
    source: str
    observed_at: str = ""
    priority: Priority = "normal"
    trust: Trust = "trusted_app"
    token_estimate: int
    text: str
    relevance: float = 0.5
    compressed: bool = False
    #: Free-form role hint for the renderer (e.g. which message the block goes into).
    slot: str = ""
    #: Ids of candidate blocks this block overrides (see module doc).
    supersedes: list[str] = Field(default_factory=list)
    #: Who added the block when not the role's renderer, e.g. ``policy:<name>`` (a context
    #: policy, :mod:`context.policy`): the manifest reason starts with it.
    added_by: str = ""


class BlockOptions(TypedDict, total=False):
    """The optional fields of a :class:`ContextBlock` that :func:`make_block` passes through."""

    observed_at: str
    priority: Priority
    trust: Trust
    relevance: float
    compressed: bool
    slot: str
    supersedes: list[str]


def make_block(
    id: str,
    text: str,
    *,
    kind: BlockKind,
    layer: Layer,
    source: str,
    count_tokens: TokenCounter = approx_tokens,
    **kw: Unpack[BlockOptions],
) -> ContextBlock:
    """A block whose ``token_estimate`` is ``count_tokens(text)`` (tokens); ``kw`` are the other
    :class:`ContextBlock` fields (:class:`BlockOptions`). A wrong field raises
    ``pydantic.ValidationError`` naming it."""
    return ContextBlock(
        id=id, text=text, kind=kind, layer=layer, source=source, token_estimate=count_tokens(text), **kw
    )


class ManifestEntry(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str
    layer: Layer
    kind: BlockKind
    trust: Trust
    priority: Priority
    tokens: int
    included: bool
    reason: str
    compressed: bool = False
    #: The id of the block that overrides this one (see the module doc), if any.
    superseded_by: str | None = None


class Manifest(BaseModel):
    """What one model call's prompt holds: every block in or out, why, and the totals (tokens)."""

    model_config = ConfigDict(extra="forbid")

    role: str = ""
    budget: int
    reserve_for_output: int
    overhead_tokens: int = 0
    available: int
    used: int
    entries: list[ManifestEntry] = Field(default_factory=list)

    @property
    def included(self) -> list[str]:
        return [e.id for e in self.entries if e.included]

    @property
    def dropped(self) -> list[str]:
        return [e.id for e in self.entries if not e.included]


class BuildResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    blocks: list[ContextBlock]
    manifest: Manifest


def _rank_key(b: ContextBlock) -> tuple[int, int, float, str]:
    return (_PRIORITY_RANK[b.priority], _TRUST_RANK[b.trust], b.relevance, b.observed_at)


def build_context(
    candidates: Sequence[ContextBlock],
    *,
    budget: int,
    reserve_for_output: int,
    overhead_tokens: int = 0,
    role: str = "",
) -> BuildResult:
    """Choose blocks for one call (see module doc). Raises ``BudgetError`` when the required
    blocks alone need more than ``budget - reserve_for_output - overhead_tokens`` tokens; its
    ``minimum`` (required blocks + overhead + reserve) is the smallest budget that fits them."""
    available = budget - reserve_for_output - overhead_tokens
    seen: set[str] = set()
    for b in candidates:
        if b.id in seen:
            raise ValueError(f"duplicate context block id {b.id!r}; block ids must be unique per call")
        seen.add(b.id)
    required = [b for b in candidates if b.priority == "required"]
    need = sum(b.token_estimate for b in required)
    if need > available:
        raise BudgetError(role=role, required=need + overhead_tokens, reserve=reserve_for_output, budget=budget)
    chosen: set[str] = {b.id for b in required}
    reasons: dict[str, str] = {b.id: "required" for b in required}
    used = need
    by_id = {b.id: b for b in candidates}
    superseded: dict[str, str] = {}
    refused: dict[str, list[str]] = {}
    for w in candidates:
        for x_id in w.supersedes:
            x = by_id.get(x_id)
            if x is None or x_id == w.id or x_id in superseded:
                continue
            if _TRUST_RANK[w.trust] < _TRUST_RANK[x.trust]:
                refused.setdefault(w.id, []).append(x_id)
            else:
                superseded[x_id] = w.id
    for x_id, w_id in superseded.items():
        if x_id in chosen:
            w = by_id[w_id]
            reasons[x_id] = f"required; superseded in part by {w_id} ({w.trust})"
    rest = [b for b in candidates if b.priority != "required" and b.id not in superseded]
    stopped_at: ContextBlock | None = None
    for b in sorted(rest, key=_rank_key, reverse=True):
        if stopped_at is None and used + b.token_estimate <= available:
            chosen.add(b.id)
            used += b.token_estimate
            reasons[b.id] = f"fits ({b.priority}, {b.trust})"
        elif stopped_at is None:
            stopped_at = b
            reasons[b.id] = (
                f"dropped: over budget ({b.priority}, {b.trust}; needs {b.token_estimate}, {available - used} left)"
            )
        else:  # strict drop order: nothing ranked below a dropped block goes in
            reasons[b.id] = f"dropped: ranked below {stopped_at.id}, which did not fit ({b.priority}, {b.trust})"
    for b in candidates:
        if b.id not in superseded or b.id in chosen:
            continue
        w = by_id[superseded[b.id]]
        newer = ", newer" if w.observed_at and w.observed_at > b.observed_at else ""
        if w.id in chosen:
            reasons[b.id] = f"superseded by {w.id} ({w.trust}{newer})"
        elif used + b.token_estimate <= available:  # its overrider was dropped: keep the older block
            chosen.add(b.id)
            used += b.token_estimate
            reasons[b.id] = f"fits ({b.priority}, {b.trust}); its overrider {w.id} was dropped"
        else:
            reasons[b.id] = f"superseded by {w.id} ({w.trust}{newer}); both over budget"
    for w_id, xs in refused.items():
        reasons[w_id] += f"; cannot supersede {', '.join(xs)} (more trusted)"
    for b in candidates:
        if b.added_by:
            reasons[b.id] = f"{b.added_by}; {reasons[b.id]}"
    entries = [
        ManifestEntry(
            id=b.id,
            layer=b.layer,
            kind=b.kind,
            trust=b.trust,
            priority=b.priority,
            tokens=b.token_estimate,
            included=b.id in chosen,
            reason=reasons[b.id],
            compressed=b.compressed,
            superseded_by=superseded.get(b.id),
        )
        for b in candidates
    ]
    manifest = Manifest(
        role=role,
        budget=budget,
        reserve_for_output=reserve_for_output,
        overhead_tokens=overhead_tokens,
        available=available,
        used=used,
        entries=entries,
    )
    return BuildResult(blocks=[b for b in candidates if b.id in chosen], manifest=manifest)
