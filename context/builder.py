"""The builder: fit candidate context blocks into a model call's token budget.

:func:`build_context` loads every ``required`` block, ranks the others and fits them into
``budget - reserve_for_output - overhead_tokens`` tokens; its :class:`~context.blocks.Manifest`
says, for every block, whether it went in, why, and its tokens (docs/design.md "Context blocks,
trust and budget").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel, ConfigDict

from .blocks import ContextBlock, Manifest, ManifestEntry
from .errors import BudgetError

__all__ = ["BuildResult", "build_context"]

_PRIORITY_RANK = {"required": 3, "high": 2, "normal": 1, "low": 0}
_TRUST_RANK = {"trusted_app": 3, "user_claim": 2, "agent_claim": 1, "external_content": 0}


class BuildResult(BaseModel):
    """The blocks chosen for one call (in input order) and the manifest of every candidate."""

    model_config = ConfigDict(extra="forbid")

    blocks: list[ContextBlock]
    manifest: Manifest


def _rank_key(b: ContextBlock) -> tuple[int, int, float, str]:
    return (_PRIORITY_RANK[b.priority], _TRUST_RANK[b.trust], b.relevance, b.observed_at)


@dataclass
class _Selection:
    """The blocks chosen so far, why each candidate is in or out, and the tokens used."""

    available: int
    used: int
    chosen: set[str] = field(default_factory=set)
    reasons: dict[str, str] = field(default_factory=dict)

    def fits(self, b: ContextBlock) -> bool:
        return self.used + b.token_estimate <= self.available

    def take(self, b: ContextBlock, reason: str) -> None:
        self.chosen.add(b.id)
        self.used += b.token_estimate
        self.reasons[b.id] = reason


def _overrides(candidates: Sequence[ContextBlock]) -> tuple[dict[str, str], dict[str, list[str]]]:
    """Which blocks the candidates override: ``(superseded, refused)``.

    ``superseded``: overridden id -> its overrider's id (at least as trusted); ``refused``:
    overrider id -> the ids it names but may not override (more trusted than it).
    """
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
    return superseded, refused


def _fill(sel: _Selection, rest: Sequence[ContextBlock]) -> None:
    """Add ``rest`` in rank order while they fit; once one does not, drop every block below it.

    No smaller, lower-ranked block slips in after a dropped one.
    """
    stopped_at: ContextBlock | None = None
    for b in sorted(rest, key=_rank_key, reverse=True):
        if stopped_at is None and sel.fits(b):
            sel.take(b, f"fits ({b.priority}, {b.trust})")
        elif stopped_at is None:
            stopped_at = b
            sel.reasons[b.id] = (
                f"dropped: over budget ({b.priority}, {b.trust}; needs {b.token_estimate}, "
                f"{sel.available - sel.used} left)"
            )
        else:  # strict drop order: nothing ranked below a dropped block goes in
            sel.reasons[b.id] = f"dropped: ranked below {stopped_at.id}, which did not fit ({b.priority}, {b.trust})"


def _place_superseded(sel: _Selection, candidates: Sequence[ContextBlock], superseded: dict[str, str]) -> None:
    """Leave out the overridden blocks, unless their overrider was dropped and they fit."""
    by_id = {b.id: b for b in candidates}
    for b in candidates:
        if b.id not in superseded or b.id in sel.chosen:
            continue
        w = by_id[superseded[b.id]]
        newer = ", newer" if w.observed_at and w.observed_at > b.observed_at else ""
        if w.id in sel.chosen:
            sel.reasons[b.id] = f"superseded by {w.id} ({w.trust}{newer})"
        elif sel.fits(b):  # its overrider was dropped: keep the older block
            sel.take(b, f"fits ({b.priority}, {b.trust}); its overrider {w.id} was dropped")
        else:
            sel.reasons[b.id] = f"superseded by {w.id} ({w.trust}{newer}); both over budget"


def _entry(b: ContextBlock, sel: _Selection, superseded: dict[str, str]) -> ManifestEntry:
    return ManifestEntry(
        id=b.id,
        layer=b.layer,
        kind=b.kind,
        trust=b.trust,
        priority=b.priority,
        tokens=b.token_estimate,
        included=b.id in sel.chosen,
        reason=sel.reasons[b.id],
        compressed=b.compressed,
        superseded_by=superseded.get(b.id),
    )


def build_context(
    candidates: Sequence[ContextBlock],
    *,
    budget: int,
    reserve_for_output: int,
    overhead_tokens: int = 0,
    role: str = "",
) -> BuildResult:
    """Choose the blocks of one model call.

    Ranking, highest first: priority (high > normal > low), then trust (trusted_app >
    user_claim > agent_claim > external_content), then relevance, then recency
    (``observed_at``). Required blocks are never dropped; a block named in another's
    ``supersedes`` leaves the prompt when its overrider is at least as trusted and goes in.

    Args:
        candidates: The candidate blocks, in the renderer's layout order (ids unique).
        budget: The model call's token budget (tokens).
        reserve_for_output: Tokens kept for the model's answer.
        overhead_tokens: Tokens of the call outside the blocks (system message, tool schemas,
            message framing).
        role: The role prompted (named in the manifest and in a ``BudgetError``).

    Returns:
        The chosen blocks, in input order, and the manifest of every candidate.

    Raises:
        ValueError: Two candidates share an id.
        BudgetError: The required blocks alone need more than ``budget - reserve_for_output -
            overhead_tokens`` tokens; its ``minimum`` (required blocks + overhead + reserve) is
            the smallest budget that fits them.
    """
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
    sel = _Selection(available, need, {b.id for b in required}, {b.id: "required" for b in required})
    superseded, refused = _overrides(candidates)
    by_id = {b.id: b for b in candidates}
    for x_id, w_id in superseded.items():
        if x_id in sel.chosen:
            sel.reasons[x_id] = f"required; superseded in part by {w_id} ({by_id[w_id].trust})"
    _fill(sel, [b for b in candidates if b.priority != "required" and b.id not in superseded])
    _place_superseded(sel, candidates, superseded)
    for w_id, xs in refused.items():
        sel.reasons[w_id] += f"; cannot supersede {', '.join(xs)} (more trusted)"
    for b in candidates:
        if b.added_by:
            sel.reasons[b.id] = f"{b.added_by}; {sel.reasons[b.id]}"
    manifest = Manifest(
        role=role,
        budget=budget,
        reserve_for_output=reserve_for_output,
        overhead_tokens=overhead_tokens,
        available=available,
        used=sel.used,
        entries=[_entry(b, sel, superseded) for b in candidates],
    )
    return BuildResult(blocks=[b for b in candidates if b.id in sel.chosen], manifest=manifest)
