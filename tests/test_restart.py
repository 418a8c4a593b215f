"""When the executor transcript restarts: at the budget always; earlier only when what the
restart sends again (new checkpoint + kept calls but the latest) is small next to what it drops.
The rule is tested with the 4-characters-a-token counter, so the sizes below stay easy to read
(the counter itself: test_tokens.py)."""

from __future__ import annotations

from context import approx_tokens, new_event, replay
from nodes import ExecutorRenderer, NodeEnv
from nodes.render.executor import RESTART_FILL, RESTART_GAIN

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


def test_restarts_early_when_the_kept_calls_are_small() -> None:
    env = NodeEnv.sqlite(
        budget=4000, count_tokens=approx_tokens
    )  # 3,000 tokens for the prompt; an early restart from 1,500
    # two large calls (910 tokens each), then three small ones (100): past half the limit
    r = ExecutorRenderer().render(_ctx(env, [60, 60, 3, 3, 3]), env, [])
    assert r.transcript_reset and r.keep_last == 3 and _calls(r) == ["tool.c3", "tool.c4", "tool.c5"]
    assert r.prompt_tokens == 721
    # the same calls, the large ones last: a restart would send them again, so it waits
    r = ExecutorRenderer().render(_ctx(env, [3, 3, 60, 60, 3]), env, [])
    assert not r.transcript_reset and _calls(r) == [f"tool.c{i}" for i in range(1, 6)]
    assert r.prompt_tokens == 2384 > RESTART_FILL * 3000
    # under half the limit nothing restarts, however cheap
    r = ExecutorRenderer().render(_ctx(env, [10, 3, 3, 3]), env, [])
    assert not r.transcript_reset and r.prompt_tokens == 767
    assert (RESTART_FILL, RESTART_GAIN) == (0.5, 0.3)


def test_restarts_at_the_budget_whatever_it_costs() -> None:
    env = NodeEnv.sqlite(budget=3000, count_tokens=approx_tokens)  # 2,000 tokens for the prompt
    # 2 x 100 + 4 x 483 tokens of calls do not fit; the restart sends c4 and c5 again
    # (966 tokens + the checkpoint) to drop 683: not worth it early, but forced here
    r = ExecutorRenderer().render(_ctx(env, [3, 3, 30, 30, 30, 30]), env, [])
    assert r.transcript_reset and _calls(r) == ["tool.c4", "tool.c5", "tool.c6"]
    assert r.prompt_tokens == 1896
