"""``context.build_context``: required blocks, drop order, manifest, budget errors."""

from __future__ import annotations

import pickle

import pytest

from context import BudgetError, ContextBlock, ManifestEntry, approx_tokens, build_context, make_block


def blk(
    id,
    tokens,
    priority="normal",
    trust="trusted_app",
    observed_at="",
    relevance=0.5,
    layer="recent",
    kind="state",
    compressed=False,
):
    return ContextBlock(
        id=id,
        kind=kind,
        layer=layer,
        source="test",
        observed_at=observed_at,
        priority=priority,
        trust=trust,
        token_estimate=tokens,
        text=f"text of {id}",
        relevance=relevance,
        compressed=compressed,
    )


def entry(b: ContextBlock, included: bool, reason: str) -> ManifestEntry:
    return ManifestEntry(
        id=b.id,
        layer=b.layer,
        kind=b.kind,
        trust=b.trust,
        priority=b.priority,
        tokens=b.token_estimate,
        included=included,
        reason=reason,
        compressed=b.compressed,
    )


def test_approx_tokens_and_make_block():
    assert [approx_tokens(s) for s in ("", "a", "abcd", "abcde", "x" * 40)] == [0, 1, 1, 2, 10]
    b = make_block("core.request", "x" * 41, kind="user", layer="core", source="task.created", priority="required")
    assert (b.token_estimate, b.priority, b.trust, b.text) == (11, "required", "trusted_app", "x" * 41)
    c = make_block(
        "k", "one two three", kind="knowledge", layer="referenced", source="s", count_tokens=lambda t: len(t.split())
    )
    assert c.token_estimate == 3


def test_everything_fits_manifest_in_input_order():
    blocks = [
        blk("low", 5, priority="low", trust="external_content", kind="tool_result", compressed=True),
        blk("req", 10, priority="required", layer="core", kind="instruction"),
        blk("high", 7, priority="high", trust="user_claim", layer="step"),
    ]
    r = build_context(blocks, budget=100, reserve_for_output=20, overhead_tokens=5, role="executor")
    assert [b.id for b in r.blocks] == ["low", "req", "high"]
    m = r.manifest
    assert (m.role, m.budget, m.reserve_for_output, m.overhead_tokens, m.available, m.used) == (
        "executor",
        100,
        20,
        5,
        75,
        22,
    )
    assert m.entries == [
        entry(blocks[0], True, "fits (low, external_content)"),
        entry(blocks[1], True, "required"),
        entry(blocks[2], True, "fits (high, user_claim)"),
    ]
    assert m.entries[0].compressed is True
    assert m.included == ["low", "req", "high"]
    assert m.dropped == []


def test_required_blocks_always_in_even_when_they_fill_the_budget():
    blocks = [blk("r1", 30, priority="required"), blk("h", 1, priority="high"), blk("r2", 20, priority="required")]
    r = build_context(blocks, budget=60, reserve_for_output=10, overhead_tokens=0)
    assert r.manifest.available == 50
    assert r.manifest.used == 50
    assert r.manifest.included == ["r1", "r2"]
    assert r.manifest.entries[1] == entry(blocks[1], False, "dropped: over budget (high, trusted_app; needs 1, 0 left)")


def test_drop_order_low_before_normal_before_high():
    blocks = [
        blk("low", 20, priority="low"),
        blk("normal", 20, priority="normal"),
        blk("req", 20, priority="required"),
        blk("high", 20, priority="high"),
    ]
    # available 70: required 20 + high 20 + normal 20 = 60, low does not fit
    r = build_context(blocks, budget=100, reserve_for_output=20, overhead_tokens=10)
    assert r.manifest.available == 70
    assert r.manifest.used == 60
    assert [b.id for b in r.blocks] == ["normal", "req", "high"]
    assert r.manifest.entries == [
        entry(blocks[0], False, "dropped: over budget (low, trusted_app; needs 20, 10 left)"),
        entry(blocks[1], True, "fits (normal, trusted_app)"),
        entry(blocks[2], True, "required"),
        entry(blocks[3], True, "fits (high, trusted_app)"),
    ]
    # available 45: only required + high
    r = build_context(blocks, budget=65, reserve_for_output=20)
    assert r.manifest.included == ["req", "high"]
    assert r.manifest.used == 40
    assert [e.reason for e in r.manifest.entries] == [
        "dropped: ranked below normal, which did not fit (low, trusted_app)",
        "dropped: over budget (normal, trusted_app; needs 20, 5 left)",
        "required",
        "fits (high, trusted_app)",
    ]
    # available 25: high goes too
    r = build_context(blocks, budget=25, reserve_for_output=0)
    assert r.manifest.included == ["req"]
    assert r.manifest.entries[3].reason == "dropped: over budget (high, trusted_app; needs 20, 5 left)"


