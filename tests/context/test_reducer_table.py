"""The reducer's table of handlers: ``FOLDS`` plus ``UNFOLDED_KINDS`` is exactly ``EventKind``, and
``apply_event`` folds an event of each kind through its own handler."""

from __future__ import annotations

from typing import get_args

import pytest

import context.reducer as reducer
from context import EventKind, TaskContext, apply_event, new_event, replay
from context.reducer import FOLDS, UNFOLDED_KINDS

TS = "2026-01-01T00:00:00.000Z"

#: One valid payload per kind (the smallest that makes its handler change the context below).
PAYLOADS: dict[str, dict[str, object]] = {
    "task.created": {"task_id": "task-2", "original_request": "another task"},
    "plan.created": {"steps": [{"id": "p1", "title": "new plan"}]},
    "plan.updated": {"steps": [{"id": "p2", "title": "revised plan"}], "reason": "why not"},
    "step.started": {"step_id": "s2", "objective": "the second step"},
    "step.completed": {"step_id": "s1", "summary": "done"},
    "step.completion.requested": {"step_id": "s1", "after_calls": ["c1"], "summary": "when c1 is ok"},
    "tool.called": {"call_id": "c2", "tool": "bash", "arguments": '{"cmd": "pwd"}'},
    "tool.result.received": {"call_id": "c1", "result_summary": "a.py\n"},
    "permission.requested": {"call_id": "c1", "tool": "bash", "reason": "writes"},
    "permission.granted": {"call_id": "c1", "tool": "bash", "arguments": '{"cmd": "ls -a"}'},
    "permission.denied": {"call_id": "c1", "tool": "bash", "reason": "no"},
    "checkpoint.created": {"checkpoint_id": "ck-1"},
    "file.modified": {"path": "src/a.py"},
    "error.occurred": {"error_id": "e2", "message": "boom"},
    "error.resolved": {"error_id": "e1", "resolution": "fixed"},
    "user.interrupted": {},
    "resume.started": {"token": "tok"},
    "context.built": {"call": 1, "role": "executor", "budget": 1000, "prompt_tokens": 10, "delta_note": "n"},
    "review.completed": {"verdict": "revise"},
    "recovery.decided": {"decision": "stop"},
    "task.completed": {"summary": "all done"},
    "memory.proposed": {"text": "uses pytest"},
    "memory.confirmed": {"kind": "fact", "text": "uses pytest"},
    "memory.forgotten": {"key": "m_0123456789ab", "text": "ports are fixed"},
    "memory.loaded": {"memories": [{"key": "m_0123456789ab", "text": "ports are fixed", "confirmed_at": TS}]},
    "state.edited": {"changes": {"identity": {"constraints": ["keep tags"]}}},
    "fact.stale": {"fact_id": "s0.f1", "path": "a.py", "old_sha": "aa", "new_sha": "bb", "cause": "resume"},
    "role.reported": {"role": "tester", "verdict": "fail", "items": ["get() after put() is stale"]},
    "task.forked": {"task_id": "task-1b", "parent_task_id": "task-1", "fork_seq": 7, "schema_version": 4},
}


def _ev(kind: str, payload: dict[str, object], seq: int = 0):
    e = new_event(kind, payload, actor="agent", timestamp=TS)
    return e.model_copy(update={"seq": seq}) if seq else e


def _start() -> TaskContext:
    """A task with a plan, a running step s1, a pending call c1, an open error e1, waiting for approval,
    and one confirmed fact."""
    events = [
        _ev("task.created", {"task_id": "task-1", "original_request": "fix it"}),
        _ev("plan.created", {"steps": [{"id": "s1", "title": "one"}, {"id": "s2", "title": "two"}]}),
        _ev("step.started", {"step_id": "s1"}),
        _ev("tool.called", {"call_id": "c1", "tool": "bash", "step_id": "s1"}),
        _ev("error.occurred", {"error_id": "e1", "message": "first"}),
        _ev("permission.requested", {"call_id": "c1", "tool": "bash", "reason": "first ask"}),
        _ev("memory.confirmed", {"text": "ports are fixed"}),
    ]
    return replay(events)


def test_the_table_and_the_unfolded_list_are_exactly_the_event_kinds():
    kinds = list(get_args(EventKind))
    assert len(kinds) == 29
    assert not set(FOLDS) & UNFOLDED_KINDS
    assert sorted([*FOLDS, *UNFOLDED_KINDS]) == sorted(kinds)
    assert UNFOLDED_KINDS == frozenset()
    assert sorted(PAYLOADS) == sorted(kinds)


def test_each_kind_has_its_own_named_handler():
    assert {k: f.__name__ for k, f in FOLDS.items()} == {
        "task.created": "_on_task_created",
        "plan.created": "_on_plan_created",
        "plan.updated": "_on_plan_created",
        "step.started": "_on_step_started",
        "step.completed": "_on_step_completed",
        "step.completion.requested": "_on_step_completion_requested",
        "tool.called": "_on_tool_called",
        "tool.result.received": "_on_tool_result_received",
        "permission.requested": "_on_permission_requested",
        "permission.granted": "_on_permission_granted",
        "permission.denied": "_on_permission_denied",
        "checkpoint.created": "_on_checkpoint_created",
        "file.modified": "_on_file_modified",
        "error.occurred": "_on_error_occurred",
        "error.resolved": "_on_error_resolved",
        "user.interrupted": "_on_user_interrupted",
        "resume.started": "_on_resume_started",
        "context.built": "_on_context_built",
        "review.completed": "_on_review_completed",
        "recovery.decided": "_on_recovery_decided",
        "task.completed": "_on_task_completed",
        "memory.proposed": "_on_memory_proposed",
        "memory.confirmed": "_on_memory_confirmed",
        "memory.forgotten": "_on_memory_forgotten",
        "memory.loaded": "_on_memory_loaded",
        "state.edited": "_on_state_edited",
        "fact.stale": "_on_fact_stale",
        "role.reported": "_on_role_reported",
        "task.forked": "_on_task_forked",
    }


def test_the_table_is_read_only():
    with pytest.raises(TypeError):
        FOLDS["task.created"] = FOLDS["task.completed"]


@pytest.mark.parametrize("kind", sorted(FOLDS))
def test_an_event_of_each_folded_kind_goes_through_its_handler(kind, monkeypatch):
    calls: list[tuple[str, TaskContext, object, TaskContext]] = []

    def spy(k, handler):
        def wrapped(ctx, e):
            out = handler(ctx, e)
            calls.append((k, ctx, e, out))
            return out

        return wrapped

    start = _start()
    monkeypatch.setattr(reducer, "FOLDS", {k: spy(k, f) for k, f in FOLDS.items()})
    e = _ev(kind, PAYLOADS[kind], seq=start.events.cursor + 1)
    out = apply_event(start, e)

    assert [(k, c is start, x is e) for k, c, x, _ in calls] == [(kind, True, True)]
    by_handler = calls[0][3]
    # the handler's context, with only the events view moved on by apply_event
    assert by_handler != start
    assert out.model_dump(exclude={"events"}) == by_handler.model_dump(exclude={"events"})
    assert (out.events.cursor, out.events.recent[-1].kind) == (start.events.cursor + 1, kind)
