"""Identical-artifact reuse in the executor transcript: a repeated output points to the earlier
call instead of being sent again, and only while that call is still in the transcript."""

from __future__ import annotations

from context import new_event, replay
from nodes import ExecutorRenderer, NodeEnv
from nodes.render.executor import REUSE_MIN_CHARS

TS = "2026-01-01T00:00:00.000Z"


def _events(env: NodeEnv, outputs: list[str]) -> list:
    ev = [new_event("task.created", {"task_id": "r", "original_request": "Look twice."}, actor="user", timestamp=TS),
          new_event("plan.created", {"steps": [{"id": "s1", "title": "look"}]}, actor="agent", timestamp=TS),
          new_event("step.started", {"step_id": "s1"}, actor="agent", timestamp=TS)]
    for i, out in enumerate(outputs, start=1):
        ref = env.artifacts.put(out)
        ev.append(new_event("tool.called", {"call_id": f"c{i}", "step_id": "s1", "tool": "cat", "arguments": "{}"},
                            actor="agent", timestamp=TS))
        ev.append(new_event("tool.result.received", {"call_id": f"c{i}", "status": "ok", "result_summary": out,
                                                     "raw_ref": ref, "raw_chars": len(out)}, actor="tool", timestamp=TS))
    return ev


def _tool_bodies(env: NodeEnv, ctx) -> dict[str, str]:
    r = ExecutorRenderer().render(ctx, env, [])
    return {m.tool_call_id: m.content for m in r.messages if m.type == "tool"}


def test_repeated_output_points_to_the_first_call() -> None:
    env = NodeEnv.sqlite()
    big = "x" * REUSE_MIN_CHARS + "\n"
    ctx = replay(_events(env, [big, "other output", big]))
    bodies = _tool_bodies(env, ctx)
    ref = env.artifacts.put(big)
    assert big in bodies["c1"]
    assert big not in bodies["c3"]
    assert f"[identical to the output of call c1 above ({len(big)} chars); full output: {ref}]" in bodies["c3"]
    # short outputs are simply repeated
    small = "ok\n"
    bodies = _tool_bodies(env, replay(_events(env, [small, small])))
    assert small in bodies["c1"] and small in bodies["c2"]


def test_after_a_restart_the_repeat_is_rendered_in_full() -> None:
    env = NodeEnv.sqlite()
    big = "y" * REUSE_MIN_CHARS + "\n"
    ev = _events(env, [big, "a", "b", big])
    ev.append(new_event("context.built", {"call": 9, "role": "executor", "budget": 8000, "prompt_tokens": 1,
                                          "transcript_reset": True, "keep_last": 3}, actor="system", timestamp=TS))
    ctx = replay(ev)
    assert [r.id for r in ctx.evidence.recent_tool_calls] == ["c2", "c3", "c4"]
    assert big in _tool_bodies(env, ctx)["c4"]