def test_same_priority_lower_trust_dropped_first():
    blocks = [
        blk("ext", 10, trust="external_content"),
        blk("claim", 10, trust="user_claim"),
        blk("app", 10, trust="trusted_app"),
    ]
    r = build_context(blocks, budget=20, reserve_for_output=0)
    assert r.manifest.included == ["claim", "app"]
    assert r.manifest.entries[0].reason == "dropped: over budget (normal, external_content; needs 10, 0 left)"
    r = build_context(blocks, budget=19, reserve_for_output=0)
    assert r.manifest.included == ["app"]
    assert r.manifest.used == 10
    assert [e.reason for e in r.manifest.entries] == [
        "dropped: ranked below claim, which did not fit (normal, external_content)",
        "dropped: over budget (normal, user_claim; needs 10, 9 left)",
        "fits (normal, trusted_app)",
    ]


def test_priority_outranks_trust():
    blocks = [blk("high_ext", 10, priority="high", trust="external_content"), blk("normal_app", 10, priority="normal")]
    r = build_context(blocks, budget=10, reserve_for_output=0)
    assert r.manifest.included == ["high_ext"]


def test_same_priority_and_trust_older_observed_at_dropped_first():
    blocks = [
        blk("mid", 10, observed_at="2026-01-01T10:00:00.000Z"),
        blk("new", 10, observed_at="2026-01-01T11:00:00.000Z"),
        blk("old", 10, observed_at="2026-01-01T09:00:00.000Z"),
    ]
    r = build_context(blocks, budget=20, reserve_for_output=0)
    assert r.manifest.included == ["mid", "new"]
    assert r.manifest.dropped == ["old"]
    r = build_context(blocks, budget=10, reserve_for_output=0)
    assert r.manifest.included == ["new"]


def test_relevance_ranks_before_recency():
    blocks = [
        blk("old_relevant", 10, observed_at="2026-01-01T09:00:00.000Z", relevance=0.9),
        blk("new_irrelevant", 10, observed_at="2026-01-01T11:00:00.000Z", relevance=0.1),
    ]
    assert build_context(blocks, budget=10, reserve_for_output=0).manifest.included == ["old_relevant"]


def test_nothing_ranked_below_a_dropped_block_goes_in():
    """DESIGN's drop order is strict: raw history (low) never stays while evidence (normal) goes."""
    blocks = [
        blk("big_high", 30, priority="high"),
        blk("mid", 4, priority="normal"),
        blk("small_low", 5, priority="low"),
    ]
    r = build_context(blocks, budget=20, reserve_for_output=0)
    assert r.manifest.entries[0].reason == "dropped: over budget (high, trusted_app; needs 30, 20 left)"
    assert r.manifest.entries[1].reason == "dropped: ranked below big_high, which did not fit (normal, trusted_app)"
    assert r.manifest.entries[2].reason == "dropped: ranked below big_high, which did not fit (low, trusted_app)"
    assert r.manifest.used == 0


def test_budget_error_when_required_blocks_exceed_the_budget():
    blocks = [blk("r1", 30, priority="required"), blk("r2", 21, priority="required"), blk("n", 1)]
    with pytest.raises(BudgetError) as ei:
        build_context(blocks, budget=100, reserve_for_output=40, overhead_tokens=10, role="planner")
    # the smallest budget that works: required blocks 51 + overhead 10, plus the reserve 40
    assert str(ei.value) == (
        "planner needs at least 101 tokens: required blocks 61 + reserve 40; the budget 100 is too small, "
        "raise it to 101 or more"
    )
    assert (ei.value.required, ei.value.reserve, ei.value.budget, ei.value.minimum) == (61, 40, 100, 101)
    named = ei.value.for_task("t1")
    assert str(named) == (
        "planner of task t1 needs at least 101 tokens: required blocks 61 + reserve 40; rerun with --budget 101 or more"
    )
    assert pickle.loads(pickle.dumps(named)).minimum == 101 and str(pickle.loads(pickle.dumps(named))) == str(named)
    with pytest.raises(BudgetError, match=r"^prompt needs at least 91 tokens: required blocks 51 \+ reserve 40;"):
        build_context(blocks, budget=90, reserve_for_output=40)
    # exactly the available tokens is fine
    r = build_context(blocks, budget=101, reserve_for_output=40, overhead_tokens=10)
    assert r.manifest.included == ["r1", "r2"]
    assert r.manifest.used == 51


def test_duplicate_block_ids_raise_value_error():
    blocks = [blk("a", 1), blk("b", 1), blk("a", 2, priority="required")]
    with pytest.raises(ValueError, match="duplicate context block id 'a'"):
        build_context(blocks, budget=1000, reserve_for_output=0)


def test_empty_candidates():
    r = build_context([], budget=10, reserve_for_output=3, overhead_tokens=2)
    assert r.blocks == []
    assert (r.manifest.available, r.manifest.used, r.manifest.entries) == (5, 0, [])
