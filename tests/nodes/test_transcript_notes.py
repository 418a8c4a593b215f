"""The executor's state delta ("## Now") goes into the transcript only when it changed: an
unchanged delta is not sent again, a new step appends a new note, a restart starts over."""

from __future__ import annotations

from context import new_event, replay
from nodes import ExecutorRenderer, NodeEnv
from nodes.render.transcript import delta_text

TS = "2026-01-01T00:00:00.000Z"


def _ev(kind: str, payload: dict, actor: str = "agent"):
    return new_event(kind, payload, actor=actor, timestamp=TS)  # type: ignore[arg-type]


def _built(r, reset: bool = False, keep: int = 0):
    return _ev(
        "context.built",
        {
            "call": 1,
            "role": "executor",
            "budget": 8000,
            "prompt_tokens": r.prompt_tokens,
            "transcript_reset": reset,
            "keep_last": keep,
            "delta_note": r.delta_note,
        },
        "system",
    )


def _call(env: NodeEnv, cid: str, out: str, step: str = "s1") -> list:
    ref = env.artifacts.put(out)
    return [
        _ev("tool.called", {"call_id": cid, "step_id": step, "tool": "cat", "arguments": "{}"}),
        _ev(
            "tool.result.received",
            {"call_id": cid, "status": "ok", "result_summary": out, "raw_ref": ref, "raw_chars": len(out)},
            "tool",
        ),
    ]


def test_the_delta_is_sent_once_per_change() -> None:
    env = NodeEnv.sqlite()
    rend = ExecutorRenderer()
    ev = [
        _ev("task.created", {"task_id": "n", "original_request": "Look."}, "user"),
        _ev("plan.created", {"steps": [{"id": "s1", "title": "look"}, {"id": "s2", "title": "report"}]}),
        _ev("step.started", {"step_id": "s1", "objective": "look"}),
    ]
    ctx = replay(ev)
    r1 = rend.render(ctx, env, [])
    assert r1.delta_note == delta_text(ctx) and r1.delta_note.startswith(
        '## Now\nCurrent step s1, as the planner wrote it:\n<external_content source="agent:planner s1">\nlook\n'
    )
    assert [m.type for m in r1.messages] == ["system", "human", "human"] and r1.messages[-1].content == r1.delta_note

    ev += [_built(r1), *_call(env, "c1", "first output\n")]
    ctx = replay(ev)
    assert [(n.at, n.text) for n in ctx.evidence.transcript_notes] == [(0, r1.delta_note)]
    r2 = rend.render(ctx, env, [])
    assert r2.delta_note is None  # unchanged: not sent again
    assert [m.type for m in r2.messages] == ["system", "human", "human", "ai", "tool"]
    # call 2 starts with call 1's prompt: every message of call 1 is a prefix of call 2
    assert [m.content for m in r2.messages[:3]] == [m.content for m in r1.messages]
    assert {b.id for b in r2.blocks} >= {"step.delta", "tool.c1"}

    ev += [
        _built(r2),
        *_call(env, "c2", "second output\n"),
        _ev("step.completed", {"step_id": "s1", "summary": "looked"}),
        _ev("step.started", {"step_id": "s2"}),
    ]
    ctx = replay(ev)
    r3 = rend.render(ctx, env, [])
    assert (
        r3.delta_note is not None
        and "Current step s2" in r3.delta_note
        and 'Last step s1 (success):\n<external_content source="agent:complete_step s1">\nlooked\n' in r3.delta_note
    )
    assert [m.type for m in r3.messages][-3:] == ["ai", "tool", "human"] and r3.messages[-1].content == r3.delta_note
    ids = [b.id for b in r3.blocks]
    assert ids.index("step.delta") == len(ids) - 1 and sum(i.startswith("note.") for i in ids) == 1

    # a restart clears the notes; the delta comes again after the kept calls
    ev += [_built(r3), *_call(env, "c3", "third\n", "s2"), *_call(env, "c4", "fourth\n", "s2")]
    ev.append(
        _ev(
            "context.built",
            {
                "call": 4,
                "role": "executor",
                "budget": 8000,
                "prompt_tokens": 1,
                "transcript_reset": True,
                "keep_last": 3,
            },
            "system",
        )
    )
    ctx = replay(ev)
    assert ctx.evidence.transcript_notes == [] and [c.id for c in ctx.evidence.recent_tool_calls] == ["c2", "c3", "c4"]
    r4 = rend.render(ctx, env, [])
    assert r4.delta_note == r3.delta_note and r4.messages[-1].content == r3.delta_note


def test_a_transcript_full_of_notes_restarts() -> None:
    from nodes.render.executor import MAX_NOTES

    env = NodeEnv.sqlite()
    n = MAX_NOTES + 2
    ev = [
        _ev("task.created", {"task_id": "m", "original_request": "Tick every box."}, "user"),
        _ev("plan.created", {"steps": [{"id": f"s{i}", "title": f"box {i}"} for i in range(1, n + 1)]}),
    ]
    for i in range(1, MAX_NOTES + 1):  # steps that end without a tool call: a note each, no calls
        ev += [
            _ev("step.started", {"step_id": f"s{i}"}),
            _ev(
                "context.built",
                {"call": i, "role": "executor", "budget": 8000, "prompt_tokens": 1, "delta_note": f"note {i}"},
                "system",
            ),
            _ev("step.completed", {"step_id": f"s{i}", "summary": "ticked"}),
        ]
    ev.append(_ev("step.started", {"step_id": f"s{MAX_NOTES + 1}"}))
    ctx = replay(ev)
    assert len(ctx.evidence.transcript_notes) == MAX_NOTES and ctx.evidence.recent_tool_calls == []
    r = ExecutorRenderer().render(ctx, env, [])
    assert r.transcript_reset and r.delta_note == delta_text(ctx)
    assert [m.type for m in r.messages] == ["system", "human", "human", "human"]  # core, checkpoint, the note
    after = replay([_built(r, reset=True, keep=r.keep_last)], ctx)
    assert [(x.at, x.text) for x in after.evidence.transcript_notes] == [(0, r.delta_note)]
