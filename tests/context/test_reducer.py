"""Exact expected values for the pure reducer ``context.reducer.apply_event`` / ``replay``."""

from __future__ import annotations

import pytest

from context import (
    ErrorRecord,
    EventSummary,
    Finding,
    PlanStep,
    TaskContext,
    ToolCallRecord,
    TranscriptCheckpoint,
    apply_event,
    new_event,
    replay,
)
from context.windows import RECENT_EVENTS_WINDOW

TS = "2026-01-01T00:00:00.000Z"


def ev(kind, payload, seq=0, actor="agent", ts=TS):
    e = new_event(kind, payload, actor=actor, timestamp=ts)
    return e.model_copy(update={"seq": seq}) if seq else e


def task_created(seq=1):
    return ev(
        "task.created",
        {
            "task_id": "task-1",
            "original_request": "  Fix the login bug\n\nDo NOT modify auth.go!  ",
            "constraints": ["do not modify auth.go", "  keep   spacing  "],
            "success_criteria": ["tests pass"],
            "non_goals": ["refactor"],
            "allowed_tools": ["bash", "read_file"],
            "denied_tools": ["rm"],
            "requires_approval": ["write_file"],
            "file_scopes": ["src/**", "tests/*.py"],
        },
        seq=seq,
        actor="user",
    )


def plan_payload(*step_ids, goal="fix login", criteria=(), reason=""):
    return {
        "interpreted_goal": goal,
        "success_criteria": list(criteria),
        "steps": [{"id": s, "title": f"title {s}"} for s in step_ids],
        "reason": reason,
    }


def tool_called(call_id, seq=0, tool="bash", arguments='{"cmd": "ls"}', step_id="s1"):
    return ev(
        "tool.called",
        {"call_id": call_id, "tool": tool, "arguments": arguments, "step_id": step_id, "thought": f"why {call_id}"},
        seq=seq,
    )


def tool_result(call_id, seq=0, status="ok"):
    return ev(
        "tool.result.received",
        {
            "call_id": call_id,
            "status": status,
            "result_summary": f"summary {call_id}",
            "raw_ref": f"artifact://sha256:{'a' * 64}",
            "raw_chars": 42,
        },
        seq=seq,
        actor="tool",
    )


# ---------------------------------------------------------------------------------- task


def test_task_created_sets_identity_and_permissions_verbatim():
    ctx = apply_event(TaskContext(), task_created())
    assert ctx.identity.model_dump() == {
        "task_id": "task-1",
        "original_request": "  Fix the login bug\n\nDo NOT modify auth.go!  ",
        "interpreted_goal": "",
        "success_criteria": ["tests pass"],
        "non_goals": ["refactor"],
        "constraints": ["do not modify auth.go", "  keep   spacing  "],
        "constraint_sources": {},
        "criteria_sources": {},
    }
    assert ctx.permissions.model_dump() == {
        "allowed_tools": ["bash", "read_file"],
        "denied_tools": ["rm"],
        "requires_approval": ["write_file"],
        "file_scopes": ["src/**", "tests/*.py"],
    }
    assert ctx.control.status == "running"
    assert ctx.task_id == "task-1"
    assert ctx.events.cursor == 1
    assert ctx.events.recent == [
        EventSummary(seq=1, kind="task.created", actor="user", timestamp=TS, summary="Fix the login bug")
    ]
    assert ctx.events.counts == {"task.created": 1}


# ---------------------------------------------------------------------------------- plan


def test_plan_created_sets_plan_and_merges_goal_fields():
    ctx = replay(
        [
            task_created(1),
            ev("plan.created", plan_payload("s1", "s2", criteria=["tests pass", "no lint errors"]), seq=2),
        ]
    )
    assert ctx.plan.version == 1
    assert ctx.plan.status == "approved"
    assert ctx.plan.current_step_id is None
    assert ctx.plan.steps == [
        PlanStep(id="s1", title="title s1", status="pending"),
        PlanStep(id="s2", title="title s2", status="pending"),
    ]
    assert ctx.identity.interpreted_goal == "fix login"
    # existing criteria first, new ones appended, no duplicates
    assert ctx.identity.success_criteria == ["tests pass", "no lint errors"]
    assert ctx.current_step is None
    assert ctx.events.recent[-1].summary == "2 steps"


