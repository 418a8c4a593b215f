"""Context blocks: the candidate pieces of a prompt, and the manifest of what went in.

A :class:`ContextBlock` has ``id, kind, layer, source, observed_at, priority, trust,
token_estimate`` (docs/design.md "Context blocks, trust and budget"); ``context.builder`` fits
blocks into a token budget and records each in a :class:`ManifestEntry`.
"""

from __future__ import annotations

import math
from typing import Literal, TypedDict, Unpack

from pydantic import BaseModel, ConfigDict, Field

from .literals import Provenance
from .tokens import TokenCounter

__all__ = [
    "BlockKind",
    "BlockOptions",
    "ContextBlock",
    "Layer",
    "Manifest",
    "ManifestEntry",
    "Priority",
    "Trust",
    "approx_tokens",
    "make_block",
]

BlockKind = Literal["instruction", "user", "state", "tool_result", "memory", "knowledge"]
Layer = Literal["core", "step", "recent", "referenced", "audit", "recovery"]
Priority = Literal["required", "high", "normal", "low"]
#: Who a block's text comes from (the least trusted part of it): the app's own word
#: (``trusted_app``: the app's text, the caller's permissions, confirmed memory), the caller's
#: request and constraints (``user_claim``), text a model wrote after reading tool output
#: (``agent_claim``: findings, step summaries, reviews, recovery diagnoses; quoted like tool
#: output), tool output (``external_content``). The same words as a text's provenance.
Trust = Provenance


def approx_tokens(text: str) -> int:
    """Count tokens by langchain-core's approximate rule, without its message overhead.

    Args:
        text: The text.

    Returns:
        ``ceil(len(text) / 4)`` tokens (4 characters a token, rounded up).
    """
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
    #: Ids of candidate blocks this block overrides (see ``context.builder``).
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
    """Build a block whose ``token_estimate`` is counted from its text.

    Args:
        id: The block id (unique per model call).
        text: What the block renders.
        kind: What the block holds.
        layer: The prompt layer it belongs to.
        source: Where its text comes from (e.g. an event, a ref).
        count_tokens: The token counter (tokens of a text; default :func:`approx_tokens`).
        **kw: The other :class:`ContextBlock` fields (:class:`BlockOptions`).

    Returns:
        The block, with ``token_estimate = count_tokens(text)`` tokens.

    Raises:
        pydantic.ValidationError: A field has a wrong value (the error names it).
    """
    return ContextBlock(
        id=id, text=text, kind=kind, layer=layer, source=source, token_estimate=count_tokens(text), **kw
    )


class ManifestEntry(BaseModel):
    """One candidate block as the manifest records it: in or out, why, and its tokens."""

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
    #: The id of the block that overrides this one (see ``context.builder``), if any.
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
        """The ids of the blocks that went in, in input order."""
        return [e.id for e in self.entries if e.included]

    @property
    def dropped(self) -> list[str]:
        """The ids of the blocks left out, in input order."""
        return [e.id for e in self.entries if not e.included]
