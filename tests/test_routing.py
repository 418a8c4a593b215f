"""Routers: exact next node for each state they can meet."""

from __future__ import annotations

from context import Control, ErrorRecord, Errors, Evidence, Plan, PlanStep, TaskContext, ToolCallRecord
from graphs import routing
from langgraph.graph import END


def ctx(**kw) -> TaskContext:
    return TaskContext(**kw)


STEPS = [PlanStep(id="s1", title="a", status="done"), PlanStep(id="s2", title="b", depends_on=["s1"])]


def test_after_planner() -> None:
    assert routing.after_planner(ctx(plan=Plan(steps=STEPS))) == "executor"
    assert routing.after_planner(ctx()) == END
    assert routing.after_planner(ctx(plan=Plan(steps=STEPS), control=Control(status="failed"))) == END


def test_after_executor() -> None:
    pending = Evidence(recent_tool_calls=[ToolCallRecord(id="c1", tool="t", status="pending")])
    assert routing.after_executor(ctx(plan=Plan(steps=STEPS), evidence=pending)) == "tools"
    assert routing.after_executor(ctx(plan=Plan(steps=STEPS))) == "executor"  # s2 is runnable
    assert routing.after_executor(ctx(plan=Plan(steps=STEPS, current_step_id="s2"))) == "executor"
    done = [s.model_copy(update={"status": "done"}) for s in STEPS]
    assert routing.after_executor(ctx(plan=Plan(steps=done))) == "reviewer"
    blocked = [STEPS[0].model_copy(update={"status": "failed"}), STEPS[1]]
    assert routing.after_executor(ctx(plan=Plan(steps=blocked))) == "reviewer"
    assert routing.after_executor(ctx(plan=Plan(steps=STEPS), control=Control(status="completed"))) == END
    # a dict (as get_state returns) routes the same
    assert routing.after_executor(ctx(plan=Plan(steps=STEPS), evidence=pending).model_dump()) == "tools"


def test_after_tools() -> None:
    err = Evidence(recent_tool_calls=[ToolCallRecord(id="c1", tool="t", status="error")])
    assert routing.after_tools(ctx(evidence=err)) == "recovery"
    handled = Errors(error_history=[ErrorRecord(id="err-1", call_id="c1")])
    assert routing.after_tools(ctx(evidence=err, errors=handled)) == "executor"
    ok = Evidence(recent_tool_calls=[ToolCallRecord(id="c1", tool="t", status="ok")])
    assert routing.after_tools(ctx(evidence=ok)) == "executor"


def test_after_recovery_and_reviewer() -> None:
    assert routing.after_recovery(ctx(plan=Plan(steps=STEPS, status="revising"))) == "planner"
    assert routing.after_recovery(ctx(plan=Plan(steps=STEPS, status="executing"))) == "executor"
    assert routing.after_recovery(ctx(control=Control(status="failed"))) == END
    assert routing.after_reviewer(ctx(plan=Plan(steps=STEPS, status="revising"))) == "planner"
    assert routing.after_reviewer(ctx(control=Control(status="completed"))) == END