def test_plan_updated_increments_version_and_keeps_done_steps_done():
    events = [
        task_created(1),
        ev("plan.created", plan_payload("s1", "s2"), seq=2),
        ev("step.started", {"step_id": "s1", "objective": "look"}, seq=3),
        ev("step.completed", {"step_id": "s1", "result": "success", "summary": "looked"}, seq=4),
        # the new plan lists s1 as pending again; it was completed, so it stays done
        ev("plan.updated", plan_payload("s1", "s2", "s3", goal="", reason="found more"), seq=5),
    ]
    ctx = replay(events)
    assert ctx.plan.version == 2
    assert ctx.plan.status == "approved"
    assert [(s.id, s.status) for s in ctx.plan.steps] == [("s1", "done"), ("s2", "pending"), ("s3", "pending")]
    assert ctx.progress.completed_steps == ["s1"]
    # an empty interpreted_goal keeps the previous one
    assert ctx.identity.interpreted_goal == "fix login"
    assert ctx.events.recent[-1].summary == "3 steps: found more"
    assert ctx.events.counts == {
        "task.created": 1,
        "plan.created": 1,
        "step.started": 1,
        "step.completed": 1,
        "plan.updated": 1,
    }


# ---------------------------------------------------------------------------------- steps


def test_step_started_marks_running_and_sets_current_step():
    ctx = replay(
        [
            task_created(1),
            ev("plan.created", plan_payload("s1", "s2"), seq=2),
            ev(
                "step.started",
                {
                    "step_id": "s2",
                    "objective": "read the code",
                    "expected_output": "a summary",
                    "input_context": ["auth.py"],
                    "allowed_tools": ["read_file"],
                    "constraints": ["read only"],
                    "risk_level": "medium",
                },
                seq=3,
            ),
        ]
    )
    assert ctx.plan.status == "executing"
    assert ctx.plan.current_step_id == "s2"
    assert [(s.id, s.status) for s in ctx.plan.steps] == [("s1", "pending"), ("s2", "running")]
    assert ctx.current_step is not None
    assert ctx.current_step.model_dump() == {
        "objective": "read the code",
        "expected_output": "a summary",
        "input_context": ["auth.py"],
        "allowed_tools": ["read_file"],
        "constraints": ["read only"],
        "risk_level": "medium",
    }
    assert ctx.control.status == "running"
    assert ctx.events.recent[-1].summary == "s2: read the code"


def test_step_completed_records_progress_and_appends_findings():
    f1 = {"id": "f1", "statement": "bug is in login()", "evidence_refs": ["artifact://sha256:" + "b" * 64]}
    f2 = {"id": "f2", "statement": "fix applied"}
    ctx = replay(
        [
            task_created(1),
            ev("plan.created", plan_payload("s1", "s2"), seq=2),
            ev("step.started", {"step_id": "s1"}, seq=3),
            ev(
                "step.completed",
                {
                    "step_id": "s1",
                    "result": "success",
                    "summary": "found it",
                    "findings": [f1],
                    "changed_artifacts": ["notes.md"],
                    "unresolved_issues": ["flaky test"],
                },
                seq=4,
            ),
        ]
    )
    assert [(s.id, s.status) for s in ctx.plan.steps] == [("s1", "done"), ("s2", "pending")]
    assert ctx.plan.status == "executing"  # not all steps are done yet
    assert ctx.plan.current_step_id is None
    assert ctx.current_step is None
    assert ctx.progress.completed_steps == ["s1"]
    assert ctx.progress.last_step.model_dump() == {
        "id": "s1",
        "result": "success",
        "summary": "found it",
        "findings": ["bug is in login()"],
        "changed_artifacts": ["notes.md"],
        "unresolved_issues": ["flaky test"],
        "provenance": "agent_claim",  # the executor model wrote them: the agent's claim
        "rests_on": {},  # no workspace read recorded (context.freshness)
        "head": None,
    }
    assert ctx.evidence.findings == [Finding(**f1)]
    assert ctx.evidence.findings[0].provenance == "agent_claim"

    ctx = replay(
        [
            ev("step.started", {"step_id": "s2"}, seq=5),
            ev(
                "step.completed", {"step_id": "s2", "result": "partial", "summary": "done-ish", "findings": [f2]}, seq=6
            ),
        ],
        ctx,
    )
    assert ctx.progress.completed_steps == ["s1", "s2"]
    assert ctx.progress.last_step.id == "s2"
    assert ctx.progress.last_step.result == "partial"
    assert ctx.evidence.findings == [Finding(**f1), Finding(id="f2", statement="fix applied", evidence_refs=[])]
    assert [(s.id, s.status) for s in ctx.plan.steps] == [("s1", "done"), ("s2", "done")]
    assert ctx.plan.status == "completed"
    assert ctx.events.recent[-1].summary == "s2 partial: done-ish"


