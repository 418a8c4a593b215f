"""When the executor transcript restarts: at the budget always (the cheapest restart that fits);
earlier when the cost model expects it to pay, never when it sends again more than it removes.
The rule is tested with the 4-characters-a-token counter, so the sizes below stay easy to read
(the counter itself: tests/context/test_tokens.py)."""

from __future__ import annotations

from context import apply_event, approx_tokens, new_event, replay
from context.events import ContextBuilt, TranscriptReset
from nodes import ExecutorRenderer, NodeEnv
from nodes.pricing import FLAT, RULES, rule_named
from nodes.render.restart import cycle_cost, restart_decision

TS = "2026-01-01T00:00:00.000Z"


def _ctx(env: NodeEnv, sizes: list[int]):
    ev = [
        new_event("task.created", {"task_id": "r", "original_request": "Read."}, actor="user", timestamp=TS),
        new_event("plan.created", {"steps": [{"id": "s1", "title": "read"}]}, actor="agent", timestamp=TS),
        new_event("step.started", {"step_id": "s1"}, actor="agent", timestamp=TS),
    ]
    for i, n in enumerate(sizes, start=1):
        out = "".join(f"call {i} line {k}: " + "z" * 40 + "\n" for k in range(n))  # no line repeats across calls
        ref = env.artifacts.put(out)
        ev += [
            new_event(
                "tool.called",
                {"call_id": f"c{i}", "step_id": "s1", "tool": "cat", "arguments": "{}"},
                actor="agent",
                timestamp=TS,
            ),
            new_event(
                "tool.result.received",
                {"call_id": f"c{i}", "status": "ok", "result_summary": out, "raw_ref": ref, "raw_chars": len(out)},
                actor="tool",
                timestamp=TS,
            ),
        ]
    return replay(ev)


def _calls(r) -> list[str]:
    return [b.id for b in r.blocks if b.id.startswith("tool.")]


def test_cycle_cost_is_the_least_mean_cost_per_call() -> None:
    # flat: a first call of 2,000 tokens with 1,000 cached costs 1,100; each next call reads the
    # prompt so far at 0.1 and sends 300 new: 500, 530, ... 650; the mean is least (650) over 7
    # calls, where the next call (680) would raise it
    assert cycle_cost(FLAT, start=2000, shared=1000, growth=300, limit=6000) == (650.0, 7)
    # a limit of 2,500 tokens ends the cycle after 2 calls: (1,100 + 500) / 2
    assert cycle_cost(FLAT, start=2000, shared=1000, growth=300, limit=2500) == (800.0, 2)
    # openai-auto caches in 128-token steps from 1,024; anthropic writes new tokens at 1.25
    assert cycle_cost(rule_named("openai-auto"), start=2000, shared=1000, growth=300, limit=6000) == (804.08, 10)
    assert cycle_cost(rule_named("anthropic-breakpoints"), start=2000, shared=1000, growth=300, limit=6000)[1] == 11
    assert [r.name for r in RULES] == ["flat", "openai-auto", "anthropic-breakpoints"]


def test_restarts_early_when_the_kept_calls_are_small() -> None:
    env = NodeEnv.sqlite(budget=4000, count_tokens=approx_tokens)  # 3,000 tokens for the prompt
    # two large calls (about 880 tokens each), then three small ones (about 75): a restart
    # removes 1,766 tokens and sends 262 again; expected to save 40.2 a call over 4 calls
    r = ExecutorRenderer().render(_ctx(env, [60, 60, 3, 3, 3]), env, [])
    assert r.keep_last == 3 and _calls(r) == ["tool.c3", "tool.c4", "tool.c5"]
    assert r.transcript_reset == TranscriptReset(
        reason="cost", removed=1766, resent=306, expected_saving=18.5, horizon=4, rule="flat"
    )
    assert r.prompt_tokens == 672
    # the same calls, the large ones last: a restart would send 1,766 again to remove 146 (the
    # guard: never more than it removes unless forced)
    ctx = _ctx(env, [3, 3, 60, 60, 3])
    r = ExecutorRenderer().render(ctx, env, [])
    assert not r.transcript_reset and _calls(r) == [f"tool.c{i}" for i in range(1, 6)]
    assert r.prompt_tokens == 2274
    d = restart_decision(ExecutorRenderer()._render(ctx, env, [], reset=False, digest=0), None, FLAT, 3000)
    assert (d.removed, d.resent, d.expected_saving) == (146, 1766, -822.5)
    # small calls only: the restart removes 171 and sends 146 again; not worth a restart
    ctx = _ctx(env, [10, 3, 3, 3])
    r = ExecutorRenderer().render(ctx, env, [])
    assert not r.transcript_reset and r.prompt_tokens == 679
    d = restart_decision(ExecutorRenderer()._render(ctx, env, [], reset=False, digest=0), None, FLAT, 3000)
    assert (d.removed, d.resent, d.expected_saving, d.horizon) == (171, 146, -39.5, 6)


def test_restarts_at_the_budget_with_the_cheapest_restart_that_fits() -> None:
    env = NodeEnv.sqlite(budget=3000, count_tokens=approx_tokens)  # 2,000 tokens for the prompt
    # 2 x 100 + 4 x 483 tokens of calls do not fit: forced. Kept in full, c4 and c5 fill the
    # next prompts to the budget; shown as digests (pinned until they leave) the restart leaves
    # room for a 4-call transcript, the cheapest
    ctx = _ctx(env, [3, 3, 30, 30, 30, 30])
    r = ExecutorRenderer().render(ctx, env, [])
    assert _calls(r) == ["tool.c4", "tool.c5", "tool.c6"]
    assert r.transcript_reset == TranscriptReset(
        reason="budget", removed=602, resent=325, expected_saving=-17.2, horizon=4, rule="flat", digests=2
    )
    assert r.prompt_tokens == 1074
    assert "[digest] ok;" in str(r.messages[-6].content) and "[digest]" not in str(r.messages[-2].content)
    # folded, the next prompt shows the same digests: the prompt is its own cached prefix
    built = ContextBuilt(
        call=1,
        role="executor",
        budget=3000,
        prompt_tokens=r.prompt_tokens,
        transcript_reset=r.transcript_reset,
        keep_last=3,
        delta_note=r.delta_note,
    )
    ctx = apply_event(ctx, new_event("context.built", built, actor="system"))
    assert ctx.evidence.transcript_checkpoint is not None and ctx.evidence.transcript_checkpoint.digests == 2
    again = ExecutorRenderer().render(ctx, env, [])
    assert not again.transcript_reset and again.messages == r.messages
