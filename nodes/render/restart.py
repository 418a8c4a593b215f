"""When the executor's transcript restarts: the cost model priced with the provider's cache rule."""

from __future__ import annotations

from context.events import TranscriptReset

from ..pricing import PricingRule
from ..runtime import Rendered

__all__ = ["KEEP_LAST", "cycle_cost", "restart_decision"]

KEEP_LAST = 3


def cycle_cost(rule: PricingRule, *, start: int, shared: int, growth: int, limit: int) -> tuple[float, int]:
    """The mean cost per call of the cheapest transcript cycle, and its length in calls.

    A cycle: a first call of ``start`` prompt tokens of which ``shared`` are a cached prefix, then
    calls that each append ``growth`` tokens and read the previous prompt from the cache, while the
    prompt stays within ``limit``. Calls get dearer as the prompt grows, so the mean falls until a
    call costs more than it: the cycle ends there.

    Args:
        rule: The provider's pricing rule (costs in uncached-input-token units).
        start: The first call's prompt tokens.
        shared: Its cached prefix, in tokens.
        growth: Tokens each later call appends.
        limit: The prompt's budget, in tokens.

    Returns:
        ``(mean cost per call, calls)``.
    """
    total = rule.cost(start, shared)
    best = (total, 1)
    p, n, g = start, 1, max(growth, 1)
    while p + g <= limit:
        c = rule.cost(p + g, p)
        if c > total / n:  # from here on every call raises the mean
            break
        total += c
        p, n = p + g, n + 1
        best = (total / n, n)
    return best


def restart_decision(
    r: Rendered, restarted: Rendered | None, rule: PricingRule, limit: int, keep_last: int = KEEP_LAST
) -> TranscriptReset:
    """The numbers of restarting the transcript now (:class:`~context.events.TranscriptReset`).

    A transcript costs, per call, a read of the prompt so far plus the tokens the call appends (the
    mean entry of ``r``'s transcript); a restart costs one call that sends the new checkpoint and
    the kept calls again uncached. The saving is this call's cost without the restart less the
    least mean cost per call of the cycle the restart starts (:func:`cycle_cost`).

    Args:
        r: The prompt without the restart.
        restarted: The prompt with it; None: estimated from ``r``, the old checkpoint block standing
            for the new one.
        rule: The provider's pricing rule.
        limit: The prompt's budget, ``budget - reserve_for_output`` tokens.
        keep_last: Calls the restart keeps.

    Returns:
        ``reason="cost"`` with the tokens removed and resent, the expected saving and the horizon.
    """
    # every candidate block, also those the builder dropped (a prompt over the budget)
    tok = {e.id: e.tokens for e in r.manifest.entries}
    full = r.prompt_tokens + sum(e.tokens for e in r.manifest.entries if not e.included)
    calls = [e.id for e in r.manifest.entries if e.id.startswith("tool.")]
    notes = [e.id for e in r.manifest.entries if e.id.startswith("note.")]
    cp = tok.get("state.checkpoint", 0)
    removed = cp + sum(tok[c] for c in calls[:-keep_last]) + sum(tok[n] for n in notes)
    latest = tok[calls[-1]] if calls else 0
    appended = latest + (tok.get("step.delta", 0) if r.delta_note is not None else 0)
    growth = round((sum(tok[c] for c in calls) + sum(tok[n] for n in notes)) / max(len(calls), 1))
    # both sides priced with the same call: one that appends the mean entry
    before = full - appended
    now = rule.cost(before + growth, before)
    if restarted is None:
        resent = cp + sum(tok[c] for c in calls[-keep_last:-1])
        start = full - removed + cp
        stable = sum(b.token_estimate for b in r.blocks if b.slot == "msg:core")
        stable += full - sum(tok.values())  # system, tool schemas, framing
    else:
        t2 = {b.id: b.token_estimate for b in restarted.blocks}
        kept = [b.id for b in restarted.blocks if b.id.startswith("tool.")]
        resent = t2.get("state.checkpoint", 0) + sum(t2[c] for c in kept[:-1])
        start = restarted.prompt_tokens
        stable = sum(b.token_estimate for b in restarted.blocks if b.slot == "msg:core")
        stable += restarted.prompt_tokens - sum(t2.values())
    start += growth - latest
    mean, horizon = cycle_cost(rule, start=start, shared=stable, growth=growth, limit=limit)
    return TranscriptReset(
        reason="cost",
        removed=removed,
        resent=resent,
        expected_saving=round(now - mean, 1),
        horizon=horizon,
        rule=rule.name,
    )