@pytest.mark.parametrize(
    ("result", "step_status", "completed"),
    [("success", "done", ["s1"]), ("partial", "done", ["s1"]), ("failed", "failed", []), ("blocked", "blocked", [])],
)
def test_step_completed_result_maps_to_step_status(result, step_status, completed):
    ctx = replay(
        [
            task_created(1),
            ev("plan.created", plan_payload("s1"), seq=2),
            ev("step.started", {"step_id": "s1"}, seq=3),
            ev("step.completed", {"step_id": "s1", "result": result}, seq=4),
        ]
    )
    assert ctx.plan.steps[0].status == step_status
    assert ctx.progress.completed_steps == completed
    assert ctx.progress.last_step.result == result
    assert ctx.plan.status == ("completed" if step_status == "done" else "executing")


# ---------------------------------------------------------------------------------- tools


def test_tool_called_and_result_received_update_records_and_executor_steps():
    ctx = replay([task_created(1), tool_called("c1", seq=2, arguments='{"cmd": "ls -la"}')])
    assert ctx.evidence.recent_tool_calls == [
        ToolCallRecord(
            id="c1",
            step_id="s1",
            tool="bash",
            arguments='{"cmd": "ls -la"}',
            result_summary="",
            status="pending",
            timestamp=TS,
            raw_ref=None,
            thought="why c1",
        )
    ]
    assert ctx.progress.executor_steps == 0
    assert ctx.events.recent[-1].summary == 'bash {"cmd": "ls -la"}'

    ctx = replay([tool_result("c1", seq=3), tool_called("c2", seq=4), tool_result("c2", seq=5, status="error")], ctx)
    assert [(r.id, r.status, r.result_summary, r.raw_ref) for r in ctx.evidence.recent_tool_calls] == [
        ("c1", "ok", "summary c1", "artifact://sha256:" + "a" * 64),
        ("c2", "error", "summary c2", "artifact://sha256:" + "a" * 64),
    ]
    assert ctx.progress.executor_steps == 2
    assert ctx.events.recent[-1].summary == "c2 error (42 chars)"
    assert ctx.events.counts["tool.called"] == 2
    assert ctx.events.counts["tool.result.received"] == 2


def test_tool_called_again_with_same_id_replaces_record_at_end():
    ctx = replay([tool_called("c1", seq=1), tool_called("c2", seq=2), tool_called("c1", seq=3, tool="grep")])
    assert [(r.id, r.tool) for r in ctx.evidence.recent_tool_calls] == [("c2", "bash"), ("c1", "grep")]


# ---------------------------------------------------------------------------------- errors


def test_errors_history_last_and_resolved_keep_resolution():
    ctx = replay(
        [
            task_created(1),
            ev(
                "error.occurred",
                {"error_id": "e1", "source": "tool", "message": "boom", "step_id": "s1", "call_id": "c1"},
                seq=2,
            ),
            ev("error.occurred", {"error_id": "e2", "source": "model", "message": "bad json"}, seq=3),
        ]
    )
    e1 = ErrorRecord(id="e1", step_id="s1", source="tool", message="boom", call_id="c1", timestamp=TS, resolution=None)
    e2 = ErrorRecord(
        id="e2", step_id=None, source="model", message="bad json", call_id=None, timestamp=TS, resolution=None
    )
    assert ctx.errors.last_error == e2
    assert ctx.errors.error_history == [e1, e2]
    assert ctx.errors.resolved_errors == []
    assert ctx.events.recent[-1].summary == "e2: bad json"

    # resolving an older error keeps last_error
    ctx = apply_event(ctx, ev("error.resolved", {"error_id": "e1", "resolution": "retried"}, seq=4))
    assert ctx.errors.last_error == e2
    assert ctx.errors.resolved_errors == [e1.model_copy(update={"resolution": "retried"})]
    assert ctx.errors.error_history == [e1, e2]  # history is not rewritten

    # resolving the last error clears last_error
    ctx = apply_event(ctx, ev("error.resolved", {"error_id": "e2", "resolution": "re-prompted"}, seq=5))
    assert ctx.errors.last_error is None
    assert ctx.errors.resolved_errors == [
        e1.model_copy(update={"resolution": "retried"}),
        e2.model_copy(update={"resolution": "re-prompted"}),
    ]
    assert ctx.errors.error_history == [e1, e2]

    # a second resolution of the same error changes nothing but the event view
    again = apply_event(ctx, ev("error.resolved", {"error_id": "e1", "resolution": "other"}, seq=6))
    assert again.errors == ctx.errors
    assert again.events.cursor == 6

    # resolving an unknown error records nothing
    unknown = apply_event(ctx, ev("error.resolved", {"error_id": "nope", "resolution": "x"}, seq=6))
    assert unknown.errors == ctx.errors


