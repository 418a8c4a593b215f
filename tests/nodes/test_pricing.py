"""The bench's provider pricing rules (nodes/pricing.py): exact costs per call."""

from __future__ import annotations

import pytest

from graphs.bench.metrics import Stats, count_call
from graphs.bench.strategies import Call
from nodes.pricing import HEADLINE, RULES

R = {r.name: r for r in RULES}


def test_rules_named_with_source_and_date() -> None:
    assert [r.name for r in RULES] == ["flat", "openai-auto", "anthropic-breakpoints"] and HEADLINE == "flat"
    assert all(r.source and r.as_of for r in RULES)


def test_openai_automatic_prefix_caching() -> None:
    oa = R["openai-auto"]
    # below 1,024 nothing is cached; above, whole 128-token steps from 1,024
    assert [oa.cached(s) for s in (0, 1023, 1024, 1151, 1152, 5000)] == [0, 0, 1024, 1024, 1152, 4992]
    assert oa.cost(6000, 5000) == (6000 - 4992) + 0.1 * 4992
    assert oa.cost(2000, 900) == 2000.0


def test_anthropic_breakpoints_write_and_read() -> None:
    an = R["anthropic-breakpoints"]
    assert an.cost(3000, 2000) == 1.25 * 1000 + 0.1 * 2000
    assert an.cost(3000, 1000) == 1.25 * 3000  # under the 1,024 minimum: all written again
    assert R["flat"].cost(3000, 1000) == 2000 + 0.1 * 1000


def test_stats_sum_every_rule() -> None:
    s = Stats("t", "naive")
    for p, cached in ((2000, 0), (3000, 2000)):
        count_call(s, Call(index=0, prompt_tokens=p, fingerprints=[], text="", orphans=0), cached, 8000, "", [])
    assert s.costs == {
        "flat": 2000 + 1000 + 200.0,
        "openai-auto": 2000 + (3000 - 1920) + 192.0,
        "anthropic-breakpoints": 2500 + 1250 + 200.0,
    }
    assert s.effective_cost == s.costs["flat"]
    row = s.row()
    assert (row["cost_flat"], row["cost_openai-auto"], row["cost_anthropic-breakpoints"]) == (3200.0, 3272.0, 3950.0)


def test_rule_in_force_by_provider() -> None:
    from nodes.pricing import FLAT, rule_for_provider, rule_named

    assert rule_for_provider("openai").name == "openai-auto"
    assert rule_for_provider("anthropic") == rule_named("anthropic-breakpoints")
    assert rule_for_provider("") is FLAT and rule_for_provider("ollama") is FLAT
    with pytest.raises(ValueError) as exc:
        rule_named("nope")
    assert str(exc.value) == "unknown cache pricing rule 'nope'; use one of flat, openai-auto, anthropic-breakpoints"
