"""Identical-artifact reuse in the executor transcript: a repeated output points to the earlier
call instead of being sent again, and only while that call is still in the transcript."""

from __future__ import annotations

from context import new_event, replay
from nodes import ExecutorRenderer, NodeEnv
from nodes.render.executor import REUSE_MIN_CHARS

TS = "2026-01-01T00:00:00.000Z"


def _events(env: NodeEnv, outputs: list[str]) -> list:
    ev = [
        new_event("task.created", {"task_id": "r", "original_request": "Look twice."}, actor="user", timestamp=TS),
        new_event("plan.created", {"steps": [{"id": "s1", "title": "look"}]}, actor="agent", timestamp=TS),
        new_event("step.started", {"step_id": "s1"}, actor="agent", timestamp=TS),
    ]
    for i, out in enumerate(outputs, start=1):
        ref = env.artifacts.put(out)
        ev.append(
            new_event(
                "tool.called",
                {"call_id": f"c{i}", "step_id": "s1", "tool": "cat", "arguments": "{}"},
                actor="agent",
                timestamp=TS,
            )
        )
        ev.append(
            new_event(
                "tool.result.received",
                {"call_id": f"c{i}", "status": "ok", "result_summary": out, "raw_ref": ref, "raw_chars": len(out)},
                actor="tool",
                timestamp=TS,
            )
        )
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
    ev.append(
        new_event(
            "context.built",
            {
                "call": 9,
                "role": "executor",
                "budget": 8000,
                "prompt_tokens": 1,
                "transcript_reset": True,
                "keep_last": 3,
            },
            actor="system",
            timestamp=TS,
        )
    )
    ctx = replay(ev)
    assert [r.id for r in ctx.evidence.recent_tool_calls] == ["c2", "c3", "c4"]
    assert big in _tool_bodies(env, ctx)["c4"]


def test_a_run_of_lines_shown_earlier_becomes_a_pointer() -> None:
    from nodes.render.reuse import SPAN_MIN_RATIO, reuse_spans, span_marker

    code = [f"    {n}\tdef function_number_{n}(argument): return argument * {n}" for n in range(10, 20)]
    first = "\n".join(["header of the first view", *code])
    # the second view repeats lines 3-8 of the first (code[1:7]) between two new lines
    second = "\n".join(["new line before", *code[1:7], "new line after"])
    out = reuse_spans(second, [("c1", first)])
    assert out == "new line before\n[6 lines identical to lines 3-8 of the output of call c1 above]\nnew line after"
    assert sum(len(x) + 1 for x in code[1:7]) >= SPAN_MIN_RATIO * len(span_marker(6, 3, 8, "c1"))
    # a run shorter than twice its marker is sent as it is
    assert reuse_spans("\n".join(code[1:3]), [("c1", first)]) == "\n".join(code[1:3])
    # two lines are enough when they are long (here 2 x 100 chars against a 75-char marker)
    wide = ["a" * 99, "b" * 99]
    assert reuse_spans("\n".join(["x", *wide]), [("c7", "\n".join(wide))]) == (
        "x\n[2 lines identical to lines 1-2 of the output of call c7 above]"
    )
    short = "\n".join(["a = 1", "b = 2", "c = 3", "d = 4"])
    assert reuse_spans(short, [("c1", short)]) == short
    # the longest run wins; on a tie the oldest entry
    assert reuse_spans("\n".join(code), [("c0", "\n".join(code[:4])), ("c1", first)]) == (
        "[10 lines identical to lines 2-11 of the output of call c1 above]"
    )
    assert reuse_spans("\n".join(code[:5]), [("c0", "\n".join(code[:5])), ("c1", first)]) == (
        "[5 lines identical to lines 1-5 of the output of call c0 above]"
    )


def test_the_renderer_points_to_lines_of_an_earlier_call_in_the_transcript() -> None:
    env = NodeEnv.sqlite()
    view = "".join(f"{n:>6}\tvalue_{n} = compute_something(value_{n - 1}, factor={n})\n" for n in range(1, 41))
    lines = view.splitlines()
    reread = "\n".join(["edited file, lines 11-30:", *lines[10:30], "(end)"]) + "\n"
    bodies = _tool_bodies(env, replay(_events(env, [view, reread])))
    assert view in bodies["c1"]
    assert "[20 lines identical to lines 11-30 of the output of call c1 above]\n(end)" in bodies["c2"]
    assert lines[15] not in bodies["c2"]


def test_a_repeat_never_points_to_a_digest_or_a_dropped_call() -> None:
    """c1 and c3 return the same long output; c2's huge thought leaves no room for c1 (the
    builder drops it): c3 is then sent in full, not as a pointer to a call the prompt lacks.
    (Huge arguments no longer do: once a call has run they are compressed.)"""
    env = NodeEnv.sqlite(budget=8000)
    big = "".join(f"config line {i}: value_{i * 7919 % 1000} = enabled\n" for i in range(80))
    ev = _events(env, [big, "ok\n", big])
    note = "".join(f"{i % 1000:03d}" for i in range(6000))  # 18,000 digits: 6,000 o200k tokens
    ev[5] = new_event(
        "tool.called",
        {"call_id": "c2", "step_id": "s1", "tool": "cat", "arguments": "{}", "thought": note},
        actor="agent",
        timestamp=TS,
    )
    r = ExecutorRenderer().render(replay(ev), env, [])
    bodies = {m.tool_call_id: m.content for m in r.messages if m.type == "tool"}
    assert "c1" not in bodies and [e.id for e in r.manifest.entries if not e.included] == ["tool.c1", "tool.c2"]
    assert big in bodies["c3"] and "identical" not in bodies["c3"]