# ---------------------------------------------------------------------------------- context.built


def _built(seq, *, reset, keep_last=0, role="executor", fingerprints=()):
    return ev(
        "context.built",
        {
            "call": seq,
            "role": role,
            "budget": 1000,
            "prompt_tokens": 500,
            "transcript_reset": reset,
            "keep_last": keep_last,
            "fingerprints": list(fingerprints),
        },
        seq=seq,
        actor="system",
    )


def _ctx_with_calls(n):
    events = [
        task_created(1),
        ev("plan.created", plan_payload("s1", "s2"), seq=2),
        ev("step.started", {"step_id": "s1"}, seq=3),
        ev(
            "step.completed",
            {"step_id": "s1", "summary": "explored", "findings": [{"id": "f1", "statement": "x is broken"}]},
            seq=4,
        ),
        ev("step.started", {"step_id": "s2"}, seq=5),
    ]
    seq = 6
    for i in range(1, n + 1):
        events.append(tool_called(f"c{i}", seq=seq, arguments=f'{{"cmd": "echo {i}"}}', step_id="s2"))
        events.append(tool_result(f"c{i}", seq=seq + 1))
        seq += 2
    return replay(events), seq


def test_context_built_without_reset_only_updates_event_view():
    ctx, seq = _ctx_with_calls(3)
    out = apply_event(ctx, _built(seq, reset=False, fingerprints=["abc:10", "def:20"]))
    assert out.evidence == ctx.evidence
    assert out.events.counts["context.built"] == 1
    assert out.events.counts["context.built:executor"] == 1
    assert out.events.prompt_fingerprints == {"executor": ["abc:10", "def:20"]}
    assert out.events.recent[-1].summary == "executor call 12: 500 tokens"


def test_context_built_with_reset_trims_calls_and_materialises_checkpoint():
    ctx, seq = _ctx_with_calls(5)
    assert seq == 16
    out = apply_event(ctx, _built(16, reset=True, keep_last=2))
    assert [r.id for r in out.evidence.recent_tool_calls] == ["c4", "c5"]
    assert out.evidence.recent_tool_calls == ctx.evidence.recent_tool_calls[3:]
    assert out.evidence.omitted_calls == 3
    summary = (
        "3 earlier tool calls are out of the transcript; their exact output "
        "stays in the artifact store (fetch a ref with read_artifact)."
    )
    assert out.evidence.omitted_summary == summary
    ref = "artifact://sha256:" + "a" * 64
    assert out.evidence.transcript_checkpoint == TranscriptCheckpoint(
        at_seq=16,
        plan_version=1,
        plan_lines=["s1 [done] title s1", "s2 [running] title s2"],
        step_summary="s1 (success): explored",
        completed_summaries=[
            f'c1 bash {{"cmd": "echo 1"}} -> ok, {ref}',
            f'c2 bash {{"cmd": "echo 2"}} -> ok, {ref}',
            f'c3 bash {{"cmd": "echo 3"}} -> ok, {ref}',
        ],
        findings=[Finding(id="f1", statement="x is broken")],
        omitted_summary=summary,
    )
    assert out.events.recent[-1].summary == "executor call 16: 500 tokens (transcript restarted)"

    # a second restart accumulates the omitted count
    out2 = replay([tool_called("c6", seq=17), tool_result("c6", seq=18), _built(19, reset=True, keep_last=1)], out)
    assert [r.id for r in out2.evidence.recent_tool_calls] == ["c6"]
    assert out2.evidence.omitted_calls == 5
    assert out2.evidence.transcript_checkpoint.at_seq == 19
    assert out2.evidence.omitted_summary.startswith("5 earlier tool calls are out of the transcript;")


def test_context_built_reset_with_keep_last_zero_empties_transcript():
    ctx, seq = _ctx_with_calls(2)
    out = apply_event(ctx, _built(seq, reset=True, keep_last=0))
    assert out.evidence.recent_tool_calls == []
    assert out.evidence.omitted_calls == 2


def test_context_built_reset_keep_last_larger_than_calls_keeps_all():
    # regression: calls[len - keep_last:] with a negative start kept only the last call
    ctx, seq = _ctx_with_calls(2)
    out = apply_event(ctx, _built(seq, reset=True, keep_last=3))
    assert [r.id for r in out.evidence.recent_tool_calls] == ["c1", "c2"]
    assert out.evidence.omitted_calls == 0


# ---------------------------------------------------------------------------------- cursor


def test_folding_an_event_at_or_before_the_cursor_is_a_no_op():
    e1, e2, e3 = task_created(1), tool_called("c1", seq=2), tool_result("c1", seq=3)
    ctx = replay([e1, e2, e3])
    assert ctx.events.cursor == 3
    assert apply_event(ctx, e3) is ctx
    assert apply_event(ctx, e2) is ctx
    # even a different event with an old seq is ignored
    assert apply_event(ctx, tool_called("c9", seq=3)) is ctx
    assert replay([e1, e2, e3, e1, e2, e3]).model_dump() == ctx.model_dump()
    assert replay([e1, e2, e3], ctx) is ctx


def test_seq_zero_is_folded_at_cursor_plus_one():
    ctx = replay([task_created(1), tool_called("c1", seq=2)])
    out = apply_event(ctx, tool_result("c1"))  # seq 0: not yet appended
    assert out.events.cursor == 3
    assert out.events.recent[-1].seq == 3
    assert out.progress.executor_steps == 1
    # an unappended event is folded every time (only appended events are idempotent)
    assert apply_event(out, tool_result("c1")).events.cursor == 4


def test_events_window_is_bounded_and_counts_every_kind():
    assert RECENT_EVENTS_WINDOW == 20
    events = [task_created(1)]
    for i in range(12):
        events.append(tool_called(f"c{i}", seq=len(events) + 1))
        events.append(tool_result(f"c{i}", seq=len(events) + 1))
    assert len(events) == 25
    ctx = replay(events)
    assert ctx.events.cursor == 25
    assert [s.seq for s in ctx.events.recent] == list(range(6, 26))
    assert ctx.events.recent[0] == EventSummary(
        seq=6, kind="tool.called", actor="agent", timestamp=TS, summary='bash {"cmd": "ls"}'
    )
    assert ctx.events.recent[-1] == EventSummary(
        seq=25, kind="tool.result.received", actor="tool", timestamp=TS, summary="c11 ok (42 chars)"
    )
    assert ctx.events.counts == {"task.created": 1, "tool.called": 12, "tool.result.received": 12}
    assert len(ctx.evidence.recent_tool_calls) == 12  # the window bounds only the summaries


def test_event_summary_is_one_line_and_capped_at_160_chars():
    ctx = apply_event(TaskContext(), ev("error.occurred", {"error_id": "e1", "message": "x  " * 100 + "\nmore"}, seq=1))
    s = ctx.events.recent[0].summary
    assert len(s) == 160
    assert s == ("e1: " + " ".join(["x"] * 100))[:157] + "..."


# ---------------------------------------------------------------------------------- purity


def test_apply_event_never_mutates_its_input():
    ctx, seq = _ctx_with_calls(3)
    events = [
        ev("permission.requested", {"call_id": "c9", "tool": "write_file", "reason": "writes"}, seq=seq),
        ev("permission.denied", {"call_id": "c9", "tool": "write_file"}, seq=seq + 1),
        ev("file.modified", {"path": "src/a.py"}, seq=seq + 2),
        ev("error.occurred", {"error_id": "e1", "message": "boom"}, seq=seq + 3),
        ev("error.resolved", {"error_id": "e1", "resolution": "ok"}, seq=seq + 4),
        ev("step.completed", {"step_id": "s2", "findings": [{"id": "f2", "statement": "y"}]}, seq=seq + 5),
        ev("plan.updated", plan_payload("s1", "s2", "s3"), seq=seq + 6),
        _built(seq + 7, reset=True, keep_last=1, fingerprints=["a:1"]),
        ev("memory.proposed", {"text": "use pytest"}, seq=seq + 8),
        ev("memory.confirmed", {"kind": "convention", "text": "use pytest"}, seq=seq + 9),
        ev("task.completed", {"summary": "done"}, seq=seq + 10),
    ]
    for e in events:
        before = ctx.model_dump()
        out = apply_event(ctx, e)
        assert ctx.model_dump() == before, e.kind
        assert out.model_dump() != before, e.kind
        ctx = out
    assert ctx.memory.project_conventions == ["use pytest"]
    assert ctx.memory.working_memory == []
    assert ctx.control.status == "completed"


def test_replay_equals_a_left_fold_and_does_not_mutate_the_start():
    ctx, seq = _ctx_with_calls(2)
    start_dump = ctx.model_dump()
    tail = [tool_called("c3", seq=seq), tool_result("c3", seq=seq + 1)]
    manual = apply_event(apply_event(ctx, tail[0]), tail[1])
    assert replay(tail, ctx).model_dump() == manual.model_dump()
    assert ctx.model_dump() == start_dump
    assert replay([]) == TaskContext()
